"""reports.*_figures: pure Plotly builders, fed synthetic records."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pandas as pd
import pytest

from i18n.units import byte_unit, format_bytes
from memory.strategies import STRATEGIES, StrategySpec, parse_strategies, parse_strategy
from memory.strategies import colour as strategy_colour
from reports import compare_figures, timeline_figures
from reports.compare_figures import (
    activation_caption,
    activation_theory_figure,
    breakdown_caption,
    breakdown_figure,
    peak_and_time_figure,
)
from reports.figure_style import colour_of
from reports.fits_and_loss_figures import fits_caption, fits_figure, loss_caption, loss_figure
from reports.sweep_figures import segment_figure, segment_verdict, sweep_figure
from reports.timeline_figures import timeline_figure, timeline_frame

MIB = 2**20


def result(strategy: str, peak_mib: float, seconds: float, fits: bool = True) -> SimpleNamespace:
    return SimpleNamespace(
        strategy=strategy, spec=parse_strategy(strategy), label=strategy, fits=fits,
        peak_bytes=peak_mib * MIB,
        activation_bytes=peak_mib * MIB / 2, predicted_activation_bytes=peak_mib * MIB / 2 * 1.005,
        step_seconds=seconds, step_seconds_runs=[seconds * 0.98, seconds, seconds * 1.03],
        breakdown={"parameters": 10 * MIB, "gradients": 10 * MIB,
                   "activations": peak_mib * MIB / 2, "logits": 8 * MIB, "temporaries": MIB},
    )


RESULTS = [result("none", 200, 0.4), result("every-layer", 60, 0.5), result("sqrt", 90, 0.46)]


def test_each_strategy_has_its_own_colour_and_variants_share_it() -> None:
    colours = [s.colour for s in STRATEGIES.values()]
    assert len(set(colours)) == len(colours)
    # a record's colour, and a table's text's (its canonical text, or a fallback)
    assert strategy_colour(StrategySpec("every-k", k=4)) == colour_of("every-k:2") == STRATEGIES[
        "every-k"].colour
    assert colour_of("selective:save-attention") == STRATEGIES["selective"].colour
    assert colour_of("budget:dp:50MiB") == STRATEGIES["budget"].colour
    assert colour_of("mystery") == colour_of("mystery")  # stable fallback
    assert colour_of("mystery") not in colours


def test_units() -> None:
    assert byte_unit(100 * MIB) == ("MiB", MIB)
    assert byte_unit(3 * 2**30) == ("GiB", 2**30)
    assert format_bytes(1536 * MIB) == "1.50 GiB"
    assert format_bytes(None) == "–"


def test_peak_and_time_figure_draws_one_bar_per_strategy_in_its_colour() -> None:
    fig = peak_and_time_figure(RESULTS)
    memory, time = fig.data
    assert list(memory.x) == ["no checkpoints", "every layer", "every √N layers"]
    assert list(memory.y) == pytest.approx([200, 60, 90])
    assert list(time.y) == pytest.approx([400, 500, 460])  # the medians of the runs
    ids = ("none", "every-layer", "sqrt")
    assert list(memory.marker.color) == [colour_of(s) for s in ids]
    assert fig.layout.yaxis.title.text == "MiB" and fig.layout.yaxis2.title.text == "ms"
    assert "above the parameters" in fig.layout.annotations[0].text


def test_figures_look_as_plotly_white_for_every_kind_of_trace_they_draw() -> None:
    """The figures carry a smaller template than Plotly's "plotly_white" (the copy into
    each figure is cheaper): its layout whole and its defaults for every kind of trace
    drawn, so each figure looks as it would with the whole one."""
    import plotly.io as pio

    white = pio.templates["plotly_white"].to_plotly_json()
    frame = pd.DataFrame({"layers": [2, 4], "strategy": ["none"] * 2,
                          "activation_bytes": [MIB, 2 * MIB], "step_seconds": [0.1, 0.2],
                          "fits": [True] * 2})
    for fig in (peak_and_time_figure(RESULTS), breakdown_figure(RESULTS),
                timeline_figure(timeline_frame({StrategySpec("none"): _points("none")})),
                sweep_figure(frame, "layers", "layers N")):
        template = fig.layout.template.to_plotly_json()
        assert template["layout"] == white["layout"]
        kinds = {trace.type for trace in fig.data}
        assert kinds and kinds <= set(template["data"])
        for kind in kinds:
            assert template["data"][kind] == white["data"][kind], kind


def test_step_times_carry_their_spread_as_error_bars() -> None:
    """A bar per strategy from two steps, with no spread, showed noise as fact."""
    noisy = [result("none", 200, 0.4), result("every-layer", 60, 0.5)]
    noisy[0].step_seconds_runs = [0.30, 0.38, 0.40, 0.41, 0.52]
    fig = peak_and_time_figure(noisy)
    bars = fig.data[1]
    assert bars.error_y.array[0] == pytest.approx((0.41 - 0.40) * 1000)
    assert bars.error_y.arrayminus[0] == pytest.approx((0.40 - 0.38) * 1000)


def test_strategies_that_do_not_fit_are_left_out_of_the_bars() -> None:
    fig = peak_and_time_figure([*RESULTS[:2], result("sqrt", 0, 0, fits=False)])
    assert list(fig.data[0].x) == ["no checkpoints", "every layer"]
    empty = peak_and_time_figure([result("none", 0, 0, fits=False)])
    assert not empty.data and "No strategy fitted" in empty.layout.annotations[0].text


def test_breakdown_stacks_the_five_parts_and_its_caption_reads_the_bars() -> None:
    fig = breakdown_figure(RESULTS)
    assert [trace.name for trace in fig.data] == [
        compare_figures.BREAKDOWN_NAMES[p] for p in compare_figures.BREAKDOWN_PARTS]
    assert fig.layout.barmode == "stack"
    activations = next(t for t in fig.data if t.name == "activations")
    assert list(activations.y) == pytest.approx([100, 30, 45])
    # The old subtitle said "parameters, gradients and logits stay" whatever the bars
    # showed: the caption now says what differs, from the numbers.
    caption = breakdown_caption(RESULTS)
    assert "Different between the strategies: activations." in caption
    assert "The same for all: parameters, gradients, logits (loss), backward temporaries." \
        in caption
    moved = [SimpleNamespace(**{**vars(r), "breakdown": {**r.breakdown, "gradients": g}})
             for r, g in zip(RESULTS, (10 * MIB, 3 * MIB, 6 * MIB), strict=True)]
    assert "Different between the strategies: gradients, activations." in breakdown_caption(
        moved)


def test_activation_caption_reports_the_gap_to_the_prediction() -> None:
    fig = activation_theory_figure(RESULTS, korthikanti_bytes=150 * MIB)
    assert "within 0.50%" in activation_caption(RESULTS)
    reference = next(t for t in fig.data if t.name.startswith("Korthikanti"))
    assert list(reference.y) == pytest.approx([150] * 3)
    exact = [SimpleNamespace(**{**vars(r), "predicted_activation_bytes": r.activation_bytes})
             for r in RESULTS]
    assert "agree to the byte" in activation_caption(exact)


def _points(strategy: str) -> list[SimpleNamespace]:
    phases = [("forward", 0)] * 3 + [("forward", 1)] * 3 + [("loss", None)] * 2 + [
        ("recompute", 1)] * 2 + [("backward", 1)] * 3 + [("backward", 0)] * 3
    return [SimpleNamespace(index=i, op=f"aten.op{i}", phase=phase, layer=layer,
                            live_bytes=(i + 1) * MIB if i != 9 else 40 * MIB)
            for i, (phase, layer) in enumerate(phases)]


def test_timeline_marks_phases_layers_and_names_the_op_at_the_peak() -> None:
    frame = timeline_frame({StrategySpec("none"): _points("none"),
                            StrategySpec("every-layer"): _points("every-layer")})
    assert list(frame.columns) == list(timeline_figures.TIMELINE_COLUMNS) and len(frame) == 32
    fig = timeline_figure(frame, facet=True)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert [t.name for t in lines] == ["no checkpoints", "every layer"]
    assert "layer %{customdata[2]}" in lines[0].hovertemplate
    assert lines[0].customdata[4][0] == "aten.op4"
    labels = {text for t in fig.data if t.mode == "text" for text in t.text}
    assert {"F0", "F1", "L", "R1", "B1", "B0"} <= labels
    stars = [t for t in fig.data if t.mode == "markers+text"]
    assert [list(t.x) for t in stars] == [[9], [9]]
    assert stars[0].text[0] == "peak (R1):<br>aten.op9"  # the op at the peak, named
    assert not fig.layout.shapes  # bands are traces, not one shape per segment
    overlaid = timeline_figure(frame, facet=False)
    assert not overlaid.layout.shapes and overlaid.data[0].showlegend


def test_the_timeline_figure_is_bounded_whatever_the_depth() -> None:
    """/timeline?layers=24 once spent 214 s building one Plotly shape per layer
    segment. Now a few traces per strategy, built in well under a second."""
    import time

    def deep(layers: int) -> list[SimpleNamespace]:
        phases = ([("forward", i) for i in range(layers) for _ in range(40)] + [("loss", None)] * 9
                  + [(phase, i) for i in reversed(range(layers))
                     for phase in ("recompute",) * 40 + ("backward",) * 60])
        return [SimpleNamespace(index=n, op="aten.mm", phase=p, layer=layer, live_bytes=n)
                for n, (p, layer) in enumerate(phases)]

    frame = timeline_frame({s: deep(24) for s in parse_strategies(
        "none,every-layer,sqrt,selective:save-matmuls")})
    start = time.process_time()  # this process's CPU: other work on a shared machine aside
    fig = timeline_figure(frame)
    fig.to_json()
    assert time.process_time() - start < 1.0
    assert len(fig.data) <= 8 * 4 and not fig.layout.shapes
    assert len(fig.layout.annotations) <= 4  # the panel titles only


def test_two_panel_figures_stack_for_a_phone() -> None:
    """On phones, side-by-side panels overlapped their titles, legends and axes at
    390 px. Panels are now stacked, titles are one short line, legends under the plot."""
    sweep = pd.DataFrame({"layers": [2, 4], "strategy": ["none", "none"], "fits": [True] * 2,
                          "activation_bytes": [MIB, 2 * MIB], "step_seconds": [0.1, 0.2]})
    fits = pd.DataFrame({"strategy": ["none"], "value_predicted": [4], "value_confirmed": [4],
                         "tokens_per_second": [900.0]})
    for fig in (peak_and_time_figure(RESULTS), sweep_figure(sweep, "layers", "layers N"),
                fits_figure(fits, "batch", 256 * MIB), breakdown_figure(RESULTS),
                activation_theory_figure(RESULTS)):
        title = fig.layout.title.text
        assert "<br>" not in title and len(title) <= 40, title
    for lang in ("de", "vi"):  # a phone shows about 42 characters of a title at 390 px
        for fig in (peak_and_time_figure(RESULTS, lang), breakdown_figure(RESULTS, lang),
                    activation_theory_figure(RESULTS, lang=lang)):
            assert len(fig.layout.title.text) <= 42, fig.layout.title.text
        legend = fig.layout.legend  # at the figure's foot, not over the titles
        assert (legend.yref, legend.y, legend.yanchor) == ("container", 0, "bottom")
        if "xaxis2" in fig.layout and fig.layout.xaxis2.domain is not None:
            assert tuple(fig.layout.xaxis.domain) == tuple(fig.layout.xaxis2.domain)  # stacked


def test_figures_speak_the_session_language() -> None:
    english = peak_and_time_figure(RESULTS)
    for lang in ("de", "vi"):
        fig = peak_and_time_figure(RESULTS, lang=lang)
        assert fig.layout.title.text != english.layout.title.text
        assert fig.layout.annotations[0].text != english.layout.annotations[0].text
        names = [t.name for t in breakdown_figure(RESULTS, lang=lang).data]
        assert names != list(compare_figures.BREAKDOWN_NAMES.values())


def test_sweep_figure_puts_measured_and_theory_on_the_same_axes() -> None:
    frame = pd.DataFrame({
        "layers": [2, 4, 8] * 2, "strategy": ["none"] * 3 + ["every-layer"] * 3,
        "activation_bytes": [MIB * v for v in (10, 20, 40, 2, 3, 5)],
        "predicted_activation_bytes": [MIB * v for v in (10, 20, 40, 2, 3, 5)],
        "step_seconds": [0.1, 0.2, 0.4, 0.13, 0.26, 0.52], "fits": [True] * 6,
    })
    fig = sweep_figure(frame, "layers", "layers N", theory="predicted_activation_bytes")
    dashed = [t for t in fig.data if t.line.dash == "dash"]
    assert [t.name for t in dashed] == ["no checkpoints (theory)", "every layer (theory)"]
    assert all(t.xaxis == "x" for t in dashed)
    times = [t for t in fig.data if t.xaxis == "x2"]
    assert list(times[0].y) == pytest.approx([100, 200, 400])
    with_layer = sweep_figure(frame, "layers", "layers N", reference=("one layer", 5 * MIB))
    line = next(t for t in with_layer.data if t.name == "one layer")
    assert list(line.y) == pytest.approx([5, 5, 5]) and line.xaxis == "x"


def test_segment_figure_marks_the_measured_optimum_and_sqrt_n() -> None:
    frame = pd.DataFrame({"k": [1, 2, 4, 8, 16],
                          "strategy": [f"every-k:{k}" for k in (1, 2, 4, 8, 16)],
                          "peak_bytes": [MIB * v for v in (30, 25, 28, 40, 70)],
                          "predicted_peak_bytes": [MIB * v for v in (30, 25, 28, 40, 70)],
                          "activation_bytes": [MIB * v for v in (16, 8, 4, 2, 1)],
                          "step_seconds": [0.5] * 5})
    fig = segment_figure(frame, 16)
    star = next(t for t in fig.data if t.name == "lowest measured peak")
    assert list(star.x) == [2]
    assert "U-shaped: the lowest peak is at k=2 layers per segment (√N=4.0)" in segment_verdict(
        frame, 16)
    assert fig.layout.xaxis2.title.text == "layers per segment k"  # k named in words
    assert fig.layout.xaxis.title.text is None  # one x title under both stacked panels
    peak = next(t for t in fig.data if t.name.startswith("peak"))
    assert list(peak.x) == [1, 2, 4, 8, 16]  # one series across k, not one per k
    assert any(t.line.dash == "dash" for t in fig.data if t.mode == "lines")
    at_one = frame.assign(peak_bytes=[MIB * v for v in (20, 25, 28, 40, 70)])
    assert "checkpointing every layer beats segments of √N=4.0" in segment_verdict(at_one, 16)


def test_fits_figure_and_loss_figure() -> None:
    frame = pd.DataFrame({"strategy": ["none", "every-layer"], "value_predicted": [4, 12],
                          "value_confirmed": [4, 11], "tokens_per_second": [900.0, 700.0]})
    assert "2.8× with every layer checkpointed" in fits_caption(frame, "batch")
    # none does not fit at all: no "nan×" ratio and no "NaN" bar label.
    partial = pd.DataFrame({"strategy": ["none", "every-layer"], "value_predicted": [None, 1],
                            "value_confirmed": [None, 1], "tokens_per_second": [None, 988.0]})
    fig = fits_figure(partial, "batch", 320 * MIB)
    assert "nan" not in fig.layout.title.text.lower() and not fits_caption(partial, "batch")
    assert list(fig.data[1].text) == ["does not fit", "1"]
    losses = pd.DataFrame({"step": [0, 1, 0, 1], "strategy": ["none", "none", "sqrt", "sqrt"],
                           "loss": [5.0, 4.0, 5.0, 4.0]})
    assert loss_figure(losses).data
    assert "identical to the last bit" in loss_caption(0.0)
    assert "1.00e-06" in loss_caption(1e-6)


def test_the_timeline_line_leaves_out_only_points_on_flat_stretches() -> None:
    live = [1, 2, 2, 2, 2, 3, 1, 1, 1]
    frame = timeline_frame({StrategySpec("none"): [SimpleNamespace(index=i, op="aten.view",
                                                                   phase="forward",
                                                     layer=0, live_bytes=v * MIB)
                                     for i, v in enumerate(live)]})
    line = next(t for t in timeline_figure(frame).data if t.mode == "lines")
    assert list(line.x) == [0, 1, 4, 5, 6, 8]  # the corners of the drawn line, nothing more
    assert list(line.y) == pytest.approx([1, 2, 2, 3, 1, 1])


def test_band_labels_keep_apart_where_the_runs_are_narrow() -> None:
    """Eight forward layers of 2 ops each, then long backward runs: the labels are spaced
    by position (they crowded into one strip on a phone when thinned by count)."""
    phases = [("forward", layer) for layer in range(8) for _ in range(2)] + [
        ("backward", layer) for layer in reversed(range(8)) for _ in range(20)]
    points = [SimpleNamespace(index=i, op=f"aten.op{i}", phase=phase, layer=layer,
                              live_bytes=(i % 7 + 1) * MIB)
              for i, (phase, layer) in enumerate(phases)]
    fig = timeline_figure(timeline_frame({StrategySpec("none"): points}), facet=True)
    text = next(t for t in fig.data if t.mode == "text")
    xs = sorted(text.x)
    span = len(points) - 1
    gap = span / timeline_figures.MAX_SEGMENT_LABELS
    assert all(b - a >= gap for a, b in itertools.pairwise(xs))
    assert "F0" in text.text and "B0" in text.text  # the first forward and last backward
    assert sum(label.startswith("F") for label in text.text) < 8  # not every narrow run


def test_a_one_op_run_gets_no_label_beside_a_wide_one() -> None:
    """Layer 1's backward opens with one op before its recompute: the wide runs around it
    are labelled, not that op (it showed as a second "B1" beside R1)."""
    phases = ([("forward", 0)] * 30 + [("forward", 1)] * 30 + [("backward", 1)]
              + [("recompute", 1)] * 30 + [("backward", 1)] * 60 + [("backward", 0)] * 60)
    points = [SimpleNamespace(index=i, op=f"aten.op{i}", phase=phase, layer=layer,
                              live_bytes=(i % 5 + 1) * MIB)
              for i, (phase, layer) in enumerate(phases)]
    fig = timeline_figure(timeline_frame({StrategySpec("every-layer"): points}), facet=True)
    text = next(t for t in fig.data if t.mode == "text")
    assert list(text.text) == ["F0", "F1", "R1", "B1", "B0"]


def test_long_panel_titles_wrap_in_every_language() -> None:
    """A phone cut Compare's panel title "Step time (ms), median and middle half of the
    runs" (longer in German) at the screen's edges: Plotly never wraps subplot titles."""
    from reports.compare_figures import peak_and_time_figure
    from reports.figure_style import PANEL_TITLE_CHARS, panel_title

    assert panel_title("Step time (ms)") == "Step time (ms)"
    for lang in ("en", "de", "vi"):
        fig = peak_and_time_figure(RESULTS, lang)
        titles = [a.text for a in fig.layout.annotations]
        assert len(titles) == 2 and any("<br>" in title for title in titles), titles
        for title in titles:
            assert all(len(line) <= PANEL_TITLE_CHARS for line in title.split("<br>")), title
