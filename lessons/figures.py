"""Plotly figures for the lessons: pure functions from numbers to go.Figure."""

from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from i18n import DEFAULT, N_, format_decimal, gettext
from lessons.checkpoint_math import (
    GB,
    BudgetPlan,
    format_gb,
    logits_bytes,
    optimal_segment_length,
    recursive_cost,
    segment_memory,
)
from lessons.memory_calculator import COMPONENT_LABELS, COMPONENTS, MemoryBreakdown
from lessons.stepper import (
    DROPPED,
    FREED,
    HELD,
    NOT_YET,
    RECOMPUTED,
    STATES,
    STRATEGIES,
    TRANSIENT,
    Simulation,
    simulate,
    state_label,
    strategy_label,
)

COMPONENT_COLORS = {
    "weights": "#4C78A8",
    "gradients": "#72B7B2",
    "optimizer": "#54A24B",
    "activations": "#F58518",
    "logits": "#E45756",
}
STATE_COLORS = {
    NOT_YET: "#F2F2F2",
    HELD: "#4C78A8",
    TRANSIENT: "#9ECAE9",
    DROPPED: "#FFFFFF",
    RECOMPUTED: "#F58518",
    FREED: "#C7E9C0",
}
_LAYOUT = {"template": "plotly_white", "margin": {"l": 10, "r": 10, "t": 30, "b": 10}}
# Legends sit in the figure's own margin, above or below the plot, never over it: their
# height is measured from the container, so Plotly reserves it however many rows a narrow
# screen (a phone) wraps them into. (Horizontally they stay on the plot's paper: a legend
# placed from the container's side would take the plot's width.)
LEGEND_ABOVE = {"orientation": "h", "yref": "container", "y": 1.0, "yanchor": "top",
                "x": 0, "xanchor": "left", "traceorder": "normal"}
LEGEND_BELOW = {"orientation": "h", "yref": "container", "y": 0.0, "yanchor": "bottom",
                "x": 0, "xanchor": "left", "traceorder": "normal"}


def _gb_axis(code: str) -> str:
    return gettext(code, "GB (10⁹ bytes)")


def memory_breakdown_figure(bars: dict[str, MemoryBreakdown],
                            code: str = DEFAULT) -> go.Figure:
    """One stacked bar per setup (e.g. without and with checkpointing), in GB; `bars` is
    keyed by the bars' labels, already in language `code`."""
    labels = list(bars)
    fig = go.Figure()
    for component in COMPONENTS:
        name = gettext(code, COMPONENT_LABELS[component])
        values = [bars[label].in_gb()[component] for label in labels]
        fig.add_bar(
            y=labels, x=values, name=name, orientation="h",
            marker_color=COMPONENT_COLORS[component],
            text=[format_decimal(value, code, 2 if value < 1 else 1) for value in values],
            textposition="inside", insidetextanchor="middle",
            hovertemplate=f"{name}: %{{x:.2f}} GB<extra></extra>",
        )
    for label in labels:
        total = bars[label].total
        fig.add_annotation(x=total / GB, y=label,
                           text=f"<b>{format_gb(total, locale=code)}</b>",
                           showarrow=False, xanchor="left", xshift=6)
    fig.update_layout(barmode="stack", height=300, xaxis_title=_gb_axis(code),
                      legend=LEGEND_ABOVE, yaxis={"autorange": "reversed", "automargin": True},
                      separators=_separators(code), **_LAYOUT)
    fig.update_xaxes(range=[0, max(b.total for b in bars.values()) / GB * 1.25])
    return fig


def _separators(code: str) -> str:
    """Plotly's decimal and thousands separators for language `code` (axis ticks, hover)."""
    return format_decimal(1000.5, code, 1)[-2] + format_decimal(1000.5, code, 1)[1]


# --------------------------------------------------------------------------------------
# The stepper
# --------------------------------------------------------------------------------------


def stepper_figure(sim: Simulation, index: int, code: str = DEFAULT) -> go.Figure:
    """Each layer as a column: its input (1 unit) at the bottom and its internals (r units)
    stacked above, coloured by their state during step `index`."""
    step = sim.steps[index]
    n = sim.layers
    fig = go.Figure()
    input_height = 1.0
    internals_height = max(sim.ratio, 0.0)
    for state in STATES:
        name = state_label(state, code)
        xs, ys, bases, hover = [], [], [], []
        for layer in range(1, n + 1):
            if step.inputs[layer - 1] == state:
                xs.append(layer)
                ys.append(input_height)
                bases.append(0.0)
                hover.append(gettext(code, "input of layer {layer}: {state}", layer=layer,
                                state=name))
            if internals_height and step.internals[layer - 1] == state:
                xs.append(layer)
                ys.append(internals_height)
                bases.append(input_height + 0.15)
                hover.append(gettext(code, "internals of layer {layer}: {state}", layer=layer,
                                state=name))
        fig.add_bar(
            x=xs or [None], y=ys or [None], base=bases or [None], name=name,
            marker={"color": STATE_COLORS[state],
                    "line": {"color": "#555555", "width": 1.2 if state == DROPPED else 0.6},
                    "pattern": {"shape": "/" if state == DROPPED else ""}},
            hovertext=hover or None, hoverinfo="text", width=0.8, showlegend=True,
        )
    top = input_height + 0.15 + internals_height
    if sim.strategy != "keep-all":  # keeping everything has no checkpoints to mark
        checkpoint_x = [j + 1 for j in sim.checkpoints]
        fig.add_scatter(x=checkpoint_x, y=[-0.35] * len(checkpoint_x), mode="markers",
                        marker={"symbol": "triangle-up", "size": 11, "color": "#222222"},
                        name=gettext(code, "checkpoint (input kept)"), hoverinfo="skip")
    arrow = {"forward": N_("forward ▶"), "recompute": N_("recompute ↻"),
             "backward": N_("◀ backward")}
    fig.add_annotation(x=step.layer, y=top, text=f"<b>{gettext(code, arrow[step.phase])}</b>",
                       showarrow=True, arrowhead=2, ay=-34, ax=0, yanchor="bottom",
                       font={"size": 13})
    fig.update_layout(
        barmode="overlay", height=400, bargap=0.15,
        xaxis={"title": gettext(code, "layer"), "tickmode": "linear", "dtick": 1,
               "range": [0.4, n + 0.6]},
        yaxis={"range": [-0.7, top * 1.25 + 0.5], "showgrid": False, "automargin": True,
               "tickvals": [0.5, input_height + 0.15 + internals_height / 2]
               if internals_height else [0.5],
               "ticktext": [gettext(code, "input"),
                            gettext(code, "internals ({ratio})", ratio=format_decimal(sim.ratio,
                                                                               code))]},
        legend=LEGEND_BELOW, separators=_separators(code),
        template="plotly_white", margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    return fig


def stepper_memory_figure(sim: Simulation, index: int, code: str = DEFAULT) -> go.Figure:
    """Memory in use at every step, the current step marked and the peak drawn."""
    xs = [step.index + 1 for step in sim.steps]
    ys = [step.memory for step in sim.steps]
    fig = go.Figure()
    fig.add_scatter(x=xs, y=ys, mode="lines", line={"shape": "hv", "color": "#4C78A8"},
                    name=gettext(code, "memory in use"),
                    hovertemplate=gettext(code, "step %{x}: %{y} units") + "<extra></extra>")
    fig.add_scatter(x=[index + 1], y=[sim.steps[index].memory], mode="markers",
                    marker={"size": 12, "color": "#E45756"}, name=gettext(code, "now"))
    fig.add_hline(y=sim.peak, line_dash="dot", line_color="#888888",
                  annotation_text=gettext(code, "peak {peak}", peak=format_decimal(sim.peak, code)),
                  annotation_position="top left")
    fig.update_layout(height=220, showlegend=False, xaxis_title=gettext(code, "step"),
                      yaxis_title=gettext(code, "units"), separators=_separators(code), **_LAYOUT)
    fig.update_yaxes(rangemode="tozero")
    return fig


def tradeoff_figure(layers: int, ratio: float, code: str = DEFAULT) -> go.Figure:
    """Peak memory against forward computations for every strategy, plus the recursive one
    (single-tensor layers, so only when ratio is 0)."""
    symbols = ["circle", "square", "triangle-up", "star"]
    fig = go.Figure()
    for strategy, symbol in zip(STRATEGIES, symbols, strict=True):
        sim = simulate(strategy, layers, ratio)
        # The legend names the strategy (it must fit a phone); the numbers are on hover.
        fig.add_scatter(x=[sim.forwards], y=[sim.peak], mode="markers",
                        marker={"size": 15, "symbol": symbol},
                        name=strategy_label(strategy, code),
                        hovertemplate=gettext(code, "{strategy}: {forwards} forwards, peak {peak}",
                                              strategy=strategy_label(strategy, code),
                                              forwards=sim.forwards,
                                              peak=format_decimal(sim.peak, code))
                        + "<extra></extra>")
    if ratio == 0:
        rec = recursive_cost(layers)
        fig.add_scatter(x=[rec.forwards], y=[rec.peak_boundaries], mode="markers",
                        marker={"size": 15, "symbol": "diamond"},
                        name=gettext(code, "Recursive (log N)"),
                        hovertemplate=gettext(
                            code, "Recursive (log N): {forwards} forwards, peak {peak}",
                            forwards=rec.forwards, peak=rec.peak_boundaries)
                        + "<extra></extra>")
    fig.update_layout(height=440, xaxis_title=gettext(code, "forward computations per step"),
                      yaxis_title=gettext(code, "peak memory (units)"),
                      legend={**LEGEND_BELOW, "orientation": "v"},
                      separators=_separators(code), **_LAYOUT)
    fig.update_xaxes(rangemode="tozero")
    fig.update_yaxes(rangemode="tozero")
    return fig


# --------------------------------------------------------------------------------------
# How many checkpoints
# --------------------------------------------------------------------------------------


MIN_VIEW_FACTOR = 3.0  # the k-curve's memory axis shows up to this × its minimum


def k_curve_figure(layers: int, boundary: float = 1.0, layer: float = 1.0,
                   code: str = DEFAULT) -> go.Figure:
    """Activation memory over k, the number of layers per segment (as in the demos'
    "every k layers" and Megatron's --recompute-num-layers): N/k checkpoints plus one
    segment of k layers rebuilt, with the minimum and √N marked."""
    ks = list(range(1, layers + 1))
    memory = [segment_memory(layers, layers / k, boundary, layer) for k in ks]
    stored = [layers / k * boundary for k in ks]
    rebuilt = [k * layer for k in ks]
    best_k = min(ks, key=lambda k: (memory[k - 1], k))
    # Two panels on one k axis: memory above, the forward computations below on an axis of their
    # own (a count, not memory: on a shared plot its line read as a memory curve).
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.72, 0.28],
                        vertical_spacing=0.06)
    fig.add_scatter(x=ks, y=memory, name=gettext(code, "total: checkpoints + one segment"),
                    mode="lines", line={"width": 3, "color": "#4C78A8"}, row=1, col=1)
    fig.add_scatter(x=ks, y=stored, name=gettext(code, "checkpoints kept (N/k)"),
                    mode="lines", line={"dash": "dot", "color": "#54A24B"}, row=1, col=1)
    fig.add_scatter(x=ks, y=rebuilt, name=gettext(code, "one segment of k layers rebuilt"),
                    mode="lines", line={"dash": "dot", "color": "#F58518"}, row=1, col=1)
    fig.add_scatter(x=[best_k], y=[memory[best_k - 1]], mode="markers",
                    marker={"size": 13, "color": "#E45756"},
                    name=gettext(code, "minimum"), row=1, col=1)
    # The label on a white box above the point, with an arrow: written beside it, it sat
    # on the dotted lines that cross there.
    fig.add_annotation(x=best_k, y=memory[best_k - 1], row=1, col=1,
                       text=gettext(code, "minimum: k = {k}", k=best_k), showarrow=True,
                       arrowhead=2, ax=80, ay=-40, bgcolor="rgba(255,255,255,0.9)",
                       bordercolor="#E45756", borderpad=3)
    if boundary == layer:
        root = math.sqrt(layers)
        fig.add_vline(x=root, line_dash="dash", line_color="#888888",
                      annotation_text=f"√N = {format_decimal(root, code, 1)}",
                      annotation_position="top right", row=1, col=1)
    else:
        fig.add_vline(x=max(1.0, optimal_segment_length(layers, boundary, layer)),
                      line_dash="dash", line_color="#E45756",
                      annotation_text="√(N·input/layer)", annotation_position="top right",
                      row=1, col=1)
    # Compute, in its own panel: every checkpointed layer runs forward twice, whatever k.
    fig.add_scatter(x=ks, y=[2 * layers] * len(ks), mode="lines",
                    name=gettext(code, "forward computations with checkpointing: 2N for any k"),
                    line={"color": "#B279A2", "dash": "dash"}, row=2, col=1)
    fig.add_scatter(x=[1, layers], y=[layers, layers], mode="lines",
                    name=gettext(code, "forward computations keeping everything: N"),
                    line={"color": "#B279A2", "dash": "dot", "width": 1}, row=2, col=1)
    fig.update_xaxes(title_text=gettext(code, "k = layers per segment"), row=2, col=1)
    # The memory axis ends at three times the minimum (at least the k = 1 value): up to
    # k = N the rebuilt segment climbs to N layers and squeezed the minimum, the point of
    # the chart, into the bottom tenth. The lines leave the panel at the top.
    top = max(memory[0], MIN_VIEW_FACTOR * memory[best_k - 1]) * 1.05
    fig.update_yaxes(title_text=gettext(code, "memory (layer inputs)"), range=[0, top],
                     automargin=True, row=1, col=1)
    fig.update_yaxes(title_text=gettext(code, "forward computations"), range=[0, 2.4 * layers],
                     automargin=True, tickvals=[0, layers, 2 * layers],
                     ticktext=["0", f"N = {layers}", f"2N = {2 * layers}"], row=2, col=1)
    fig.update_layout(height=560, legend=LEGEND_ABOVE, separators=_separators(code), **_LAYOUT)
    return fig


def budget_figure(sizes: list[float], plan: BudgetPlan, code: str = DEFAULT) -> go.Figure:
    """The layers' output sizes, segments in alternating colours, checkpoints marked."""
    segment_of = {}
    for number, (first, last) in enumerate(plan.segments(len(sizes))):
        for index in range(first, last + 1):
            segment_of[index] = number
    colors = ["#4C78A8" if segment_of.get(i, 0) % 2 == 0 else "#9ECAE9"
              for i in range(len(sizes))]
    fig = go.Figure()
    fig.add_bar(x=list(range(1, len(sizes) + 1)), y=sizes, marker_color=colors,
                name=gettext(code, "layer output size"),
                hovertemplate=gettext(code, "layer %{x}: %{y}") + "<extra></extra>")
    cps = [i + 1 for i in plan.checkpoints]
    fig.add_scatter(x=cps, y=[sizes[i - 1] + 0.4 for i in cps], mode="markers",
                    marker={"symbol": "triangle-down", "size": 12, "color": "#E45756"},
                    name=gettext(code, "checkpoint"))
    fig.update_layout(height=260, showlegend=False, bargap=0.1,
                      xaxis_title=gettext(code, "layer (▼ = kept output)"),
                      yaxis_title=gettext(code, "output size"), separators=_separators(code),
                      **_LAYOUT)
    return fig


def budget_sweep_figure(sizes: list[float], plans: list[BudgetPlan],
                        chosen: BudgetPlan, code: str = DEFAULT) -> go.Figure:
    fig = go.Figure()
    fig.add_scatter(x=[p.budget for p in plans], y=[p.memory for p in plans],
                    mode="lines+markers", name="x + y", line={"shape": "hv"})
    fig.add_scatter(x=[chosen.budget], y=[chosen.memory], mode="markers",
                    marker={"size": 14, "color": "#E45756"}, name=gettext(code, "your budget"))
    fig.update_layout(height=240, showlegend=False, xaxis_title=gettext(code, "budget B"),
                      yaxis_title=gettext(code, "memory estimate x + y"),
                      separators=_separators(code), **_LAYOUT)
    fig.update_yaxes(rangemode="tozero")
    return fig


# --------------------------------------------------------------------------------------
# A transformer layer, logits, and the cost of a step
# --------------------------------------------------------------------------------------


def layer_strategies_figure(rows: dict[str, dict[str, float]],
                            code: str = DEFAULT) -> go.Figure:
    """Stacked bars in GB: for each strategy, what it keeps (parts -> bytes); the labels
    of `rows` and of their parts are already in language `code`."""
    parts = list(dict.fromkeys(part for row in rows.values() for part in row))
    palette = ["#4C78A8", "#E45756", "#54A24B", "#B279A2", "#F58518", "#9ECAE9"]
    fig = go.Figure()
    for number, part in enumerate(parts):
        values = [rows[label].get(part, 0.0) / GB for label in rows]
        fig.add_bar(y=list(rows), x=values, name=part, orientation="h",
                    marker_color=palette[number % len(palette)],
                    hovertemplate=f"{part}: %{{x:.3f}} GB<extra></extra>")
    for label, row in rows.items():
        total = sum(row.values())
        fig.add_annotation(x=total / GB, y=label,
                           text=f"<b>{format_gb(total, locale=code)}</b>",
                           showarrow=False, xanchor="left", xshift=6)
    longest = max(sum(row.values()) for row in rows.values()) / GB
    fig.update_layout(barmode="stack", height=360, xaxis_title=_gb_axis(code),
                      yaxis={"autorange": "reversed", "automargin": True},
                      legend=LEGEND_ABOVE, separators=_separators(code), **_LAYOUT)
    fig.update_xaxes(range=[0, longest * 1.3])
    return fig


def logits_figure(batch: int, seq: int, vocab: int, bytes_per_value: int,
                  marks: dict[str, int], code: str = DEFAULT) -> go.Figure:
    """Logits, logits + their gradient, and the peak at the loss (three tensors of the
    logits' size alive at once: the log-probabilities, their gradient and the logits'
    gradient, as lesson 5 explains) in GB against vocabulary size."""
    top = max([vocab, *marks.values()]) * 1.1
    vocabs = [int(top * i / 100) for i in range(1, 101)]
    values = [logits_bytes(batch, seq, v, bytes_per_value) / GB for v in vocabs]
    fig = go.Figure()
    fig.add_scatter(x=vocabs, y=values, name=gettext(code, "logits"), mode="lines")
    fig.add_scatter(x=vocabs, y=[2 * y for y in values],
                    name=gettext(code, "logits + their gradient"), mode="lines",
                    line={"dash": "dot"})
    fig.add_scatter(x=vocabs, y=[3 * y for y in values],
                    name=gettext(code, "peak at the loss (three such tensors)"), mode="lines",
                    line={"dash": "dash"})
    peak = 3 * logits_bytes(batch, seq, vocab, bytes_per_value) / GB
    fig.add_scatter(x=[vocab], y=[peak], mode="markers+text", showlegend=False,
                    text=[f"{format_decimal(peak, code, 1)} GB"], textposition="top left",
                    marker={"size": 10, "color": "#E45756", "symbol": "diamond"})
    for label, mark in marks.items():
        fig.add_scatter(x=[mark], y=[logits_bytes(batch, seq, mark, bytes_per_value) / GB],
                        mode="markers+text", text=[label], textposition="top left",
                        marker={"size": 9, "color": "#555555"}, showlegend=False)
    fig.add_scatter(x=[vocab], y=[logits_bytes(batch, seq, vocab, bytes_per_value) / GB],
                    mode="markers", marker={"size": 14, "color": "#E45756"},
                    name=gettext(code, "yours"))
    fig.update_layout(height=340, xaxis_title=gettext(code, "vocabulary size V"), yaxis_title="GB",
                      legend=LEGEND_ABOVE, separators=_separators(code), **_LAYOUT)
    return fig


def step_cost_figure(backward_ratio: float = 2.0, code: str = DEFAULT) -> go.Figure:
    """A training step in units of one forward pass: without and with recomputation."""
    forward = gettext(code, "forward")
    recompute = gettext(code, "recompute (forward again)")
    backward = gettext(code, "backward")
    rows = {
        gettext(code, "without checkpointing"): {forward: 1.0, backward: backward_ratio},
        gettext(code, "with checkpointing"): {forward: 1.0, recompute: 1.0,
                                         backward: backward_ratio},
    }
    colors = {forward: "#4C78A8", recompute: "#F58518", backward: "#54A24B"}
    fig = go.Figure()
    for part, color in colors.items():
        fig.add_bar(y=list(rows), x=[rows[label].get(part, 0.0) for label in rows],
                    name=part, orientation="h", marker_color=color,
                    text=[format_decimal(rows[label][part], code) if part in rows[label] else ""
                          for label in rows], textposition="inside")
    fig.update_layout(barmode="stack", height=260,
                      xaxis_title=gettext(code, "time, in forward passes"),
                      yaxis={"autorange": "reversed", "automargin": True},
                      legend=LEGEND_ABOVE, separators=_separators(code), **_LAYOUT)
    return fig


def pipeline_timeline_figure(events: list[dict], lanes: dict[tuple[str, int], str],
                             kinds: dict[str, str], code: str = DEFAULT) -> go.Figure:
    """A measured pipeline step as a timeline: one lane per (schedule, rank), a bar per
    forward or backward of a micro-batch through that rank's stage (`events`: rows with
    schedule, rank, kind "F" or "B", start and end in seconds); the gaps are the bubble.
    `lanes` names each lane and `kinds` each kind in language `code`."""
    colors = {"F": "#4C78A8", "B": "#54A24B"}
    fig = go.Figure()
    for kind, name in kinds.items():
        mine = [e for e in events if e["kind"] == kind]
        fig.add_bar(y=[lanes[(e["schedule"], e["rank"])] for e in mine],
                    x=[(e["end"] - e["start"]) * 1e3 for e in mine],
                    base=[e["start"] * 1e3 for e in mine], orientation="h", name=name,
                    marker_color=colors[kind], marker_line={"color": "white", "width": 1},
                    hovertemplate=f"{name}: %{{base:.1f}}–%{{x:.1f}} ms<extra></extra>")
    fig.update_layout(barmode="overlay", height=90 + 32 * len(lanes),
                      xaxis_title=gettext(code, "time since the step began (ms)"),
                      yaxis={"autorange": "reversed", "automargin": True,
                             "categoryorder": "array", "categoryarray": list(lanes.values())},
                      legend=LEGEND_ABOVE, separators=_separators(code), **_LAYOUT)
    return fig
