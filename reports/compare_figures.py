"""The compare page's figures and their captions: peak memory and step time per strategy,
what memory holds at the peak, activations measured against the prediction."""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go

from demos.results import StrategyResult
from i18n import N_, gettext, pgettext
from i18n.units import byte_unit, format_bytes
from memory.strategies import colour as strategy_colour
from reports.figure_style import (
    apply_layout,
    empty_figure,
    fitting,
    largest,
    stacked_panels,
)
from reports.report import babel
from reports.report import label as result_label
from reports.timing import time_spread

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

# ---------------------------------------------------------------- compare


def peak_and_time_figure(results: Sequence[StrategyResult], lang: str = "en") -> go.Figure:
    """Two panels, one bar per strategy: peak memory above the parameters, and the median
    step time with the middle half of the timed runs as an error bar."""
    fitted = fitting(results)
    title = gettext(lang, "Peak memory and step time")
    if not fitted:
        return empty_figure(title, gettext(lang, "No strategy fitted in memory"), lang)
    unit, scale = byte_unit(largest(r.peak_bytes for r in fitted))
    fig = stacked_panels((gettext(lang, "Peak memory above the parameters ({unit})", unit=unit),
                    gettext(lang, "Step time (ms), median and middle half of the runs")))
    labels = [result_label(r, lang) for r in fitted]
    colours = [strategy_colour(r.spec) for r in fitted]
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
    return apply_layout(fig, title, 560, lang)


def breakdown_figure(results: Sequence[StrategyResult], lang: str = "en") -> go.Figure:
    """Stacked bars of where the peak's bytes go, per strategy."""
    fitted = [r for r in fitting(results) if r.breakdown]
    title = gettext(lang, "What memory holds at the peak")
    if not fitted:
        return empty_figure(title, gettext(lang, "No breakdown measured"), lang)
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
    return apply_layout(fig, title, 480, lang)


def breakdown_caption(results: Sequence[StrategyResult], lang: str = "en") -> str:
    """What the stacked bars show, read from them: which parts differ between the
    strategies at their peaks and which are the same."""
    fitted = [r for r in fitting(results) if r.breakdown]
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
    fitted = [r for r in fitting(results) if r.activation_bytes is not None]
    title = gettext(lang, "Activations held: measured vs predicted")
    if not fitted:
        return empty_figure(title, gettext(lang, "Nothing measured"), lang)
    labels = [result_label(r, lang) for r in fitted]
    measured = [r.activation_bytes or 0 for r in fitted]
    predicted = [r.predicted_activation_bytes for r in fitted]
    unit, scale = byte_unit(largest([*measured, *predicted, korthikanti_bytes or 0]))
    fig = go.Figure()
    name_measured = pgettext(lang, "chart legend", "measured")
    name_predicted = pgettext(lang, "chart legend", "this model's prediction")
    fig.add_bar(name=name_measured, x=labels, y=[m / scale for m in measured],
                marker_color=[strategy_colour(r.spec) for r in fitted],
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
    return apply_layout(fig, title, 480, lang)


def activation_caption(results: Sequence[StrategyResult], lang: str = "en") -> str:
    """How close prediction and measurement are, from the bars."""
    fitted = [r for r in fitting(results) if r.activation_bytes is not None]
    gaps = [abs((r.activation_bytes or 0) - r.predicted_activation_bytes)
            / r.predicted_activation_bytes for r in fitted if r.predicted_activation_bytes]
    if not gaps:
        return ""
    if max(gaps) == 0:
        return gettext(lang, "Prediction and measurement agree to the byte.")
    return gettext(lang, "Prediction and measurement agree within {gap:.2%}.", gap=max(gaps))
