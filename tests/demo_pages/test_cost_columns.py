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
    # the verdict's measure is said: CPU time, its medians beside the share the note gives
    assert "the verdicts are read from CPU time" in captions
    assert "read from CPU time, which other learners' load hardly moves" in captions
    assert "by CPU time" in table["Step time (vs baseline)"].iloc[1]
    assert "CPU time per step: every layer" in labels
    cpu = at.metric[labels.index("CPU time per step: every layer")]
    assert cpu.value.endswith(" ms") and "Wall time " in captions


def test_timeline_shows_counted_compute_and_wall_time_beside_cpu_time(app_test: Callable
                                                                       ) -> None:
    """The timeline counted the compute but timed nothing: no wall or CPU time."""
    at = app_test("pages/demos/timeline.py", query={**TINY, "strategy": "every-layer"})
    no_errors(at)
    captions = texts(at, "caption")
    assert "counted by torch's FLOP counter" in captions and COURSE in captions
    assert "the verdicts are read from CPU time" in captions  # wall against CPU time
    assert "median of 3 timed steps per strategy" in captions
    table = at.table[0].value
    assert list(table.columns) == ["Strategy", "Extra compute: counted (predicted)",
                                   "Step time: wall (range), CPU, vs no checkpointing"]
    compute, step = table.iloc[1, 1], table.iloc[1, 2]
    assert compute.startswith("+") and "(predicted +" in compute
    assert f"every layer {compute}" in captions  # the same count as the caption's
    assert re.fullmatch(r"[\d.,]+ ms \([\d.,]+–[\d.,]+\), CPU [\d.,]+ ms \([\d.,]+–[\d.,]+\), "
                        r".+ (by CPU time|timing noise)", step), step
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
    assert "median of 3 timed steps at the confirmed size" in captions
    assert COURSE in captions
    # the verdict at equal work, by CPU time per token, and when the advice holds
    verdict = [m.value for m in at.markdown if "At equal work" in m.value]
    assert len(verdict) == 1 and "the CPU time per token of no checkpointing" in verdict[0]
    assert [e.label for e in at.expander] == ["When does a larger batch win back the time?"]
    assert "about 295 FLOPs per byte" in texts(at, "markdown")


def test_selective_counted_at_nothing_says_why_in_its_metric(app_test: Callable) -> None:
    """Selective read "+0.0% extra compute" on a CPU beside lesson 4's +2.7%, with the
    reason only in small print: the metric's own delta says it now."""
    from demos.installed_torch import counter_counts_attention

    at = app_test("pages/demos/compare.py",
                  query={**TINY, "strategy": "selective:save-matmuls"})
    no_errors(at)
    extra = [m for m in at.metric if m.label.startswith("Extra compute: selective")]
    assert len(extra) == 1, [m.label for m in at.metric]
    extra = extra[0]
    delta = extra.proto.delta
    if counter_counts_attention("cpu"):  # a torch that counts the CPU's fused attention
        assert "not its real cost" not in delta  # sees the rerun
        return
    assert extra.value == "+0.0%"
    assert delta.startswith("counted +0.0%: not its real cost")
    assert "skips the fused attention kernel and the element-wise ops" in delta
    assert "2.7% more FLOPs on GPT-3 (lesson 4" in delta


def test_the_compute_note_names_the_axis_in_the_readers_language() -> None:
    import pandas as pd

    from reports.timing import sweep_compute_note

    frame = pd.DataFrame({"seq_len": [64, 64], "strategy": ["none", "every-layer"],
                          "flops_counted": [100.0, 133.0], "flops_predicted": [100.0, 133.0]})
    note = sweep_compute_note(frame, "seq_len", "de", "Sequenzlänge s (Tokens)")
    assert "Sequenzlänge s (Tokens) = 64" in note and "seq_len" not in note
