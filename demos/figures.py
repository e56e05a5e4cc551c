"""Plotly figures for the live demos: pure functions of measured records, no Streamlit.

One colour per strategy everywhere (its record in demos.strategies), memory axes in MiB or
GiB, time axes in milliseconds, and titles that say what to notice. Every builder takes
result records (demos.results) or DataFrames, so the tests can feed it synthetic data.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from demos.results import StrategyResult, TimelinePoint
from demos.strategies import STRATEGIES
from demos.strategies import colour as strategy_colour
from demos.strategies import title as strategy_title
from demos.units import byte_unit, format_bytes

BREAKDOWN_PARTS: tuple[str, ...] = (
    "parameters", "gradients", "activations", "logits", "temporaries",
)
BREAKDOWN_COLOURS: dict[str, str] = {
    "parameters": "#94a3b8",
    "gradients": "#cbd5e1",
    "activations": "#2563eb",
    "logits": "#f59e0b",
    "temporaries": "#e11d48",
}
PHASE_COLOURS: dict[str, str] = {
    "forward": "rgba(37, 99, 235, 0.08)",
    "recompute": "rgba(234, 88, 12, 0.14)",
    "loss": "rgba(225, 29, 72, 0.14)",
    "backward": "rgba(22, 163, 74, 0.08)",
    "optimizer": "rgba(100, 116, 139, 0.10)",
}
PHASE_LETTER = {"forward": "F", "recompute": "R", "backward": "B", "loss": "L", "optimizer": "O"}

LAYOUT = dict(
    template="plotly_white",
    font=dict(size=13),
    margin=dict(l=60, r=20, t=100, b=50),
    legend=dict(orientation="h", yanchor="bottom", y=1.03, xanchor="left", x=0),
    hoverlabel=dict(font_size=13),
)
# Legend on the right, for figures whose legend would crowd the title.
SIDE_LEGEND_LAYOUT = {**LAYOUT, "margin": dict(l=60, r=20, t=90, b=50),
                      "legend": dict(orientation="v", yanchor="top", y=1, xanchor="left",
                                     x=1.02)}
# Figures with subplot titles: the legend goes above them.
PANELS_LAYOUT = {**LAYOUT, "margin": dict(l=60, r=20, t=130, b=60),
                 "legend": dict(orientation="h", yanchor="bottom", y=1.1, xanchor="left", x=0)}


# ---------------------------------------------------------------- units and colours


def _max(values: Iterable[float | None]) -> float:
    finite = [float(v) for v in values if v is not None and not pd.isna(v)]
    return max(finite, default=0.0)


def _label(record: StrategyResult) -> str:
    return str(record.label or record.strategy)


def _empty(title: str, message: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font=dict(size=15))
    fig.update_layout(title=title, xaxis_visible=False, yaxis_visible=False, **LAYOUT)
    return fig


def _fitting(results: Sequence[StrategyResult]) -> list[StrategyResult]:
    return [r for r in results if r.fits and r.peak_bytes is not None]


# ---------------------------------------------------------------- compare


def _saving_phrase(results: Sequence[StrategyResult]) -> str | None:
    """'every-layer: 63% less peak memory for 1.25x the time' against none, or None."""
    by_name = {r.strategy: r for r in results}
    base = by_name.get("none")
    others = [r for r in results if r.strategy != "none"]
    if base is None or not others or not base.peak_bytes:
        return None
    best = min(others, key=lambda r: r.peak_bytes or 0)
    saved = 1 - (best.peak_bytes or 0) / base.peak_bytes
    phrase = f"{_label(best)} has {saved:.0%} less peak memory than none"
    if best.step_seconds and base.step_seconds:
        ratio = best.step_seconds / base.step_seconds
        phrase += f" for {ratio:.2f}× the step time"
    return phrase


def peak_and_time_figure(results: Sequence[StrategyResult]) -> go.Figure:
    """Two panels, one bar per strategy: peak memory above the parameters, and step time."""
    fitted = _fitting(results)
    title = "Peak memory and step time per strategy"
    if not fitted:
        return _empty(title, "No strategy fitted in memory")
    unit, scale = byte_unit(_max(r.peak_bytes for r in fitted))
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=(f"Peak memory ({unit})<br><sup>above the "
                                        "parameters</sup>", "Step time (ms)"))
    labels = [_label(r) for r in fitted]
    colours = [strategy_colour(r.strategy) for r in fitted]
    peaks = [(r.peak_bytes or 0) / scale for r in fitted]
    times = [(r.step_seconds or float("nan")) * 1000 for r in fitted]
    fig.add_bar(x=labels, y=peaks, marker_color=colours, row=1, col=1, showlegend=False,
                text=[f"{p:.1f}" for p in peaks], textposition="outside",
                hovertemplate="%{x}<br>peak %{y:.1f} " + unit + "<extra></extra>")
    fig.add_bar(x=labels, y=times, marker_color=colours, row=1, col=2, showlegend=False,
                text=[f"{t:.0f}" for t in times], textposition="outside",
                hovertemplate="%{x}<br>%{y:.0f} ms per step<extra></extra>")
    fig.update_yaxes(title_text=unit, row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text="ms", row=1, col=2, rangemode="tozero")
    phrase = _saving_phrase(fitted)
    full = f"{title}<br><sup>{phrase}</sup>" if phrase else title
    fig.update_layout(title=full, height=440, **PANELS_LAYOUT)
    return fig


def breakdown_figure(results: Sequence[StrategyResult]) -> go.Figure:
    """Stacked bars of where the peak's bytes go, per strategy."""
    fitted = [r for r in _fitting(results) if r.breakdown]
    title = "What the memory holds at the peak"
    if not fitted:
        return _empty(title, "No breakdown measured")
    totals = [sum(r.breakdown.get(p, 0) or 0 for p in BREAKDOWN_PARTS) for r in fitted]
    unit, scale = byte_unit(max(totals))
    labels = [_label(r) for r in fitted]
    fig = go.Figure()
    for part in BREAKDOWN_PARTS:
        values = [(r.breakdown.get(part, 0) or 0) / scale for r in fitted]
        fig.add_bar(name=part, x=labels, y=values, marker_color=BREAKDOWN_COLOURS[part],
                    hovertemplate="%{x}<br>" + part + ": %{y:.1f} " + unit + "<extra></extra>")
    fig.update_layout(
        barmode="stack", height=440, legend_traceorder="reversed",
        title=f"{title}<br><sup>Checkpointing shrinks the activations (blue);<br>parameters, "
              "gradients and logits stay</sup>",
        yaxis_title=unit, **SIDE_LEGEND_LAYOUT,
    )
    return fig


def activation_theory_figure(results: Sequence[StrategyResult],
                             korthikanti_bytes: float | None = None) -> go.Figure:
    """Measured bytes held for backward beside this model's prediction (and, for the
    no-checkpointing case, the Korthikanti et al. estimate)."""
    fitted = [r for r in _fitting(results) if r.activation_bytes is not None]
    title = "Activations held for backward: measured vs predicted"
    if not fitted:
        return _empty(title, "Nothing measured")
    labels = [_label(r) for r in fitted]
    measured = [r.activation_bytes or 0 for r in fitted]
    predicted = [r.predicted_activation_bytes for r in fitted]
    unit, scale = byte_unit(_max([*measured, *predicted, korthikanti_bytes or 0]))
    fig = go.Figure()
    fig.add_bar(name="measured", x=labels, y=[m / scale for m in measured],
                marker_color=[strategy_colour(r.strategy) for r in fitted],
                hovertemplate="%{x}<br>measured %{y:.2f} " + unit + "<extra></extra>")
    fig.add_bar(name="this model's prediction", x=labels,
                y=[(p / scale) if p is not None else None for p in predicted],
                marker_color="rgba(15, 23, 42, 0.25)", marker_line_color="#0f172a",
                marker_line_width=1,
                hovertemplate="%{x}<br>predicted %{y:.2f} " + unit + "<extra></extra>")
    if korthikanti_bytes:  # a legend entry, not a label over the bars
        fig.add_scatter(x=labels, y=[korthikanti_bytes / scale] * len(labels), mode="lines",
                        name="Korthikanti et al. (16-bit),<br>no checkpointing",
                        line=dict(color="#b45309", dash="dot", width=2),
                        hovertemplate="Korthikanti et al. 34·s·b·h per layer (16-bit): "
                                      "%{y:.2f} " + unit + "<extra></extra>")
    gaps = [abs(m - p) / p for m, p in zip(measured, predicted, strict=True) if p]
    if not gaps:
        sub = "Prediction unavailable"
    elif max(gaps) == 0:
        sub = "Prediction and measurement agree to the byte"
    else:
        sub = f"Prediction and measurement agree within {max(gaps):.2%}"
    fig.update_layout(barmode="group", height=440, yaxis_title=unit,
                      title=f"{title}<br><sup>{sub}</sup>", **SIDE_LEGEND_LAYOUT)
    return fig


# ---------------------------------------------------------------- timeline


TIMELINE_COLUMNS = ("strategy", "label", "index", "op", "phase", "layer", "live_bytes")


def timeline_frame(timelines: Mapping[str, Sequence[TimelinePoint]]) -> pd.DataFrame:
    """{strategy: [TimelinePoint, ...]} -> one long DataFrame (TIMELINE_COLUMNS); `strategy`
    is the canonical text (every-k:2), `label` its display title (every-2)."""
    rows = [
        {"strategy": strategy, "label": strategy_title(strategy), "index": p.index, "op": p.op,
         "phase": p.phase, "layer": p.layer, "live_bytes": p.live_bytes}
        for strategy, points in timelines.items()
        for p in points
    ]
    return pd.DataFrame(rows, columns=list(TIMELINE_COLUMNS))


def _segments(frame: pd.DataFrame) -> list[tuple[str, int | None, int, int]]:
    """Runs of consecutive points with the same (phase, layer): (phase, layer, first, last)."""
    segments: list[tuple[str, int | None, int, int]] = []
    for phase, layer, index in zip(frame["phase"], frame["layer"], frame["index"], strict=True):
        layer_key = None if pd.isna(layer) else int(layer)
        if segments and segments[-1][0] == phase and segments[-1][1] == layer_key:
            segments[-1] = (phase, layer_key, segments[-1][2], int(index))
        else:
            segments.append((phase, layer_key, int(index), int(index)))
    return segments


def timeline_figure(frame: pd.DataFrame, facet: bool = True) -> go.Figure:
    """Live bytes after every op of one training step, one line per strategy.

    Faceted: one row per strategy, with the phases shaded (forward, loss, recompute,
    backward) and each layer's segment labelled (F3 = layer 3 forward, R3 = its
    recomputation, B3 = its backward). Overlaid: all lines on one axis."""
    title = "Memory during one training step"
    if frame.empty:
        return _empty(title, "No timeline recorded")
    names = list(dict.fromkeys(frame["strategy"]))
    labels = [strategy_title(name) for name in names]
    unit, scale = byte_unit(_max(frame["live_bytes"]))
    rows = len(labels) if facet else 1
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=False, vertical_spacing=0.06,
                        subplot_titles=labels if facet else None)
    for number, (name, label) in enumerate(zip(names, labels, strict=True), start=1):
        part = frame[frame["strategy"] == name].sort_values("index")
        row = number if facet else 1
        layer_text = part["layer"].map(lambda v: "–" if pd.isna(v) else str(int(v)))
        fig.add_scatter(
            x=part["index"], y=part["live_bytes"] / scale, mode="lines", name=label,
            line=dict(color=strategy_colour(name), width=2), row=row, col=1,
            customdata=list(zip(part["op"], part["phase"], layer_text, strict=True)),
            hovertemplate=(label + "<br>op %{x}: %{customdata[0]}<br>%{customdata[1]}, "
                           "layer %{customdata[2]}<br>%{y:.1f} " + unit + "<extra></extra>"),
            showlegend=not facet,
        )
        if facet:
            _mark_phases(fig, part, row, _max(frame["live_bytes"]) / scale)
        peak = part.loc[part["live_bytes"].idxmax()]
        fig.add_scatter(x=[peak["index"]], y=[peak["live_bytes"] / scale], mode="markers",
                        marker=dict(color=strategy_colour(name), size=10, symbol="star",
                                    line=dict(color="#0f172a", width=1)),
                        name=f"{label} peak", showlegend=False, row=row, col=1,
                        hovertemplate=(f"{label} peak<br>{peak['op']} ({peak['phase']})"
                                       "<br>%{y:.1f} " + unit + "<extra></extra>"))
        fig.update_yaxes(title_text=unit, row=row, col=1)
    # One y range for every panel, so the strategies compare at a glance.
    fig.update_yaxes(range=[0, _max(frame["live_bytes"]) / scale * 1.18])
    fig.update_xaxes(title_text="op number within the step", row=rows, col=1)
    fig.update_layout(
        height=max(420, 260 * rows) if facet else 480,
        title=(f"{title}<br><sup>Forward climbs, the loss spikes (logits), backward falls; "
               "with checkpointing each layer is recomputed "
               + ("(orange bands) " if facet else "")
               + "just before its backward: the sawtooth"
               + ("" if facet else " (the faceted layout marks each phase and layer)")
               + "</sup>"),
        **LAYOUT,
    )
    return fig


def _mark_phases(fig: go.Figure, part: pd.DataFrame, row: int, top: float) -> None:
    """Shade each (phase, layer) run of ops up to `top` and label it (F3, R3, B3, L)."""
    xref = "x" if row == 1 else f"x{row}"
    yref = "y" if row == 1 else f"y{row}"
    for phase, layer, first, last in _segments(part):
        fig.add_shape(type="rect", x0=first - 0.5, x1=last + 0.5, y0=0, y1=top * 1.08,
                      xref=xref, yref=yref, fillcolor=PHASE_COLOURS.get(phase, "rgba(0,0,0,0)"),
                      line_width=0, layer="below")
        if layer is not None or phase == "loss":
            text = PHASE_LETTER.get(phase, "?") + ("" if layer is None else str(layer))
            fig.add_annotation(x=(first + last) / 2, y=top * 1.08, text=text, showarrow=False,
                               xref=xref, yref=yref, font=dict(size=9, color="#334155"),
                               yanchor="bottom")


# ---------------------------------------------------------------- curves


def _fitting_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows that ran (a `fits` column, when present, is True)."""
    if "fits" not in frame:
        return frame.copy()
    return frame[frame["fits"].fillna(False).astype(bool)].copy()


def sweep_figure(frame: pd.DataFrame, x: str, x_title: str, *,
                 memory: str = "activation_bytes", theory: str | None = None,
                 memory_title: str = "Activations held for backward",
                 title: str = "", log_x: bool = False,
                 reference: tuple[str, float] | None = None) -> go.Figure:
    """Memory (left) and step time (right) against `x`, one colour per strategy.

    `reference` (label, bytes) draws a constant on the memory panel, e.g. one layer's
    internals: what checkpointing every layer rebuilds at a time.

    Measured points are dots (joined by lines when there is no theory); `theory` (predicted
    bytes) is drawn as a dashed line of the same colour on the same axes."""
    if frame.empty:
        return _empty(title or "Sweep", "No measurements")
    data = _fitting_rows(frame)
    if data.empty:
        return _empty(title or "Sweep", "No strategy fitted in memory")
    columns = [memory] + ([theory] if theory and theory in data else [])
    unit, scale = byte_unit(_max(pd.concat([data[c] for c in columns])))
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=(f"{memory_title} ({unit})", "Step time (ms)"))
    if reference is not None:
        name, value = reference
        xs = sorted(data[x].unique())
        fig.add_scatter(x=xs, y=[value / scale] * len(xs), mode="lines", name=name,
                        line=dict(color="#94a3b8", width=2, dash="dot"), row=1, col=1,
                        hovertemplate=name + ": %{y:.2f} " + unit + "<extra></extra>")
    for label in dict.fromkeys(data["strategy"]):
        part = data[data["strategy"] == label].sort_values(x)
        colour = strategy_colour(label)
        has_theory = bool(theory and theory in part and part[theory].notna().any())
        fig.add_scatter(x=part[x], y=part[memory] / scale,
                        mode="markers" if has_theory else "lines+markers", name=label,
                        legendgroup=label, line=dict(color=colour, width=2),
                        marker=dict(size=9, color=colour), row=1, col=1,
                        hovertemplate=(f"{label}<br>{x_title} %{{x}}<br>measured %{{y:.2f}} "
                                       f"{unit}<extra></extra>"))
        if has_theory:
            fig.add_scatter(x=part[x], y=part[theory] / scale, mode="lines",
                            name=f"{label} (theory)", legendgroup=label, showlegend=False,
                            line=dict(color=colour, width=1.5, dash="dash"), row=1, col=1,
                            hovertemplate=(f"{label} theory<br>{x_title} %{{x}}<br>%{{y:.2f}} "
                                           f"{unit}<extra></extra>"))
        if "step_seconds" in part:
            fig.add_scatter(x=part[x], y=part["step_seconds"] * 1000, mode="lines+markers",
                            name=label, legendgroup=label, showlegend=False,
                            line=dict(color=colour, width=2), marker=dict(size=8), row=1, col=2,
                            hovertemplate=(f"{label}<br>{x_title} %{{x}}<br>%{{y:.0f}} ms"
                                           "<extra></extra>"))
    fig.update_xaxes(title_text=x_title, type="log" if log_x else None)
    fig.update_yaxes(title_text=unit, rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=2)
    if theory:
        fig.add_annotation(text="dots: measured · dashed lines: theory", xref="paper",
                           yref="paper", x=1, y=1.1, xanchor="right", yanchor="bottom",
                           showarrow=False, font=dict(size=12, color="#475569"))
    fig.update_layout(title=title, height=470, **PANELS_LAYOUT)
    return fig


def segment_figure(frame: pd.DataFrame, layers: int, *, x: str = "k") -> go.Figure:
    """The trade-off of segment size k at a fixed depth. Left: the bytes kept at the end of
    forward (one boundary per segment: fall with k) and the peak (boundaries plus one
    segment rebuilt in backward: rises with k), measured dots on dashed theory, with the
    measured optimum and sqrt(N) marked. Right: step time."""
    data = _fitting_rows(frame).sort_values(x)
    title = f"Segment size k at {layers} layers"
    if data.empty:
        return _empty(title, "No measurements")
    colour = STRATEGIES["every-k"].colour
    best = data.loc[data["peak_bytes"].idxmin()]
    best_k, root = int(best[x]), math.sqrt(layers)
    columns = [c for c in ("peak_bytes", "predicted_peak_bytes", "activation_bytes",
                           "predicted_activation_bytes") if c in data]
    unit, scale = byte_unit(_max(pd.concat([data[c] for c in columns])))
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=(f"Memory ({unit})", "Step time (ms)"))
    series = (("peak_bytes", "predicted_peak_bytes", "peak (boundaries + one segment rebuilt)",
               "circle", "dash"),
              ("activation_bytes", "predicted_activation_bytes",
               "kept at the end of forward (boundaries)", "diamond-open", "dot"))
    for measured, theory, name, symbol, dash in series:
        if measured not in data:
            continue
        fig.add_scatter(x=data[x], y=data[measured] / scale, mode="markers", name=name,
                        marker=dict(symbol=symbol, size=10, color=colour,
                                    line=dict(color=colour, width=2)), row=1, col=1,
                        hovertemplate="k=%{x}<br>" + name + ": %{y:.2f} " + unit
                                      + "<extra></extra>")
        if theory in data and data[theory].notna().any():
            fig.add_scatter(x=data[x], y=data[theory] / scale, mode="lines",
                            name=f"{name}, theory", showlegend=False,
                            line=dict(color=colour, width=1.5, dash=dash), row=1, col=1,
                            hovertemplate="k=%{x}<br>theory: %{y:.2f} " + unit
                                          + "<extra></extra>")
    if "step_seconds" in data:
        fig.add_scatter(x=data[x], y=data["step_seconds"] * 1000, mode="lines+markers",
                        name="step time", showlegend=False, line=dict(color=colour, width=2),
                        marker=dict(size=9), row=1, col=2,
                        hovertemplate="k=%{x}<br>%{y:.0f} ms<extra></extra>")
    fig.add_vline(x=root, line_dash="dot", line_color="#475569", row=1, col=1,
                  annotation_text=f"√N = {root:.1f}", annotation_position="top right")
    fig.add_scatter(x=[best_k], y=[best["peak_bytes"] / scale], mode="markers+text",
                    marker=dict(symbol="star", size=18, color="#facc15",
                                line=dict(color="#0f172a", width=1)),
                    text=[f"lowest peak: k={best_k}"], textposition="top right",
                    name="measured optimum", showlegend=False, row=1, col=1)
    fig.update_xaxes(title_text="layers per segment k")
    fig.update_yaxes(title_text=unit, rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=2)
    ks = list(data[x])
    if best_k == min(ks):
        verdict = (f"the lowest peak is at k={best_k}: checkpointing every layer beats "
                   f"√N={root:.1f} segments here")
    elif best_k == max(ks):
        verdict = f"the lowest peak is at k={best_k}, one segment for the whole model"
    else:
        verdict = f"U-shaped: the lowest peak is at k={best_k} (√N={root:.1f})"
    fig.update_layout(
        title=(f"{title}: {verdict}<br><sup>Fewer, longer segments keep fewer boundaries "
               "but rebuild more at once in backward</sup>"),
        height=470, **PANELS_LAYOUT)
    fig.add_annotation(text="dots: measured · dashed/dotted lines: theory", xref="paper",
                       yref="paper", x=1, y=1.1, xanchor="right", yanchor="bottom",
                       showarrow=False, font=dict(size=12, color="#475569"))
    return fig


# ---------------------------------------------------------------- what fits


def fits_figure(frame: pd.DataFrame, vary: str, budget_bytes: int) -> go.Figure:
    """Largest batch (or sequence length) that fits a budget per strategy: predicted and
    confirmed, with the tokens per second each reaches."""
    name = "batch" if vary == "batch" else "sequence length"
    title = f"Largest {name} within {format_bytes(budget_bytes)}"
    if frame.empty:
        return _empty(title, "Nothing measured")
    labels = list(frame["strategy"])
    colours = [strategy_colour(label) for label in labels]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=(f"Largest {name}", "Tokens per second"))
    fig.add_bar(x=labels, y=frame["value_predicted"], name="predicted", row=1, col=1,
                marker_color="rgba(15, 23, 42, 0.2)", marker_line_color="#0f172a",
                marker_line_width=1)
    fig.add_bar(x=labels, y=frame["value_confirmed"], name="confirmed by a real run",
                marker_color=colours, row=1, col=1,
                text=[f"{v:,.0f}" if pd.notna(v) else "does not fit"
                      for v in frame["value_confirmed"]], textposition="outside")
    fig.add_bar(x=labels, y=frame["tokens_per_second"], marker_color=colours, row=1, col=2,
                showlegend=False, text=[f"{v:,.0f}" if pd.notna(v) else ""
                                        for v in frame["tokens_per_second"]],
                textposition="outside")
    fig.update_yaxes(title_text=name, rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="tokens / s", rangemode="tozero", row=1, col=2)
    confirmed = dict(zip(labels, frame["value_confirmed"], strict=True))
    sub = "Checkpointing turns freed memory into a larger " + name
    if all(pd.notna(confirmed.get(k)) and confirmed.get(k) for k in ("none", "every-layer")):
        sub += (f": {confirmed['every-layer'] / confirmed['none']:.1f}× with every-layer "
                "than without")
    fig.update_layout(barmode="group", height=450, title=f"{title}<br><sup>{sub}</sup>",
                      **PANELS_LAYOUT)
    return fig


# ---------------------------------------------------------------- same result


def loss_figure(frame: pd.DataFrame, max_diff: float | None = None) -> go.Figure:
    """Training-loss curves per run, drawn over each other: they should coincide."""
    title = "Training loss, with and without checkpointing"
    if frame.empty:
        return _empty(title, "No training run")
    fig = go.Figure()
    labels = list(dict.fromkeys(frame["strategy"]))
    dashes = ("solid", "dash", "dot", "dashdot", "longdash")
    for number, label in enumerate(labels):
        part = frame[frame["strategy"] == label].sort_values("step")
        fig.add_scatter(x=part["step"], y=part["loss"], mode="lines", name=label,
                        line=dict(color=strategy_colour(label), width=3 if number == 0 else 2,
                                  dash=dashes[number % len(dashes)]),
                        hovertemplate=label + "<br>step %{x}<br>loss %{y:.6f}<extra></extra>")
    sub = "The curves lie on top of each other"
    if max_diff is not None:
        sub += (": identical to the last bit" if max_diff == 0
                else f": largest difference {max_diff:.2e}")
    fig.update_layout(title=f"{title}<br><sup>{sub}</sup>", xaxis_title="training step",
                      yaxis_title="cross-entropy loss", height=440, **LAYOUT)
    return fig
