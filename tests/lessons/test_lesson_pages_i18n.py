"""Every lesson page and the home page under AppTest in English, German and Vietnamese:
the lesson text comes from the language's file, every label, caption, metric and chart is
in that language (no English sentence of the catalog left), and numbers are written the
language's way."""

from __future__ import annotations

import json

import pytest

from lessons.catalog import LESSONS
from lessons.document import content_file, load
from lessons.values import lesson_values
from tools.translations import untranslated_on_page

LANGUAGES = ("en", "de", "vi")


def page_text(at) -> str:
    """Everything a learner reads on the page: text elements, widget labels and options,
    metric labels and values, and each chart's titles, legend names and annotations."""
    parts: list[str] = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning",
                 "error", "success"):
        parts += [str(element.value) for element in getattr(at, kind)]
    for metric in at.metric:
        parts += [metric.label, metric.value, metric.proto.help]
    for kind in ("selectbox", "radio", "slider", "number_input", "checkbox", "button",
                 "select_slider"):
        for widget in getattr(at, kind):
            parts.append(widget.label)
            parts += [str(option) for option in getattr(widget, "options", [])]
            parts.append(getattr(widget.proto, "help", ""))
    for link in at.get("page_link"):
        parts.append(link.proto.label)
    for expander in at.expander:
        parts.append(expander.label)
    for chart in at.get("plotly_chart"):
        parts += _chart_strings(json.loads(chart.proto.spec))
    return "\n".join(part for part in parts if part)


def _chart_strings(spec: dict) -> list[str]:
    found: list[str] = []

    def walk(node: object, key: str = "") -> None:
        if isinstance(node, dict):
            for name, value in node.items():
                walk(value, name)
        elif isinstance(node, list):
            for value in node:
                walk(value, key)
        elif isinstance(node, str) and key in ("text", "name", "ticktext", "hovertext",
                                               "hovertemplate"):
            found.append(node)

    walk(spec)
    return found


@pytest.mark.parametrize("code", ["de", "vi"])
@pytest.mark.parametrize("item", LESSONS, ids=[item.path for item in LESSONS])
def test_lesson_page_has_no_english_left(app_test, item, code):
    at = app_test(item.page_file, query={"lang": code})
    assert not at.exception, [e.value for e in at.exception]
    text = page_text(at)
    assert untranslated_on_page(text, code) == []
    # The lesson's own text is the translation, with its values worded for the language.
    document = load(item.path, lesson_values(code), code)
    assert content_file(item.path, code).parent.name == code
    first = next(block.text for block in document.blocks if block.kind == "markdown")
    assert first.splitlines()[0][:40] in text
    assert at.title[0].value == f"{LESSONS.index(item) + 1}. {item.title_in(code)}"
    assert item.title_in(code) != item.title


@pytest.mark.parametrize("code", LANGUAGES)
def test_numbers_follow_the_language(app_test, code):
    at = app_test("pages/lessons/why_memory.py", query={"lang": code})
    values = {metric.label: metric.value for metric in at.metric}
    expected = "4.0 GB" if code == "en" else "4,0 GB"
    assert expected in values.values()
    text = page_text(at)
    # seed_params_b: "1.9 billion" / "1,9 Milliarden" / "1,9 tỷ", inside the lesson text.
    assert {"en": "1.9 billion", "de": "1,9 Milliarden", "vi": "1,9 tỷ"}[code] in text
    assert {"en": "1,024", "de": "1.024", "vi": "1.024"}[code] in text


@pytest.mark.parametrize("code", ["de", "vi"])
def test_stepper_words_its_steps_in_the_language(app_test, code):
    at = app_test("pages/lessons/how_it_works.py", query={"lang": code})
    at.button(key="step_next").click().run()
    info = at.info[0].value
    assert {"de": "Schritt 2 von 16", "vi": "Bước 2 / 16"}[code] in info
    assert {"de": "Forward durch Schicht 2", "vi": "Forward qua lớp 2"}[code] in info
    assert untranslated_on_page(page_text(at), code) == []


def test_language_aware_values_read_in_their_sentences():
    """The values that were English words are worded per language, as the translated
    sentences around them expect."""
    de, vi = lesson_values("de"), lesson_values("vi")
    assert de["seed_params_b"] == "1,9 Milliarden"
    assert de["max_overhead_fraction"] == "ein Drittel"
    assert vi["max_overhead_fraction"] == "một phần ba"
    assert de["seed_larger_part"] == "die behaltenen Schichteingaben"
    assert de["proto_peak_config"].startswith("16 Schichten") and "1.000" in de[
        "proto_peak_config"]
    assert "Dokumentation" in de["further_reading"] and "Tài liệu" in vi["further_reading"]
    assert de["lesson_count"] == "zehn Lektionen" and vi["lesson_count"] == "mười bài học"
    german = load("language-models", de, "de")
    assert any("entfällt der größere Teil auf die behaltenen Schichteingaben:" in block.text
               for block in german.blocks)
    link = load("how-many", de, "de").blocks[0].text
    assert "[Lektion" in link or "Lektion" in "".join(b.text for b in german.blocks)


@pytest.mark.parametrize("code", LANGUAGES)
def test_home_page_in_each_language(app_test, monkeypatch, code):
    """The home page's own text; its live teaser (a real demo run, worded by the demos'
    code) is replaced by a marker here."""
    import streamlit as st

    import ui.home_teaser

    monkeypatch.setattr(ui.home_teaser, "home_teaser", lambda: st.caption("teaser"))
    at = app_test("pages/home.py", query={"lang": code})
    assert not at.exception, [e.value for e in at.exception]
    text = page_text(at)
    if code != "en":
        assert untranslated_on_page(text, code) == []
    assert {"en": "Ten short lessons", "de": "Zehn kurze Lektionen",
            "vi": "Mười bài học ngắn"}[code] in text
    for number, item in enumerate(LESSONS, start=1):
        assert f"{number}. {item.title_in(code)}" in text
