"""Labels a newcomer reads at first sight: strategy titles in the pickers (ids in the URL),
one unit per table column, the forward count in its own panel, peak labels above the
curve, the address of no page."""

from __future__ import annotations

import re
from collections.abc import Callable
from types import SimpleNamespace

import pandas as pd
import pytest

from i18n.units import column_unit, format_bytes_in
from lessons.figures import k_curve_figure
from memory.strategies import StrategySpec
from reports import timeline_figures
from reports.timeline_figures import timeline_figure, timeline_frame
from tests.demo_pages.test_pages import TINY, no_errors

MIB = 2**20


def test_the_strategy_picker_shows_titles_and_the_url_keeps_ids(app_test: Callable) -> None:
    at = app_test("pages/demos/compare.py",
                  query={**TINY, "strategy": "every-k:2,budget:dp:40%", "lang": "de"})
    no_errors(at)
    picker = at.multiselect(key="strategy")
    shown = list(picker.options)
    assert "jede 2. Schicht" in shown and "Budget (dp, 40%)" in shown
    from memory.strategies import examples

    ids = [*(spec.label for spec in examples("cpu")), "every-k:2", "budget:dp:40%"]
    assert not any(i in option for option in shown for i in ids), shown  # no every-k:2
    assert picker.value == ["every-k:2", "budget:dp:40%"]
    assert at.query_params["strategy"] == "every-k:2,budget:dp:40%"


def test_a_size_column_has_one_unit() -> None:
    sizes = [900 * 1024, 1.2 * MIB, None]
    unit = column_unit(sizes)
    assert unit == "MiB"
    assert [format_bytes_in(s, unit) for s in sizes[:2]] == ["0.9 MiB", "1.2 MiB"]
    assert format_bytes_in(3 * 2**30, column_unit([3 * 2**30, 5 * MIB])) == "3.00 GiB"
    assert format_bytes_in(5 * MIB, "GiB", locale="de_DE") == "0,00 GiB"


def test_the_compare_table_uses_one_unit_per_column(app_test: Callable) -> None:
    """At a small model none's activations are above a MiB and every-layer's far under:
    '129.0 KiB' stood under '1.1 MiB' in one column."""
    at = app_test("pages/demos/compare.py",
                  query={**TINY, "seq": "64", "batch": "2", "strategy": "every-layer"})
    no_errors(at)
    table = at.table[0].value
    for column in ("Peak memory (vs baseline)", "Activations held (predicted)"):
        units = {cell.split(" (")[0].split()[-1] for cell in table[column]}
        units |= {part.split()[-1].rstrip(")") for cell in table[column]
                  for part in cell.split(" (")[1:] if "iB" in part}
        assert len(units) == 1, (column, list(table[column]))


def test_lesson_three_counts_forward_computations_on_their_own_axis() -> None:
    fig = k_curve_figure(16)
    memory = {t.yaxis for t in fig.data if "forward" not in t.name}
    counts = {t.yaxis for t in fig.data if "forward" in t.name}
    assert memory == {"y"} and counts == {"y2"}
    assert fig.layout.yaxis2.overlaying is None  # a panel of its own, not laid over memory
    assert fig.layout.yaxis2.title.text == "forward computations"
    assert fig.layout.yaxis.title.text == "memory (layer inputs)"
    top, bottom = fig.layout.yaxis.domain, fig.layout.yaxis2.domain
    assert bottom[1] < top[0]  # below the memory plot, apart


@pytest.mark.parametrize("layers,layer", [(16, 1.0), (16, 17.0), (100, 17.0), (4, 1.0)])
def test_lesson_three_shows_its_minimum_well_above_the_floor(layers: int,
                                                             layer: float) -> None:
    """The minimum is the point of the chart: it stands in the panel's lower two thirds,
    not squeezed into its bottom tenth, and its label is a boxed note with an arrow."""
    fig = k_curve_figure(layers, 1.0, layer)
    (minimum,) = [t for t in fig.data if t.name == "minimum"]
    low, high = fig.layout.yaxis.range
    assert low == 0 and minimum.y[0] / high >= 0.25
    (note,) = [a for a in fig.layout.annotations if a.text.startswith("minimum: k =")]
    assert note.showarrow and note.bgcolor and note.ay < 0  # above the point, on white


def _points() -> list[SimpleNamespace]:
    phases = [("forward", 0)] * 3 + [("forward", 1)] * 3 + [("loss", None)] * 2 + [
        ("recompute", 1)] * 2 + [("backward", 1)] * 3 + [("backward", 0)] * 3
    return [SimpleNamespace(index=i, op=f"aten.op{i}", phase=phase, layer=layer,
                            live_bytes=(i + 1) * MIB if i != 9 else 40 * MIB)
            for i, (phase, layer) in enumerate(phases)]


def test_timeline_peak_labels_sit_above_the_curve_and_under_the_phase_labels() -> None:
    frame = timeline_frame({StrategySpec("none"): _points(),
                            StrategySpec("every-layer"): _points()})
    fig = timeline_figure(frame, facet=True)
    stars = [t for t in fig.data if t.mode == "markers+text"]
    assert all(t.textposition.startswith("top ") for t in stars)  # above the highest point
    assert stars[0].textposition == "top center"  # a peak mid-step: centred above its star
    top = 40
    bands = [t for t in fig.data if t.mode == "text"]
    assert all(y == top * timeline_figures.BAND_TOP for t in bands for y in t.y)
    assert fig.layout.yaxis.range[1] > top * timeline_figures.BAND_TOP  # inside the plot


def test_a_peak_label_reads_toward_the_middle_in_two_short_lines() -> None:
    """On a phone "peak: _log_softmax_backward_data (B)" ran past the panel's right edge
    from a peak a third of the way along."""
    xs = pd.Series(range(451))
    assert [timeline_figures.peak_label_position(x, xs) for x in (20, 149, 151, 300, 302)] \
        == ["top right", "top right", "top center", "top center", "top left"]
    frame = timeline_frame({StrategySpec("none"): _points()})
    (star,) = [t for t in timeline_figure(frame, facet=True).data if t.mode == "markers+text"]
    lines = star.text[0].split("<br>")
    assert lines == ["peak (R1):", "aten.op9"]


def test_an_unknown_page_name_is_recognised(monkeypatch) -> None:
    from ui import navigation

    class Pages:
        intended_page_script_hash = ""
        intended_page_name = ""

    ctx = SimpleNamespace(pages_manager=Pages())
    monkeypatch.setattr(navigation, "get_script_run_ctx", lambda: ctx)
    for name, expected in (("no-such-page", "no-such-page"), ("compare", None), ("", None),
                           ("a/b", None), ("/why-memory/", None)):
        Pages.intended_page_name = name
        assert navigation.unknown_page_name() == expected, name
    Pages.intended_page_script_hash = "abc"  # a click in the app: a page that exists
    Pages.intended_page_name = "no-such-page"
    assert navigation.unknown_page_name() is None


# ---------------------------------------------------------------- no strategy id on a page

# Every page a learner reads a strategy's name on, at a small model (set through the URL,
# as a shared link would), with strategies of every kind picked.
PICKED = "every-layer,sqrt,every-k:2,selective:save-matmuls,budget:dp:40%"
TITLE_PAGES = {
    "pages/demos/compare.py": {**TINY, "strategy": PICKED},
    "pages/demos/timeline.py": {**TINY, "strategy": "every-layer,sqrt"},
    "pages/demos/curves.py": {k: v for k, v in TINY.items() if k != "batch"} | {
        "sweep": "batch"},
    "pages/demos/what_fits.py": {**TINY, "budget": "16"},
    "pages/demos/same_result.py": {"layers": "2", "hidden": "64", "seq": "32", "batch": "2",
                                   "steps": "5"},
    "pages/home.py": {},
    "pages/plan.py": {},
    **{f"pages/lessons/{name}.py": {} for name in (
        "why_memory", "how_it_works", "how_many", "cost_and_correctness", "in_practice",
        "language_models", "large_vocabularies")},
}
# An id a strategy is written as in URLs, files and the command line: never a name on a
# page. "none" and "sqrt" are ids in German and Vietnamese text wherever they stand; in
# English they (and "offload", a loanword in all three) are also words, so there they count
# where a name stands alone (a table cell, a legend entry, an option) or where a strategy's
# name stands ("vs none", "(none)").
_ID = r"every-layer|every-k:\d+|selective:[a-z-]+|budget:(?:greedy|dp):[\w.%]+"
_WORD_ID = r"none|sqrt"
_ALONE_ID = r"none|sqrt|offload"


def _visible_strings(at) -> list[str]:
    """Every string a learner reads on the page (page_text) and each table's headers and
    cells, without code (a command line or a URL writes ids)."""
    from tests.lessons.test_lesson_pages_i18n import page_text

    parts = page_text(at).split("\n")
    for kind in ("table", "dataframe"):
        for table in getattr(at, kind):
            frame = table.value
            parts += [str(c) for c in frame.columns]
            parts += [str(v) for v in frame.to_numpy().ravel()]
    for widget in at.multiselect:
        parts += [widget.label, *map(str, widget.options)]
    text = "\n".join(parts)
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    return [re.sub(r"`[^`]*`|\?[\w=&,:%.-]+|https?://\S+", " ", line) for line in
            text.split("\n")]


def strategy_ids_shown(at, lang: str) -> list[str]:
    found = []
    for line in _visible_strings(at):
        anywhere = re.search(rf"(?<![\w/-])(?:{_ID})(?![\w-])", line)
        if lang != "en":
            word = re.search(rf"(?<![\w/-])(?:{_WORD_ID})(?![\w(-])", line)
        else:
            word = re.fullmatch(rf"\s*(?:{_ALONE_ID})\s*", line) or re.search(
                rf"\b(?:vs\.?|than|of|as|with|beside|against) (?:{_WORD_ID})\b|"
                rf"\((?:{_WORD_ID})\)|\b(?:{_WORD_ID}) \(", line)
        if anywhere or word:
            found.append(line)
    return found


@pytest.mark.parametrize("code", ("en", "de", "vi"))
@pytest.mark.parametrize("script", list(TITLE_PAGES))
def test_no_page_shows_a_strategy_id(app_test: Callable, script: str, code: str) -> None:
    at = app_test(script, query={**TITLE_PAGES[script], "lang": code}, timeout=180)
    no_errors(at)
    assert strategy_ids_shown(at, code) == []
