"""The lesson documents: every placeholder resolves, every stated figure is computed."""

from __future__ import annotations

import re

import pytest

from lessons import facts
from lessons.catalog import LESSON_PATHS, PICTURES_DEMO_PATH
from lessons.document import ANY_PLACEHOLDER, DocumentError, content_file, load, parse
from lessons.values import lesson_values
from ui.lesson_widgets import WIDGETS

DEMO_PATHS = {"compare", "timeline", "curves", "what-fits", "same-result", PICTURES_DEMO_PATH}
DEMO_QUERY_NAMES = {"layers", "hidden", "heads", "seq", "batch", "vocab", "dtype", "strategy",
                    "sweep"}


def document_text(document) -> str:
    """A loaded lesson's whole text: its blocks, takeaways and demo."""
    parts = [block.text for block in document.blocks] + list(document.takeaways)
    if document.demo:
        parts.append(document.demo.text)
    return "\n".join(parts)


def all_text(path: str) -> str:
    return document_text(load(path, lesson_values()))


@pytest.mark.parametrize("path", LESSON_PATHS)
def test_every_lesson_loads_with_its_widgets_takeaways_and_demo(path):
    assert content_file(path).exists()
    document = load(path, lesson_values())
    for widget in document.widgets:
        assert widget in WIDGETS, f"{path}: unknown widget {widget}"
    assert len(document.takeaways) >= 3
    assert document.demo is not None and document.demo.path in DEMO_PATHS
    assert set(document.demo.query) <= DEMO_QUERY_NAMES
    assert not ANY_PLACEHOLDER.search(all_text(path))


@pytest.mark.parametrize("path", LESSON_PATHS)
def test_demo_links_use_values_the_demo_pages_accept(path):
    """The query must survive the demo's validation on a CPU server (no clamping, no warning)."""
    from memory.config import slider_ranges
    from ui.demo_curves import CURVES

    ranges = slider_ranges("cpu")
    query = load(path, lesson_values()).demo.query
    for name, value in query.items():
        if name == "sweep":
            assert value in CURVES
        elif name == "dtype":
            assert value in ("float32", "bfloat16")
        elif name == "strategy":
            assert set(value.split(",")) <= {"every-layer", "sqrt"}
        else:
            low, high, step = ranges["seq_len" if name == "seq" else name]
            assert low <= int(value) <= high and (int(value) - low) % step == 0, (name, value)


def test_every_widget_is_used_by_some_lesson():
    used = {w for path in LESSON_PATHS for w in load(path, lesson_values()).widgets}
    assert used == set(WIDGETS)


def test_the_issue_s_interactive_parts_are_where_they_belong():
    widgets = {path: load(path, lesson_values()).widgets for path in LESSON_PATHS}
    assert "calculator:memory" in widgets["why-memory"]
    assert "stepper" in widgets["how-it-works"]
    assert "figure:k-curve" in widgets["how-many"]
    assert "calculator:budget" in widgets["how-many"]
    assert "calculator:layer" in widgets["language-models"]
    assert "calculator:logits" in widgets["large-vocabularies"]


@pytest.mark.parametrize(("path", "figures"), [
    ("why-memory", ["18 bytes", "4.0 GB", "2.0 GB"]),
    ("how-it-works", ["N(N+1)/2", "| 44 |", "| 16 |"]),
    ("how-many", ["48 GB", "7 GB", "30%", "√N", "log N", "270 MiB", "68 MiB", "107 MiB"]),
    ("language-models", ["4.0 GB", "0.23 GB", "0.14 GB", "34", "70%", "2.7%",
                         "19.6 ms", "27.2 ms", "20.9 ms", "+39%", "+7%"]),
    ("large-vocabularies", ["2.0 GB", "248,000", "150,000", "250,000"]),
    ("cost-and-correctness", ["33%", "20%", "30%", "10×", "preserve_rng_state", "1.19×",
                              "1.35×"]),
    ("in-practice", ["use_reentrant=False", "checkpoint_sequential",
                     "create_selective_checkpoint_contexts", "CheckpointPolicy",
                     "activation_memory_budget", "activation_checkpointing_enable()",
                     "activation_checkpointing=True", "FSDP", "QLoRA"]),
])
def test_lessons_state_the_figures_of_the_sources(path, figures):
    text = all_text(path)
    for figure in figures:
        assert figure in text, f"{path} should state {figure!r}"


def test_figures_are_injected_not_typed_in():
    """The GB figures of the worked examples appear in the Markdown only as placeholders."""
    for path in LESSON_PATHS:
        source = content_file(path).read_text(encoding="utf-8")
        for typed in ("4.0 GB", "0.23 GB", "0.14 GB", "2.0 GB", "48 GB", "70%", "2.7%",
                      "× 2,048", "248,000 ×", "12,288", "68 MiB", "1.19"):
            assert typed not in source, f"{path}.md types {typed!r}; inject it with a value"


def test_further_reading_links_every_source():
    text = all_text("in-practice")
    for source in facts.SOURCES:
        assert f"]({source.url})" in text


def test_values_match_their_formulas():
    values = lesson_values()
    assert values["seed_all_kept_gb"] == "4.0 GB"
    assert values["seed_inputs_gb"] == "0.23 GB"
    assert values["seed_one_layer_gb"] == "0.14 GB"
    assert values["seed_logits_gb"] == "2.0 GB"
    assert values["gpt3_selective_saving"] == "70%"
    assert values["max_overhead"] == "33%"
    assert values["chen_factor"] == "6.9"
    assert values["l22b_full_extra"] == "39%" and values["l22b_selective_extra"] == "7%"
    assert values["step_poor_forwards"] == str(8 + 8 * 9 // 2)
    assert values["seed_all_kept_formula"] == "34 × 2 × 1,024 × 2,048 × 28"
    assert values["seed_inputs_formula"] == "2 × 2 × 1,024 × 2,048 × 28"
    assert values["seed_one_layer_formula"] == "34 × 2 × 1,024 × 2,048"
    assert values["seed_logits_formula"] == "2 × 1,024 × 248,000 × 4"


def test_unknown_values_and_stray_placeholders_are_errors():
    with pytest.raises(DocumentError, match="unknown value"):
        parse("x", "Memory: {{value:nope}}", {})
    with pytest.raises(DocumentError, match="not on a line"):
        parse("x", "Text {{stepper}} inline", {})
    with pytest.raises(DocumentError):
        parse("x", "---\ntakeaways: [a]\nno end", {})


def test_parse_splits_markdown_and_widgets():
    source = "---\ntakeaways: ['{{value:n}} layers']\n---\nIntro {{value:n}}.\n\n{{stepper}}\n\n" \
             "{{figure:k-curve}}\nOutro\n"
    document = parse("x", source, {"n": "16"})
    assert [b.widget if b.kind != "markdown" else b.text for b in document.blocks] == [
        "Intro 16.", "stepper", "figure:k-curve", "Outro"]
    assert document.takeaways == ("16 layers",)
    assert document.demo is None
    assert re.fullmatch(r"/compare\?layers=16", parse(
        "x", "---\ndemo: {path: compare, label: L, query: {layers: 16}}\n---\n", {}
    ).demo.url)
