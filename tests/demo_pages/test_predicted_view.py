"""The compare page after a slider move to a configuration nobody measured yet: the memory
model's predicted peaks show first, marked predicted and never "measured", and the
measured numbers replace them once the run lands (the engine runs for real)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from streamlit.delta_generator import DeltaGenerator

from i18n.units import format_bytes
from memory import theory
from memory.config import ModelConfig
from memory.strategies import parse_strategies, title
from ui.demo_standins import PREDICTED_DELTA as PREDICTED

# A tiny model no other page test asks for, so its run is new to this process's store.
QUERY = {
    "layers": "2",
    "hidden": "64",
    "heads": "2",
    "seq": "32",
    "batch": "1",
    "vocab": "768",
    "strategy": "every-layer",
}


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Every metric and text the page sends, in the order the browser gets them (an
    AppTest keeps only the last tree): ("metric", label, value, delta) or ("text", body)."""
    events: list[tuple[str, ...]] = []
    enqueue = DeltaGenerator._enqueue

    def recording(self, delta_type, element_proto, *args, **kwargs):
        if delta_type == "metric":
            events.append(("metric", element_proto.label, element_proto.body, element_proto.delta))
        elif delta_type == "markdown":
            events.append(("text", element_proto.body))
        return enqueue(self, delta_type, element_proto, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "_enqueue", recording)
    return events


def test_a_new_config_shows_its_prediction_first_then_the_measurement(
    app_test: Callable, drawn: list[tuple[str, ...]]
) -> None:
    at = app_test("pages/demos/compare.py", query=QUERY)
    assert not at.exception and at.table
    drawn.clear()
    at.slider(key="layers").set_value(3).run()
    assert not at.exception

    # The rerun's first numbers: the memory model's peak of each strategy, marked predicted.
    config = ModelConfig(layers=3, hidden=64, heads=2, seq_len=32, batch=1, vocab=768)
    specs = parse_strategies("none,every-layer")
    metrics = [i for i, event in enumerate(drawn) if event[0] == "metric"]
    predicted = [drawn[i] for i in metrics[: len(specs)]]
    assert predicted == [
        (
            "metric",
            f"Peak memory: {title(spec)}",
            format_bytes(theory.predicted_peak_bytes(config, spec, "cpu")),
            PREDICTED,
        )
        for spec in specs
    ]
    # Their frame: a caption that says "predicted", nothing in it says "measured".
    start = max(i for i in range(metrics[0]) if drawn[i][0] == "text")
    frame = drawn[start : metrics[len(specs) - 1] + 1]
    assert frame[0][1].startswith(":material/calculate: Predicted by the course's memory")
    assert not any("measured" in part.lower() for event in frame for part in event[1:])

    # Later in the same rerun the measured numbers replace them: the finished page holds
    # the measurement and its caption, and no predicted number.
    later = drawn[metrics[len(specs) - 1] + 1 :]
    assert any(event[0] == "text" and "Measured on this run on" in event[1] for event in later)
    assert not [m for m in at.metric if m.proto.delta == PREDICTED]
    assert at.metric[0].label.startswith("Peak memory:")
    assert "Measured on this run on" in "\n".join(c.value for c in at.caption)
    assert not any(PREDICTED in str(c.value) or "Predicted by" in str(c.value) for c in at.caption)
