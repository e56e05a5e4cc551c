"""Every page of the app (ui.navigation.PAGES, opened through the
router app.py with its sidebar, as a learner's link opens it) with ?lang=de and ?lang=vi
shows no English sentence of the catalog: text, labels, help, options, metrics, alerts,
table headers and cells, chart titles, axes, legends and annotations. A few states beside
the default ones put the app's warnings and errors on the page: a demo link with values
out of range (clamped, with a warning), a demo config the engine refuses, the verify page
with an id that is not one, the plan page with a GPU it does not know."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from streamlit.testing.v1 import AppTest

from tools.translations import untranslated_on_page
from ui.navigation import PAGES, ROOT, PageSpec

# Small demo settings keep the engine's work short (/pictures: its smallest model and
# image); pages without sliders ignore them.
TINY = {"layers": "2", "hidden": "64", "heads": "2", "seq": "32", "batch": "1",
        "vocab": "256", "family": "sd3", "size": "64"}

# (url path, extra query, what the page must show besides its text): the non-default states.
STATES: dict[str, tuple[str, dict[str, str], str]] = {
    "demo-clamped": ("compare", {"batch": "99", "seq": "abc",
                                 "strategy": "every-layer,bogus"}, "warning"),
    "demo-refused": ("timeline", {"hidden": "320", "heads": "3"}, "error"),
    "verify-bad-id": ("verify", {"id": "not-a-certificate"}, ""),
    "plan-unknown-gpu": ("plan", {"gpu": "no-such-gpu", "seq": "99999999"}, "warning"),
    "mistakes-unknown-case": ("mistakes", {"case": "no-such-case"}, "warning"),
}
CASES = {spec.url_path or "home": (spec.url_path, {}, "") for spec in PAGES} | STATES
SPECS: dict[str, PageSpec] = {spec.url_path: spec for spec in PAGES}


def _strings(message: Message) -> Iterator[str]:
    """Every string field of an element's message, nested ones too; a chart's spec (JSON)
    gives the strings inside it."""
    for field, value in message.ListFields():
        values = value if field.is_repeated else [value]
        if field.type == FieldDescriptor.TYPE_STRING:
            for text in values:
                if field.name == "spec" and text.startswith("{"):
                    yield from _json_strings(json.loads(text))
                else:
                    yield text
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            for item in values:
                if isinstance(item, Message):
                    yield from _strings(item)


def _json_strings(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for value in node.values():
            yield from _json_strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _json_strings(value)
    elif isinstance(node, str):
        yield node


def _table_strings(frame) -> Iterator[str]:
    yield from map(str, frame.columns)
    yield from map(str, frame.index)
    for column in frame.columns:
        yield from (str(cell) for cell in frame[column] if isinstance(cell, str))


def rendered_text(at: AppTest) -> str:
    """Everything the run put on the page, the main area and the sidebar."""
    parts: list[str] = []

    def walk(node: object) -> None:
        proto = getattr(node, "proto", None)
        if isinstance(proto, Message):
            parts.extend(_strings(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    for table in [*at.table, *at.dataframe]:
        parts.extend(_table_strings(table.value))
    return "\n".join(part for part in parts if part)


def open_page(url_path: str, query: dict[str, str], code: str,
              shows: str = "") -> tuple[AppTest, str]:
    """The router's run with `query`, switched to the page (the home page is the default:
    the router's first run shows it), and the text of the elements of kind `shows` (say
    "warning") on the page as it opened: a link's warning is shown on the run that reads
    the link, so it is gone after a click on "Run it"."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in {**TINY, **query, "lang": code}.items():
        at.query_params[key] = value
    at.run()
    if url_path:
        at.switch_page(SPECS[url_path].file).run()
    seen = rendered_text(at) if shows and getattr(at, shows) else ""
    if at.button and url_path in ("compare", "timeline", "curves", "what-fits",
                                  "same-result") and not at.get("plotly_chart"):
        at.button[0].click().run()  # the runner asks before a longer run
    if shows and getattr(at, shows):
        seen = rendered_text(at)
    return at, seen


def test_every_page_is_swept() -> None:
    assert {path for path, _, _ in CASES.values()} == set(SPECS)


@pytest.fixture(scope="module")
def case_data() -> dict[str, Path]:
    """A case's data folder, shared by its languages: the second language's page reads
    the demo's result the first one measured (the same run in any language), so each
    demo runs once per case, not once per language."""
    return {}


@pytest.mark.parametrize("code", ["de", "vi"])
@pytest.mark.parametrize("case", [pytest.param(case, marks=pytest.mark.xdist_group(
    f"every-language-{case}")) for case in CASES])
def test_page_shows_no_english(case: str, code: str, monkeypatch: pytest.MonkeyPatch,
                               tmp_path_factory: pytest.TempPathFactory,
                               case_data: dict[str, Path]) -> None:
    data = case_data.setdefault(case, tmp_path_factory.mktemp(f"data-{case}"))
    monkeypatch.setenv("DATA_DIR", str(data))
    monkeypatch.setenv("QUIZ_COOLDOWN_SECONDS", "0")
    url_path, query, shows = CASES[case]
    at, seen = open_page(url_path, query, code, shows)
    assert not at.exception, [e.value for e in at.exception]
    if shows:  # the state this case is for was on the page
        assert seen, f"{case}: no {shows} on the page"
        assert untranslated_on_page(seen, code) == [], case
    text = rendered_text(at)
    assert text.strip()
    assert untranslated_on_page(text, code) == [], case
