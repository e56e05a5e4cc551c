"""Each lesson page under AppTest: it renders, its interactive parts respond."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from lessons.catalog import LESSONS
from lessons.document import load
from lessons.values import lesson_values
from ui.navigation import PAGES


def metrics(at) -> dict[str, str]:
    return {metric.label: metric.value for metric in at.metric}


def markdown(at) -> str:
    return "\n".join(element.value for element in at.markdown)


def links(at) -> dict[str, tuple[str, str]]:
    """Page links on the page: label -> (URL path, query string)."""
    return {link.proto.label: (link.proto.page, link.proto.query_string)
            for link in at.get("page_link")}


@pytest.mark.parametrize("number_item", list(enumerate(LESSONS, start=1)),
                         ids=[item.path for item in LESSONS])
def test_lesson_page_renders_with_takeaways_demo_and_navigation(app_test, number_item):
    number, item = number_item
    at = app_test(item.page_file)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert at.title[0].value == f"{number}. {item.title}"
    text = markdown(at)
    assert "Key takeaways" in text
    assert "Try it live" in text
    found = links(at)
    if number < len(LESSONS):
        after = LESSONS[number]
        assert found[f"Next: {number + 1}. {after.title}"] == (after.path, "")
    else:
        assert found["Next: take the quiz"] == ("quiz", "")
    if number > 1:
        before = LESSONS[number - 2]
        assert found[f"Previous: {number - 1}. {before.title}"] == (before.path, "")
    else:
        assert found["Back to the start"] == ("", "")
    demo = load(item.path, lesson_values()).demo
    if any(spec.url_path == demo.path for spec in PAGES):
        assert found[demo.label] == (demo.path, urlencode(demo.query))
    else:  # a demo page the router does not have yet: a plain link to its path
        assert f"[{demo.label}]({demo.url}?lang=en)" in text
    assert at.session_state["visited_lessons"] == [item.path]


def test_memory_calculator_responds_to_inputs_and_presets(app_test):
    at = app_test("pages/lessons/why_memory.py")
    assert metrics(at)["Activations, everything kept"] == "4.0 GB"
    assert metrics(at)["Bytes per parameter"] == "18"
    at.number_input(key="mem_batch").set_value(4).run()
    assert metrics(at)["Activations, everything kept"] == "8.0 GB"
    at.selectbox(key="mem_optimizer").set_value("sgd").run()
    assert metrics(at)["Bytes per parameter"] == "10"
    at.selectbox(key="mem_preset").set_value("gpt2-small").run()
    assert at.number_input(key="mem_hidden").value == 768
    assert at.number_input(key="mem_batch").value == 8
    assert not at.exception


def test_stepper_moves_with_buttons_and_slider(app_test):
    at = app_test("pages/lessons/how_it_works.py")
    assert metrics(at)["Forward computations"] == "1 of 8"
    assert at.info[0].value.startswith("**Step 1 of 16")
    at.button(key="step_prev").click().run()  # already at the first step: stays
    assert at.slider(key="step_index").value == 1
    at.button(key="step_next").click().run()
    assert at.slider(key="step_index").value == 2
    assert metrics(at)["Memory in use"] == "5 units"
    at.slider(key="step_index").set_value(16).run()
    assert "Backward through layer 1" in at.info[0].value
    at.radio(key="step_strategy").set_value("recompute-all").run()
    assert at.slider(key="step_index").value == 1  # a new strategy starts from the top
    assert metrics(at)["Forward computations"] == "1 of 44"
    assert metrics(at)["Peak for the whole step"] == "4 units"
    at.selectbox(key="step_ratio").set_value(16).run()
    assert metrics(at)["Peak for the whole step"] == "19 units"
    assert not at.exception


def test_k_curve_minimum_moves_for_transformer_layers(app_test):
    """k counts layers per segment on the page, as in the demos' every-k strategy."""
    at = app_test("pages/lessons/how_many.py")
    best = "Best k (layers per segment)"
    assert metrics(at)[best] == "4"
    at.slider(key="kcurve_layers").set_value(100).run()
    assert metrics(at)[best] == "10"
    at.slider(key="kcurve_layers").set_value(16).run()
    at.radio(key="kcurve_kind").set_value("transformer").run()
    assert metrics(at)[best] == "1"
    assert "k = layers per segment" in str(at.get("plotly_chart")[0].proto.spec)


def test_k_curve_agrees_with_the_lesson_text_on_depth(app_test):
    """The widget and the paragraph it illustrates give the same best spacing: every layer
    for the 28-layer worked example (it once said 22 segments), pairs of layers for 96."""
    from lessons.checkpoint_math import best_segment_length
    from lessons.values import SEED

    at = app_test("pages/lessons/how_many.py")
    at.radio(key="kcurve_kind").set_value("transformer").run()
    for layers in (SEED["layers"], 96):
        at.slider(key="kcurve_layers").set_value(layers).run()
        assert metrics(at)["Best k (layers per segment)"] == str(
            best_segment_length(layers, 2, 34))
    assert metrics(at)["Best k (layers per segment)"] == "2"
    before = metrics(at)["Checkpoints"]
    at.slider(key="budget_b").set_value(2).run()
    assert metrics(at)["Checkpoints"] != before
    assert not at.exception


def test_layer_calculator_reproduces_the_worked_example(app_test):
    at = app_test("pages/lessons/language_models.py")
    values = metrics(at)
    assert values["All kept"] == "4.0 GB"
    assert values["Checkpointed inputs"] == "0.23 GB"
    assert values["+ one layer rebuilt"] == "0.14 GB"
    at.checkbox(key="layer_efficient").uncheck().run()
    assert metrics(at)["+ one layer rebuilt"] == "0.31 GB"
    at.number_input(key="layer_seq").set_value(2_048).run()
    assert metrics(at)["Checkpointed inputs"] == "0.47 GB"
    at.button(key="layer_reset").click().run()
    assert metrics(at)["All kept"] == "4.0 GB"
    assert not at.exception


def test_logits_calculator(app_test):
    at = app_test("pages/lessons/large_vocabularies.py")
    assert metrics(at)["Logits"] == "2.0 GB"
    # the peak the lesson's text stresses ("about 6.1 GB"): three tensors of this size
    assert metrics(at)["Peak at the loss (three such tensors)"] == "6.1 GB"
    assert "about **6.1 GB**" in " ".join(m.value for m in at.markdown)
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    peak = next(tr for tr in figure["data"] if tr.get("name", "").startswith("peak at the loss"))
    logits = next(tr for tr in figure["data"] if tr.get("name") == "logits")
    assert peak["y"][-1] == pytest.approx(3 * logits["y"][-1])  # lists: plain Python values
    assert any(trace.get("text") == ["6.1 GB"] for trace in figure["data"])  # the learner's
    at.number_input(key="logits_vocab").set_value(50_257).run()
    assert metrics(at)["Logits"] == "0.41 GB"
    assert not at.exception


def test_parallel_calculator_follows_the_layout(app_test):
    """Lesson 8's calculator starts on Korthikanti et al.'s GPT-3 175B layout (the lesson's
    table: 1F1B, t = 8 with sequence parallelism, p = 8) and follows each input."""
    values = lesson_values()
    at = app_test("pages/lessons/many_gpus.py")
    assert not at.exception, [e.value for e in at.exception]
    assert metrics(at)["GPUs per model copy"] == "64"
    assert metrics(at)["Micro-batches held"] == "8"
    assert metrics(at)["One layer, one micro-batch"] == values["par_layer_sp_gb"]
    at.checkbox(key="par_sp").uncheck().run()
    assert metrics(at)["One layer, one micro-batch"] == values["par_layer_tp_gb"]
    at.radio(key="par_schedule").set_value("gpipe").run()
    assert metrics(at)["Micro-batches held"] == values["par_gpipe_in_flight"]
    at.radio(key="par_schedule").set_value("interleaved").run()
    assert metrics(at)["Micro-batches held"] == values["par_interleaved_in_flight"]
    at.number_input(key="par_microbatches").set_value(12).run()  # not divisible by p = 8
    assert "divisible" in at.warning[0].value and not at.metric
    at.selectbox(key="par_cp").set_value(2).run()
    at.number_input(key="par_microbatches").set_value(16).run()
    assert metrics(at)["GPUs per model copy"] == "128"
    assert not at.exception
