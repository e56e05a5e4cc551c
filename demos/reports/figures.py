"""Plotly figures for the live demos: pure functions of measured records, no Streamlit.

One colour per strategy everywhere (its record in memory.strategies), memory axes in MiB or
GiB, time axes in milliseconds. Every builder takes result records (demos.engine.results) or
DataFrames, so the tests can feed it synthetic data, and `lang` (a language code): titles,
axes, legends and hover texts come from the catalog in that language.

Built for a phone as well as a laptop: a short one-line title (what to notice is said in
the caption under the chart, see demos.reports.report and the *_caption functions here), panels
stacked one above the other rather than side by side, and the legend under the plot. Each
figure has a bounded number of traces, whatever the model's depth: the timeline draws its
phase bands as one filled trace per phase, not one shape per layer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from babel.numbers import get_decimal_symbol, get_group_symbol
from plotly.subplots import make_subplots

from demos.engine.results import StrategyResult, TimelinePoint
from demos.reports.report import babel, op_name, time_spread
from demos.reports.report import label as result_label
from i18n import N_, format_number, gettext, pgettext
from i18n.units import byte_unit, format_bytes
from memory.strategies import STRATEGIES
from memory.strategies import colour as strategy_colour
from memory.strategies import title as strategy_title

BREAKDOWN_PARTS: tuple[str, ...] = (
    "parameters", "gradients", "activations", "logits", "temporaries",
)
BREAKDOWN_NAMES: dict[str, str] = {
    "parameters": N_("parameters"),
    "gradients": N_("gradients"),
    "activations": N_("activations"),
    "logits": N_("logits (loss)"),
    "temporaries": N_("backward temporaries"),
}
BREAKDOWN_COLOURS: dict[str, str] = {
    "parameters": "#94a3b8",
    "gradients": "#cbd5e1",
    "activations": "#2563eb",
    "logits": "#f59e0b",
    "temporaries": "#e11d48",
}
PHASE_COLOURS: dict[str, str] = {
    "forward": "rgba(37, 99, 235, 0.08)",
    "recompute": "rgba(234, 88, 12, 0.16)",
    "loss": "rgba(225, 29, 72, 0.14)",
    "backward": "rgba(22, 163, 74, 0.08)",
    "optimizer": "rgba(100, 116, 139, 0.10)",
}
PHASE_NAMES: dict[str, str] = {
    "forward": N_("forward"), "recompute": N_("recomputation"), "loss": N_("loss"),
    "backward": N_("backward"), "optimizer": N_("optimizer"),
}
PHASE_LETTER = {"forward": "F", "recompute": "R", "backward": "B", "loss": "L", "optimizer": "O"}
# Band labels per timeline row, at least 1/16 of the row apart: about 16 px on a phone's
# 260 px panel, room for "B12" at 9 px; the hover names every op's layer.
MAX_SEGMENT_LABELS = 16

LAYOUT = dict(
    template="plotly_white",
    font=dict(size=13),
    # the title under Plotly's tool bar (top right), which a narrow screen would put on it
    title=dict(x=0, xanchor="left", y=1, yref="container", yanchor="top", pad=dict(t=34),
               font=dict(size=16)),
    margin=dict(l=56, r=16, t=96, b=40),
    # at the foot of the figure (container coordinates): Plotly widens the bottom margin
    # for it, so it never sits on the x-axis title, however many lines it wraps to
    legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, xanchor="left",
                x=0),
    hoverlabel=dict(font_size=13),
)


# ---------------------------------------------------------------- units and colours


def _max(values: Iterable[float | None]) -> float:
    if isinstance(values, pd.Series):  # a column: vectorised
        top = pd.to_numeric(values, errors="coerce").max()
        return 0.0 if pd.isna(top) else float(top)
    finite = [float(v) for v in values if v is not None and not pd.isna(v)]
    return max(finite, default=0.0)


def separators(lang: str) -> str:
    """Plotly's decimal and thousands separators for a language (",." in German), so the
    axes and hover numbers read as the language writes them."""
    loc = babel(lang)
    return get_decimal_symbol(loc) + get_group_symbol(loc)


def _layout(fig: go.Figure, title: str, height: int, lang: str = "en", **extra: object
            ) -> go.Figure:
    fig.update_layout(**LAYOUT, height=height, separators=separators(lang), **extra)
    fig.update_layout(title_text=title)
    return fig


def _empty(title: str, message: str, lang: str = "en") -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font=dict(size=15))
    fig.update_layout(xaxis_visible=False, yaxis_visible=False)
    return _layout(fig, title, 300, lang)


def _fitting(results: Sequence[StrategyResult]) -> list[StrategyResult]:
    return [r for r in results if r.fits and r.peak_bytes is not None]


def _stacked(titles: tuple[str, str], spacing: float = 0.2) -> go.Figure:
    """Two panels, one above the other: readable at 390 px as at 1400."""
    # one shared x axis: its tick labels only under the lower panel, so the upper panel's
    # (rotated strategy names on a phone) never run into the lower panel's title
    return make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=spacing,
                         subplot_titles=titles)


# ---------------------------------------------------------------- compare


def peak_and_time_figure(results: Sequence[StrategyResult], lang: str = "en") -> go.Figure:
    """Two panels, one bar per strategy: peak memory above the parameters, and the median
    step time with the middle half of the timed runs as an error bar."""
    fitted = _fitting(results)
    title = gettext(lang, "Peak memory and step time")
    if not fitted:
        return _empty(title, gettext(lang, "No strategy fitted in memory"), lang)
    unit, scale = byte_unit(_max(r.peak_bytes for r in fitted))
    fig = _stacked((gettext(lang, "Peak memory above the parameters ({unit})", unit=unit),
                    gettext(lang, "Step time (ms), median and middle half of the runs")))
    labels = [result_label(r, lang) for r in fitted]
    colours = [strategy_colour(r.strategy) for r in fitted]
    peaks = [(r.peak_bytes or 0) / scale for r in fitted]
    loc = babel(lang)
    fig.add_bar(x=labels, y=peaks, marker_color=colours, row=1, col=1, showlegend=False,
                text=[format_bytes(r.peak_bytes, locale=loc) for r in fitted],
                textposition="outside", cliponaxis=False,
                hovertemplate="%{x}<br>%{text}<extra></extra>")
    spreads = [time_spread(r) for r in fitted]
    medians = [s.median * 1000 if s else math.nan for s in spreads]
    fig.add_bar(x=labels, y=medians, marker_color=colours, row=2, col=1, showlegend=False,
                error_y=dict(type="data", symmetric=False, color="#0f172a", thickness=1.5,
                             array=[(s.high - s.median) * 1000 if s else 0 for s in spreads],
                             arrayminus=[(s.median - s.low) * 1000 if s else 0
                                         for s in spreads]),
                hovertemplate="%{x}<br>%{y:.0f} ms<extra></extra>")
    fig.update_yaxes(title_text=unit, row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text="ms", row=2, col=1, rangemode="tozero")
    return _layout(fig, title, 560, lang)


def breakdown_figure(results: Sequence[StrategyResult], lang: str = "en") -> go.Figure:
    """Stacked bars of where the peak's bytes go, per strategy."""
    fitted = [r for r in _fitting(results) if r.breakdown]
    title = gettext(lang, "What memory holds at the peak")
    if not fitted:
        return _empty(title, gettext(lang, "No breakdown measured"), lang)
    totals = [sum(r.breakdown.get(p, 0) or 0 for p in BREAKDOWN_PARTS) for r in fitted]
    unit, scale = byte_unit(max(totals))
    labels = [result_label(r, lang) for r in fitted]
    fig = go.Figure()
    for part in BREAKDOWN_PARTS:
        values = [(r.breakdown.get(part, 0) or 0) / scale for r in fitted]
        name = gettext(lang, BREAKDOWN_NAMES[part])
        fig.add_bar(name=name, x=labels, y=values, marker_color=BREAKDOWN_COLOURS[part],
                    hovertemplate="%{x}<br>" + name + ": %{y:.1f} " + unit + "<extra></extra>")
    fig.update_layout(barmode="stack", yaxis_title=unit, legend_traceorder="normal")
    return _layout(fig, title, 480, lang)


def breakdown_caption(results: Sequence[StrategyResult], lang: str = "en") -> str:
    """What the stacked bars show, read from them: which parts differ between the
    strategies at their peaks and which are the same."""
    fitted = [r for r in _fitting(results) if r.breakdown]
    if len(fitted) < 2:
        return ""
    same, differ = [], []
    for part in BREAKDOWN_PARTS:
        values = [int(r.breakdown.get(part, 0) or 0) for r in fitted]
        if max(values) == 0:
            continue
        (same if max(values) - min(values) <= 0.02 * max(values) else differ).append(
            gettext(lang, BREAKDOWN_NAMES[part]))
    text = gettext(lang, "Each bar is one strategy's memory at its own peak.")
    if differ:
        text += " " + gettext(lang, "Different between the strategies: {parts}.",
                              parts=", ".join(differ))
    if same:
        text += " " + gettext(lang, "The same for all: {parts}.", parts=", ".join(same))
    return text


def activation_theory_figure(results: Sequence[StrategyResult],
                             korthikanti_bytes: float | None = None, lang: str = "en"
                             ) -> go.Figure:
    """Measured bytes held for backward beside this model's prediction (and, for the
    no-checkpointing case, the Korthikanti et al. estimate)."""
    fitted = [r for r in _fitting(results) if r.activation_bytes is not None]
    title = gettext(lang, "Activations held: measured vs predicted")
    if not fitted:
        return _empty(title, gettext(lang, "Nothing measured"), lang)
    labels = [result_label(r, lang) for r in fitted]
    measured = [r.activation_bytes or 0 for r in fitted]
    predicted = [r.predicted_activation_bytes for r in fitted]
    unit, scale = byte_unit(_max([*measured, *predicted, korthikanti_bytes or 0]))
    fig = go.Figure()
    name_measured = pgettext(lang, "chart legend", "measured")
    name_predicted = pgettext(lang, "chart legend", "this model's prediction")
    fig.add_bar(name=name_measured, x=labels, y=[m / scale for m in measured],
                marker_color=[strategy_colour(r.strategy) for r in fitted],
                hovertemplate="%{x}<br>" + name_measured + " %{y:.2f} " + unit
                              + "<extra></extra>")
    fig.add_bar(name=name_predicted, x=labels,
                y=[(p / scale) if p is not None else None for p in predicted],
                marker_color="rgba(15, 23, 42, 0.25)", marker_line_color="#0f172a",
                marker_line_width=1,
                hovertemplate="%{x}<br>" + name_predicted + " %{y:.2f} " + unit
                              + "<extra></extra>")
    if korthikanti_bytes:  # a legend entry, not a label over the bars
        name = gettext(lang, "Korthikanti et al. (16-bit), no checkpointing")
        fig.add_scatter(x=labels, y=[korthikanti_bytes / scale] * len(labels), mode="lines",
                        name=name, line=dict(color="#b45309", dash="dot", width=2),
                        hovertemplate=name + ": %{y:.2f} " + unit + "<extra></extra>")
    fig.update_layout(barmode="group", yaxis_title=unit)
    return _layout(fig, title, 480, lang)


def activation_caption(results: Sequence[StrategyResult], lang: str = "en") -> str:
    """How close prediction and measurement are, from the bars."""
    fitted = [r for r in _fitting(results) if r.activation_bytes is not None]
    gaps = [abs((r.activation_bytes or 0) - r.predicted_activation_bytes)
            / r.predicted_activation_bytes for r in fitted if r.predicted_activation_bytes]
    if not gaps:
        return ""
    if max(gaps) == 0:
        return gettext(lang, "Prediction and measurement agree to the byte.")
    return gettext(lang, "Prediction and measurement agree within {gap:.2%}.", gap=max(gaps))


# ---------------------------------------------------------------- timeline


TIMELINE_COLUMNS = ("strategy", "label", "index", "op", "phase", "layer", "live_bytes")


def timeline_frame(timelines: Mapping[str, Sequence[TimelinePoint]], lang: str = "en"
                   ) -> pd.DataFrame:
    """{strategy: [TimelinePoint, ...]} -> one long DataFrame (TIMELINE_COLUMNS); `strategy`
    is the canonical text (every-k:2), `label` its display title (every-2)."""
    rows = [
        {"strategy": strategy, "label": strategy_title(strategy, lang), "index": p.index,
         "op": p.op, "phase": p.phase, "layer": p.layer, "live_bytes": p.live_bytes}
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


def timeline_peak(part: pd.DataFrame) -> pd.Series:
    """The row of a strategy's timeline where live bytes are highest (the first such)."""
    return part.loc[part["live_bytes"].idxmax()]


def segment_label(phase: str, layer: int | None) -> str:
    """F3 = layer 3 forward, R3 its recomputation, B3 its backward, L the loss."""
    return PHASE_LETTER.get(phase, "?") + ("" if layer is None else str(layer))


def timeline_figure(frame: pd.DataFrame, facet: bool = True, lang: str = "en") -> go.Figure:
    """Live bytes after every op of one training step, one line per strategy.

    Faceted: one row per strategy, with the phases shaded (forward, loss, recompute,
    backward), each layer's run of ops labelled (F3, R3, B3, L) and the peak marked with
    the op there. Overlaid: all lines on one axis, each peak marked. At most about eight
    traces per strategy, whatever the depth."""
    title = gettext(lang, "Memory during one training step")
    if frame.empty:
        return _empty(title, gettext(lang, "No timeline recorded"), lang)
    names = list(dict.fromkeys(frame["strategy"]))
    labels = [strategy_title(name, lang) for name in names]
    unit, scale = byte_unit(_max(frame["live_bytes"]))
    top = _max(frame["live_bytes"]) / scale
    rows = len(labels) if facet else 1
    height = 250 * rows + 160 if facet else 480
    # about 90 px between panels: the x tick labels above, then the next panel's title
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=False,
                        vertical_spacing=min(0.3, 90 / max(height - 136, 1)) if rows > 1 else 0,
                        subplot_titles=labels if facet else None)
    layer_word = gettext(lang, "layer")
    phase_words = {p: gettext(lang, PHASE_NAMES.get(p, p)) for p in frame["phase"].unique()}
    peak_word = pgettext(lang, "chart legend", "peak")
    traces: list[tuple[go.Scatter, int]] = []  # added at once: one validation pass
    in_legend: set[str] = set()  # each phase's band once in the legend
    for number, (name, label) in enumerate(zip(names, labels, strict=True), start=1):
        part = frame[frame["strategy"] == name].sort_values("index")
        row = number if facet else 1
        colour = strategy_colour(name)
        line = _changes(part)
        if facet:
            traces += [(band, row) for band in _phase_bands(part, top, lang, in_legend)]
        # vectorised (one look-up per distinct value), and one array rather than a list of
        # tuples, which Plotly would validate item by item
        layer_text = line["layer"].astype("Int64").astype(str).replace("<NA>", "–")
        phase_text = line["phase"].map(phase_words)
        traces.append((go.Scatter(
            x=line["index"].to_numpy(), y=line["live_bytes"].to_numpy() / scale, mode="lines",
            name=label, line=dict(color=colour, width=2),
            customdata=np.column_stack([line["op"].str.removesuffix(".default").to_numpy(str),
                                        phase_text.to_numpy(dtype=str),
                                        layer_text.to_numpy(dtype=str)]),
            hovertemplate=(label + "<br>op %{x}: %{customdata[0]}<br>%{customdata[1]}, "
                           + layer_word + " %{customdata[2]}<br>%{y:.1f} " + unit
                           + "<extra></extra>"),
            showlegend=not facet), row))
        peak = timeline_peak(part)
        where = segment_label(peak["phase"], None if pd.isna(peak["layer"])
                              else int(peak["layer"]))
        text = f"{peak_word}: {op_name(peak['op'])} ({where})"
        traces.append((go.Scatter(
                        x=[peak["index"]], y=[peak["live_bytes"] / scale], mode="markers+text",
                        marker=dict(color=colour, size=12, symbol="star",
                                    line=dict(color="#0f172a", width=1)),
                        text=[text] if facet else [""],
                        # Above the star (the curve's highest point: nothing of the curve
                        # is up there), toward the middle, so a phone's edge does not cut
                        # it; the phase labels sit higher still (BAND_TOP).
                        textposition=("top left" if peak["index"] > part["index"].median()
                                      else "top right"),
                        textfont=dict(size=11, color="#0f172a"),
                        name=f"{label} {peak_word}", showlegend=False,
                        hovertemplate=(f"{label} {peak_word}<br>{op_name(peak['op'])} "
                                       f"({where})<br>%{{y:.1f}} {unit}<extra></extra>")), row))
        fig.update_yaxes(title_text=unit, row=row, col=1)
    fig.add_traces([trace for trace, _ in traces], rows=[row for _, row in traces],
                   cols=[1] * len(traces))
    # One y range for every panel, so the strategies compare at a glance; room above the
    # highest curve for its peak's label, and above that for the phase labels.
    fig.update_yaxes(range=[0, top * (BAND_TOP + 0.1)])
    fig.update_xaxes(title_text=gettext(lang, "op number within the step"), row=rows, col=1)
    return _layout(fig, title, height, lang)


BAND_TOP = 1.32  # × the highest point: the phase bands' top, where their labels hang


def _changes(part: pd.DataFrame) -> pd.DataFrame:
    """The points a line needs: where live bytes change (and the point before), the first
    and the last. Ops that allocate nothing (views, in-place ops) lie on a flat stretch
    the line draws anyway; leaving them out halves a deep model's points."""
    values = part["live_bytes"].to_numpy()
    if len(values) < 3:
        return part
    change = np.diff(values) != 0
    keep = np.ones(len(values), dtype=bool)
    keep[1:-1] = change[1:] | change[:-1]
    return part[keep]


def _phase_bands(part: pd.DataFrame, top: float, lang: str, in_legend: set[str]
                 ) -> list[go.Scatter]:
    """Shade each (phase, layer) run of ops up to `top`: one filled trace per phase (its
    runs separated by gaps), and one text trace labelling the runs (F3, R3, B3, L)."""
    runs = _segments(part)
    by_phase: dict[str, tuple[list, list]] = {}
    for phase, _layer, first, last in runs:
        xs, ys = by_phase.setdefault(phase, ([], []))
        xs += [first - 0.5, first - 0.5, last + 0.5, last + 0.5, math.nan]  # NaN: a gap
        ys += [0, top * BAND_TOP, top * BAND_TOP, 0, math.nan]
    bands = []
    for phase, (xs, ys) in by_phase.items():
        bands.append(go.Scatter(x=np.array(xs, dtype=float), y=np.array(ys, dtype=float),
                        mode="none", fill="toself",
                        fillcolor=PHASE_COLOURS.get(phase, "rgba(0,0,0,0)"),
                        name=gettext(lang, PHASE_NAMES.get(phase, phase)), legendgroup=phase,
                        showlegend=phase not in in_legend,
                        hoverinfo="skip"))
    in_legend.update(b.legendgroup for b in bands if b.showlegend)
    labelled = [(phase, layer, first, last) for phase, layer, first, last in runs
                if layer is not None or phase == "loss"]
    # Spaced by where they sit, not by how many (the forward runs are narrow: thinning by
    # count crowded F0..F7 into one unreadable strip on a phone), the widest runs first;
    # a sliver under an eighth of the spacing (a layer's first backward op, before its
    # recompute) gets none.
    gap = max(float(part["index"].max() - part["index"].min()), 1.0) / MAX_SEGMENT_LABELS
    shown: list[tuple[str, int | None, int, int]] = []
    wide = [run for run in labelled if run[3] - run[2] + 1 >= gap / 8]
    for run in sorted(wide, key=lambda run: run[2] - run[3]):  # widest first, stable
        centre = (run[2] + run[3]) / 2
        if all(abs(centre - (other[2] + other[3]) / 2) >= gap for other in shown):
            shown.append(run)
    shown.sort(key=lambda run: run[2])
    bands.append(go.Scatter(x=[(first + last) / 2 for _, _, first, last in shown],
                    y=[top * BAND_TOP] * len(shown), mode="text",
                    text=[segment_label(phase, layer) for phase, layer, _, _ in shown],
                    textposition="bottom center", textfont=dict(size=9, color="#334155"),
                    showlegend=False, hoverinfo="skip"))
    return bands


# ---------------------------------------------------------------- curves


def _fitting_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows that ran (a `fits` column, when present, is True)."""
    if "fits" not in frame:
        return frame.copy()
    return frame[frame["fits"].fillna(False).astype(bool)].copy()


def sweep_figure(frame: pd.DataFrame, x: str, x_title: str, *,
                 memory: str = "activation_bytes", theory: str | None = None,
                 memory_title: str = "", title: str = "", log_x: bool = False,
                 reference: tuple[str, float] | None = None, lang: str = "en") -> go.Figure:
    """Memory (top) and step time (bottom) against `x`, one colour per strategy.

    `reference` (label, bytes) draws a constant on the memory panel, e.g. one layer's
    internals: what checkpointing every layer rebuilds at a time. Measured points are
    dots (joined by lines when there is no theory); `theory` (predicted bytes) is drawn as
    a dashed line of the same colour. Titles and labels are given in `lang` already."""
    title = title or gettext(lang, "Sweep")
    if frame.empty:
        return _empty(title, gettext(lang, "No measurements"), lang)
    data = _fitting_rows(frame)
    if data.empty:
        return _empty(title, gettext(lang, "No strategy fitted in memory"), lang)
    columns = [memory] + ([theory] if theory and theory in data else [])
    unit, scale = byte_unit(_max(pd.concat([data[c] for c in columns])))
    fig = _stacked((f"{memory_title} ({unit})", gettext(lang, "Step time (ms)")), 0.16)
    if reference is not None:
        name, value = reference
        xs = sorted(data[x].unique())
        fig.add_scatter(x=xs, y=[value / scale] * len(xs), mode="lines", name=name,
                        line=dict(color="#94a3b8", width=2, dash="dot"), row=1, col=1,
                        hovertemplate=name + ": %{y:.2f} " + unit + "<extra></extra>")
    theory_word = pgettext(lang, "chart legend", "theory")
    for strategy in dict.fromkeys(data["strategy"]):
        part = data[data["strategy"] == strategy].sort_values(x)
        colour = strategy_colour(strategy)
        name = strategy_title(strategy, lang)
        has_theory = bool(theory and theory in part and part[theory].notna().any())
        fig.add_scatter(x=part[x], y=part[memory] / scale,
                        mode="markers" if has_theory else "lines+markers", name=name,
                        legendgroup=strategy, line=dict(color=colour, width=2),
                        marker=dict(size=9, color=colour), row=1, col=1,
                        hovertemplate=(f"{name}<br>{x_title} %{{x}}<br>%{{y:.2f}} "
                                       f"{unit}<extra></extra>"))
        if has_theory:
            fig.add_scatter(x=part[x], y=part[theory] / scale, mode="lines",
                            name=f"{name} ({theory_word})", legendgroup=strategy,
                            showlegend=False, line=dict(color=colour, width=1.5, dash="dash"),
                            row=1, col=1,
                            hovertemplate=(f"{name} {theory_word}<br>{x_title} %{{x}}<br>"
                                           f"%{{y:.2f}} {unit}<extra></extra>"))
        if "step_seconds" in part:
            fig.add_scatter(x=part[x], y=part["step_seconds"] * 1000, mode="lines+markers",
                            name=name, legendgroup=strategy, showlegend=False,
                            line=dict(color=colour, width=2), marker=dict(size=8), row=2, col=1,
                            hovertemplate=(f"{name}<br>{x_title} %{{x}}<br>%{{y:.0f}} ms"
                                           "<extra></extra>"))
        if "cpu_seconds" in part and part["cpu_seconds"].notna().any():
            cpu = gettext(lang, "CPU time")
            fig.add_scatter(x=part[x], y=part["cpu_seconds"] * 1000, mode="lines",
                            name=f"{name} ({cpu})", legendgroup=strategy, showlegend=False,
                            line=dict(color=colour, width=1.5, dash="dot"), row=2, col=1,
                            hovertemplate=(f"{name}, {cpu}<br>{x_title} %{{x}}<br>"
                                           "%{y:.0f} ms<extra></extra>"))
    fig.update_xaxes(type="log" if log_x else None)
    fig.update_xaxes(title_text=x_title, row=2, col=1)  # one x title, under both panels
    fig.update_yaxes(title_text=unit, rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=2, col=1)
    return _layout(fig, title, 640, lang)


def segment_figure(frame: pd.DataFrame, layers: int, *, x: str = "k", lang: str = "en"
                   ) -> go.Figure:
    """The trade-off of the segment size k (layers per segment) at a fixed depth. Top: the
    bytes kept at the end of forward (one boundary per segment: fall with k) and the peak
    (boundaries plus one segment rebuilt in backward: rises with k), measured dots on
    dashed theory, with the measured optimum and √N marked. Bottom: step time."""
    data = _fitting_rows(frame).sort_values(x)
    title = gettext(lang, "Layers per segment (k) at {layers} layers", layers=layers)
    if data.empty:
        return _empty(title, gettext(lang, "No measurements"), lang)
    colour = STRATEGIES["every-k"].colour
    best = data.loc[data["peak_bytes"].idxmin()]
    best_k, root = int(best[x]), math.sqrt(layers)
    columns = [c for c in ("peak_bytes", "predicted_peak_bytes", "activation_bytes",
                           "predicted_activation_bytes") if c in data]
    unit, scale = byte_unit(_max(pd.concat([data[c] for c in columns])))
    fig = _stacked((gettext(lang, "Memory ({unit})", unit=unit),
                    gettext(lang, "Step time (ms)")), 0.16)
    series = (("peak_bytes", "predicted_peak_bytes",
               gettext(lang, "peak (boundaries + one segment rebuilt)"), "circle", "dash"),
              ("activation_bytes", "predicted_activation_bytes",
               gettext(lang, "kept at the end of forward (boundaries)"), "diamond-open", "dot"))
    theory_word = pgettext(lang, "chart legend", "theory")
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
                            name=f"{name}, {theory_word}", showlegend=False,
                            line=dict(color=colour, width=1.5, dash=dash), row=1, col=1,
                            hovertemplate="k=%{x}<br>" + theory_word + ": %{y:.2f} " + unit
                                          + "<extra></extra>")
    if "step_seconds" in data:
        fig.add_scatter(x=data[x], y=data["step_seconds"] * 1000, mode="lines+markers",
                        name=gettext(lang, "step time"), showlegend=False,
                        line=dict(color=colour, width=2), marker=dict(size=9), row=2, col=1,
                        hovertemplate="k=%{x}<br>%{y:.0f} ms<extra></extra>")
    fig.add_vline(x=root, line_dash="dot", line_color="#475569", row=1, col=1,
                  annotation_text=f"√N = {root:.1f}", annotation_position="top right")
    fig.add_scatter(x=[best_k], y=[best["peak_bytes"] / scale], mode="markers",
                    marker=dict(symbol="star", size=18, color="#facc15",
                                line=dict(color="#0f172a", width=1)),
                    name=gettext(lang, "lowest measured peak"), row=1, col=1,
                    hovertemplate="k=%{x}<extra></extra>")
    fig.update_xaxes(title_text=gettext(lang, "layers per segment k"), row=2, col=1)
    fig.update_yaxes(title_text=unit, rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=2, col=1)
    return _layout(fig, title, 660, lang)


def segment_verdict(frame: pd.DataFrame, layers: int, *, x: str = "k", lang: str = "en"
                    ) -> str:
    """Where the lowest measured peak is, in words (the caption of segment_figure)."""
    data = _fitting_rows(frame)
    if data.empty:
        return ""
    best_k = int(data.loc[data["peak_bytes"].idxmin()][x])
    root = math.sqrt(layers)
    ks = list(data[x])
    if best_k == min(ks):
        return gettext(lang, "The lowest peak is at k={k} layers per segment: checkpointing "
                             "every layer beats segments of √N={root:.1f} layers here.",
                       k=best_k, root=root)
    if best_k == max(ks):
        return gettext(lang, "The lowest peak is at k={k}: one segment for the whole model.",
                       k=best_k)
    return gettext(lang, "U-shaped: the lowest peak is at k={k} layers per segment "
                         "(√N={root:.1f}).", k=best_k, root=root)


# ---------------------------------------------------------------- what fits


def fits_figure(frame: pd.DataFrame, vary: str, budget_bytes: int, lang: str = "en"
                ) -> go.Figure:
    """Largest batch (or sequence length) that fits a budget per strategy: predicted and
    confirmed (top), and the tokens per second each reaches (bottom)."""
    loc = babel(lang)
    if vary == "batch":
        title = gettext(lang, "Largest batch within {size}",
                        size=format_bytes(budget_bytes, locale=loc))
        name = pgettext(lang, "dimension", "batch")
    else:
        title = gettext(lang, "Longest sequence within {size}",
                        size=format_bytes(budget_bytes, locale=loc))
        name = pgettext(lang, "dimension", "sequence length")
    if frame.empty:
        return _empty(title, gettext(lang, "Nothing measured"), lang)
    strategies = list(frame["strategy"])
    labels = [strategy_title(s, lang) for s in strategies]
    colours = [strategy_colour(s) for s in strategies]
    fig = _stacked((name, gettext(lang, "Tokens per second")))
    fig.add_bar(x=labels, y=frame["value_predicted"], row=1, col=1,
                name=pgettext(lang, "chart legend", "predicted"),
                marker_color="rgba(15, 23, 42, 0.2)", marker_line_color="#0f172a",
                marker_line_width=1)
    fig.add_bar(x=labels, y=frame["value_confirmed"],
                name=pgettext(lang, "chart legend", "confirmed by a real run"),
                marker_color=colours, row=1, col=1, cliponaxis=False,
                text=[format_number(round(v), lang) if pd.notna(v) else
                      gettext(lang, "does not fit") for v in frame["value_confirmed"]],
                textposition="outside")
    fig.add_bar(x=labels, y=frame["tokens_per_second"], marker_color=colours, row=2, col=1,
                showlegend=False, cliponaxis=False,
                text=[format_number(round(v), lang) if pd.notna(v) else ""
                      for v in frame["tokens_per_second"]], textposition="outside")
    fig.update_yaxes(title_text=name, rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=gettext(lang, "tokens / s"), rangemode="tozero", row=2, col=1)
    fig.update_layout(barmode="group")
    return _layout(fig, title, 600, lang)


def fits_caption(frame: pd.DataFrame, vary: str, lang: str = "en") -> str:
    """What the fits figure shows: the gain of every-layer over none, when both fit."""
    confirmed = dict(zip(frame["strategy"], frame["value_confirmed"], strict=True))
    none, every = confirmed.get("none"), confirmed.get("every-layer")
    if not (pd.notna(none) and pd.notna(every) and none and every):
        return ""
    if vary == "batch":
        return gettext(lang, "Checkpointing turns freed memory into a larger batch: "
                             "{ratio:.1f}× with every-layer than without.", ratio=every / none)
    return gettext(lang, "Checkpointing turns freed memory into longer sequences: {ratio:.1f}× "
                         "with every-layer than without.", ratio=every / none)


# ---------------------------------------------------------------- same result


def loss_figure(frame: pd.DataFrame, lang: str = "en") -> go.Figure:
    """Training-loss curves per run, drawn over each other: they should coincide."""
    title = gettext(lang, "Training loss, with and without checkpointing")
    if frame.empty:
        return _empty(title, gettext(lang, "No training run"), lang)
    fig = go.Figure()
    strategies = list(dict.fromkeys(frame["strategy"]))
    dashes = ("solid", "dash", "dot", "dashdot", "longdash")
    loss_word = pgettext(lang, "chart axis", "loss")
    step_word = gettext(lang, "step")
    for number, strategy in enumerate(strategies):
        part = frame[frame["strategy"] == strategy].sort_values("step")
        name = strategy_title(strategy, lang)
        fig.add_scatter(x=part["step"], y=part["loss"], mode="lines", name=name,
                        line=dict(color=strategy_colour(strategy), width=3 if number == 0 else 2,
                                  dash=dashes[number % len(dashes)]),
                        hovertemplate=(name + "<br>" + step_word + " %{x}<br>" + loss_word
                                       + " %{y:.6f}<extra></extra>"))
    fig.update_layout(xaxis_title=gettext(lang, "training step"),
                      yaxis_title=gettext(lang, "cross-entropy loss"))
    return _layout(fig, title, 440, lang)


def loss_caption(max_diff: float | None, lang: str = "en") -> str:
    if max_diff is None:
        return ""
    if max_diff == 0:
        return gettext(lang, "The curves lie on top of each other: identical to the last bit.")
    return gettext(lang, "The curves lie on top of each other: largest difference {diff}.",
                   diff=format(max_diff, ".2e"))
