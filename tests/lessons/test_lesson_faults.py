"""The faults a walk through the lessons found, each pinned by a test that failed
before its fix."""

from __future__ import annotations

import re

import pytest
from streamlit.proto.Metric_pb2 import Metric

from lessons.catalog import LESSON_PATHS
from lessons.document import content_file, load
from lessons.values import lesson_values

RED, GREEN = Metric.MetricColor.RED, Metric.MetricColor.GREEN


def metric(at, label: str):
    return next(item for item in at.metric if item.label == label)


def shape_caption(at) -> str:
    """The calculator's caption that describes the setup in use."""
    return next(item.value for item in at.caption if "layers ·" in item.value)


def test_changing_the_shape_changes_the_per_parameter_state_and_the_caption(app_test):
    at = app_test("pages/lessons/why_memory.py")
    total = metric(at, "Total, everything kept").value
    activations = metric(at, "Activations, everything kept").value
    assert "2,048" in shape_caption(at)
    at.number_input(key="mem_hidden").set_value(4_096).run()
    # Twice the width: about four times the parameters, so the weights, gradients and
    # optimizer state grow too, not only the activations.
    assert at.number_input(key="mem_params_m").value > 3 * 1_900
    assert "4,096" in shape_caption(at) and "2,048" not in shape_caption(at)
    new_total = float(metric(at, "Total, everything kept").value.split()[0])
    new_activations = float(metric(at, "Activations, everything kept").value.split()[0])
    grown = new_total - float(total.split()[0])
    assert grown > 2 * (new_activations - float(activations.split()[0]))
    at.number_input(key="mem_layers").set_value(56).run()
    assert at.number_input(key="mem_params_m").value > 6 * 1_900
    at.selectbox(key="mem_preset").set_value("gpt2-small").run()
    assert "hidden 768 · 12 layers" in shape_caption(at)


def test_a_checkpoint_that_costs_memory_shows_a_red_plus_not_a_double_minus(app_test):
    """With one layer, keeping its input and rebuilding it holds more than keeping it."""
    at = app_test("pages/lessons/why_memory.py")
    saving = metric(at, "Total, checkpoint every layer")
    assert saving.proto.delta.startswith("-") and saving.proto.color == GREEN
    assert saving.proto.direction == Metric.MetricDirection.DOWN
    at.number_input(key="mem_layers").set_value(1).run()
    costing = metric(at, "Total, checkpoint every layer")
    assert costing.proto.delta.startswith("+"), costing.proto.delta
    assert "--" not in costing.proto.delta
    assert costing.proto.direction == Metric.MetricDirection.UP
    assert costing.proto.color == RED  # more memory is a loss, not a gain


@pytest.mark.parametrize(("key", "entered", "used"), [("mem_batch", 5_000, 1_024),
                                                      ("mem_hidden", 10, 64)])
def test_a_rejected_input_shows_the_value_actually_used(app_test, key, entered, used):
    at = app_test("pages/lessons/why_memory.py")
    at.number_input(key=key).set_value(entered).run()
    assert not at.exception
    assert at.number_input(key=key).value == used  # the box shows what is computed
    assert any(f"{entered:,}" in warning.value and f"{used:,}" in warning.value
               for warning in at.warning)
    at.number_input(key="mem_tokens").set_value(512).run()
    assert not at.warning  # said once, right after the entry


def test_the_parameter_box_writes_a_whole_number_in_every_language(app_test):
    """The box read "2000.000" (billions): a German reader takes the point for a
    thousands separator, two million. In millions, a whole number has no separator."""
    at = app_test("pages/lessons/why_memory.py", query={"lang": "de"})
    box = at.number_input(key="mem_params_m")
    assert box.proto.format == "%d" and box.value == 1_917  # the worked example, 1.9 billion
    box.set_value(99_000_000).run()
    assert at.number_input(key="mem_params_m").value == 2_000_000
    assert at.warning and "2.000.000" in at.warning[0].value  # said the German way


def test_layer_calculator_clamps_visibly_too(app_test):
    at = app_test("pages/lessons/language_models.py")
    at.number_input(key="layer_layers").set_value(999).run()
    assert at.number_input(key="layer_layers").value == 256
    assert at.warning and "256" in at.warning[0].value


def test_the_stepper_buttons_sit_right_under_the_figure_they_move(app_test):
    """On a phone the columns stack: the buttons must come straight after the figure, not
    above the slider, the text and four metrics (about 700 px away)."""
    at = app_test("pages/lessons/how_it_works.py")
    order = []
    for node in at.main.children.values():
        order += _flatten(node)
    chart = order.index("plotly:step_chart")
    assert order[chart + 1:chart + 4] == ["button:step_prev", "button:step_next",
                                          "button:step_restart"]


def _flatten(node) -> list[str]:
    """The page's charts and buttons in drawing order, as "kind:key"."""
    found = []
    kind = getattr(node, "type", "")
    if kind == "plotly_chart":
        found.append("plotly:" + node.proto.id.rsplit("-", 1)[-1])
    elif kind == "button":
        found.append(f"button:{node.key}")
    for child in getattr(node, "children", {}).values():
        found += _flatten(child)
    return found


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_k_counts_layers_per_segment_in_every_language(code):
    text = content_file("how-many", code).read_text(encoding="utf-8")
    assert "N/k + k" in text
    assert not re.search(r"\*\*k (segments|Segmente|đoạn)\*\*", text)
    assert not re.search(r"k \+ N/k", text)


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_numbers_with_a_value_are_never_typed(code):
    for path, typed in (("why-memory", ("1,024 tokens", "1.024 Tokens", "1.024 token")),
                        ("how-many", ("1,000-layer", "1.000 Schichten", "1.000 layer"))):
        text = content_file(path, code).read_text(encoding="utf-8")
        assert not any(item in text for item in typed), (path, code)


def test_the_lesson_4_demo_link_selects_the_sqrt_strategy_it_promises():
    for code in ("en", "de", "vi"):
        demo = load("language-models", lesson_values(code), code).demo
        assert set(demo.query["strategy"].split(",")) == {"every-layer", "sqrt"}
        assert "√N" in demo.label


def test_the_loss_peak_names_three_tensors():
    text = "\n".join(block.text for block in load("large-vocabularies",
                                                   lesson_values()).blocks)
    assert "up to three b·s·V tensors" not in text.lower()
    assert "the log-probabilities, their gradient and the logits' gradient" in text


def test_every_lesson_path_has_its_translations():
    for path in LESSON_PATHS:
        for code in ("de", "vi"):
            assert content_file(path, code).parent.name == code
