"""Every demo page and the home teaser under AppTest in English, German and Vietnamese:
the controls, captions, tables, charts and the engine's explanations are in
the page's language (no English sentence of the catalog left), numbers written its way."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from memory.config import ModelConfig
from memory.strategies import parse_strategies
from tests.demo_pages.test_pages import TINY, no_errors
from tests.lessons.test_lesson_pages_i18n import page_text
from tools.translations import untranslated_on_page

LANGUAGES = ("en", "de", "vi")
PAGES = {
    "pages/demos/compare.py": {**TINY, "strategy": "every-layer,sqrt"},
    "pages/demos/timeline.py": {**TINY, "strategy": "every-layer"},
    "pages/demos/curves.py": {k: v for k, v in TINY.items() if k != "batch"} | {
        "sweep": "batch"},
    "pages/demos/what_fits.py": {**TINY, "budget": "16"},
    "pages/demos/same_result.py": {"layers": "2", "hidden": "64", "seq": "32", "batch": "2",
                                   "steps": "20"},
}


def _all_text(at) -> str:
    tables = [" ".join(map(str, table.value.columns)) for table in at.table]
    return "\n".join([page_text(at), *tables])


@pytest.mark.parametrize("code", LANGUAGES)
@pytest.mark.parametrize("script", list(PAGES))
def test_demo_page_speaks_the_language(app_test: Callable, script: str, code: str) -> None:
    at = app_test(script, query={**PAGES[script], "lang": code}, timeout=180)
    if at.button and not at.table and not at.get("plotly_chart"):
        at.button[0].click().run(timeout=180)  # the runner asks before a longer run
    no_errors(at)
    assert at.get("plotly_chart"), "the page drew no chart"
    text = _all_text(at)
    if code != "en":
        assert untranslated_on_page(text, code) == []
    separators = {"en": ".,", "de": ",.", "vi": ",."}[code]  # the charts' numbers too
    assert all(json.loads(chart.proto.spec)["layout"]["separators"] == separators
               for chart in at.get("plotly_chart"))


def test_the_compare_table_headers_and_peaks_follow_the_language(app_test: Callable) -> None:
    headers = {}
    for code in LANGUAGES:
        at = app_test("pages/demos/compare.py", query={**TINY, "lang": code})
        no_errors(at)
        headers[code] = list(at.table[0].value.columns)
        assert "Where the peak is" not in page_text(at) or code == "en"
    # a soft hyphen lets the long word break on a phone
    assert headers["de"][1] == "Spitzen\u00adspeicher (ggü. Baseline)"
    assert headers["vi"][1] == "Bộ nhớ đỉnh (so với baseline)"


def test_home_teaser_in_german(app_test: Callable) -> None:
    at = app_test("pages/home.py", query={"lang": "de"}, timeout=120)
    no_errors(at)
    labels = [m.label for m in at.metric]
    assert "Eingesparter Spitzenspeicher mit Checkpoint an jeder Schicht" in labels


def test_the_engine_s_refusals_are_ids_and_numbers_worded_by_the_page() -> None:
    """The engine returns a refusal as an id and numbers (demos.measure.refusal_of); the
    page words each id through the catalog, in every language, with the same numbers."""
    from demos.measure import REFUSAL_IDS, compare, refusal_of
    from i18n import gettext
    from ui.demo_display import REFUSALS

    assert set(REFUSALS) == set(REFUSAL_IDS)
    tiny = ModelConfig(layers=2, hidden=64, heads=2, seq_len=32, batch=1, vocab=256)
    comparison = compare(tiny, parse_strategies("budget:greedy:1KiB,every-layer"), device="cpu",
                         time_steps=False, limit_bytes=None)
    assert refusal_of(comparison.results[0]) == ("budget", {"layers": 2})
    assert refusal_of(comparison.results[1]) is None
    german = gettext("de", REFUSALS["budget"], layers=2)
    assert german.startswith("Das Byte-Budget ist für 2 Schichten zu klein")
    for code in ("de", "vi"):
        for kind, text in REFUSALS.items():
            assert gettext(code, text) != text, (code, kind)
