"""AppTest: the demo pages show the compute torch's counter counted beside the prediction,
the course's rule beside it, and the CPU time beside the wall time."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from tests.demo_pages.test_pages import TINY, no_errors, texts

COURSE = "course: +33% (+50% with frozen weights)"


def test_compare_shows_counted_compute_cpu_time_and_the_course_rule(app_test: Callable) -> None:
    at = app_test("pages/demos/compare.py", query={**TINY, "strategy": "every-layer"})
    no_errors(at)
    table = at.table[0].value
    assert ", CPU " in table["Step time (vs baseline)"].iloc[1]
    labels = [m.label for m in at.metric]
    assert "Extra compute: every layer" in labels
    extra = at.metric[labels.index("Extra compute: every layer")]
    counted = extra.value
    assert counted.startswith("+") and COURSE in extra.proto.delta
    assert f"predicted {counted}" in extra.proto.delta  # equal within 0.1%
    captions = texts(at, "caption")
    assert "counted by torch's FLOP counter" in captions and COURSE in captions
    assert f"every layer {counted} (predicted {counted})" in captions
    assert "early stop" in captions
    assert "the gap between them is their load" in captions


def test_timeline_shows_counted_compute_and_wall_time_beside_cpu_time(app_test: Callable
                                                                       ) -> None:
    """The timeline counted the compute but timed nothing: no wall or CPU time."""
    at = app_test("pages/demos/timeline.py", query={**TINY, "strategy": "every-layer"})
    no_errors(at)
    captions = texts(at, "caption")
    assert "counted by torch's FLOP counter" in captions and COURSE in captions
    assert "the gap between them is their load" in captions  # wall against CPU time
    assert "median of 3 timed steps per strategy" in captions
    table = at.table[0].value
    assert list(table.columns) == ["Strategy", "Extra compute: counted (predicted)",
                                   "Step time: wall (range), CPU, vs no checkpointing"]
    compute, step = table.iloc[1, 1], table.iloc[1, 2]
    assert compute.startswith("+") and "(predicted +" in compute
    assert f"every layer {compute}" in captions  # the same count as the caption's
    assert re.fullmatch(r"[\d.,]+ ms \([\d.,]+–[\d.,]+\), CPU [\d.,]+ ms, .+", step), step
    assert table.iloc[0, 1] == "baseline" and ", CPU " in table.iloc[0, 2]


def test_curves_say_the_counted_compute_and_draw_cpu_time(app_test: Callable) -> None:
    query = {k: v for k, v in TINY.items() if k != "batch"} | {"sweep": "batch"}
    at = app_test("pages/demos/curves.py", query=query, timeout=120)
    no_errors(at)
    captions = texts(at, "caption")
    assert "counted by torch's FLOP counter" in captions and COURSE in captions
    assert "dotted lines this process's CPU time" in captions
    figure = at.get("plotly_chart")[0].proto.spec
    assert "CPU time" in figure
    assert "bars the range of the timed runs" in captions
    # the swept value named as the chart's axis names it, not by the frame's column
    assert "Compute of one step at batch b = " in captions
    # the wall time's median with the range of its timed runs, as on Compare
    timed = [trace for trace in json.loads(figure)["data"]
             if trace.get("yaxis") == "y2" and trace.get("mode") == "lines+markers"]
    assert timed and all(trace["error_y"]["symmetric"] is False
                         and "arrayminus" in trace["error_y"] for trace in timed)


def test_what_fits_times_with_repeats_and_counts_the_compute(app_test: Callable) -> None:
    at = app_test("pages/demos/what_fits.py", query={**TINY, "budget": "16"}, timeout=120)
    no_errors(at)
    table = at.table[0].value
    step = table["Tokens / s · one step: wall, CPU · compute counted (predicted)"]
    assert all(", CPU " in cell and "GFLOP (predicted " in cell for cell in step[:2])
    captions = texts(at, "caption")
    assert "median of the timed steps at the confirmed size" in captions
    assert COURSE in captions


def test_the_compute_note_names_the_axis_in_the_readers_language() -> None:
    import pandas as pd

    from demos.reports.timing import sweep_compute_note

    frame = pd.DataFrame({"seq_len": [64, 64], "strategy": ["none", "every-layer"],
                          "flops_counted": [100.0, 133.0], "flops_predicted": [100.0, 133.0]})
    note = sweep_compute_note(frame, "seq_len", "de", "Sequenzlänge s (Tokens)")
    assert "Sequenzlänge s (Tokens) = 64" in note and "seq_len" not in note
