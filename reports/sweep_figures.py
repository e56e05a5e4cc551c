"""The curves page's figures: memory and step time against a swept dimension, and the
trade-off of the segment size k at a fixed depth."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from i18n import gettext, pgettext
from i18n.units import byte_unit
from memory.strategies import STRATEGIES
from reports.figure_style import (
    apply_layout,
    colour_of,
    empty_figure,
    largest,
    stacked_panels,
)
from reports.report import label_of

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
        return empty_figure(title, gettext(lang, "No measurements"), lang)
    data = _fitting_rows(frame)
    if data.empty:
        return empty_figure(title, gettext(lang, "No strategy fitted in memory"), lang)
    columns = [memory] + ([theory] if theory and theory in data else [])
    unit, scale = byte_unit(largest(pd.concat([data[c] for c in columns])))
    fig = stacked_panels((f"{memory_title} ({unit})", gettext(lang, "Step time (ms)")), 0.16)
    if reference is not None:
        name, value = reference
        xs = sorted(data[x].unique())
        fig.add_scatter(x=xs, y=[value / scale] * len(xs), mode="lines", name=name,
                        line=dict(color="#94a3b8", width=2, dash="dot"), row=1, col=1,
                        hovertemplate=name + ": %{y:.2f} " + unit + "<extra></extra>")
    theory_word = pgettext(lang, "chart legend", "theory")
    for strategy in dict.fromkeys(data["strategy"]):
        part = data[data["strategy"] == strategy].sort_values(x)
        colour = colour_of(strategy)
        name = label_of(strategy, lang)
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
                            error_y=_time_range(part, colour),
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
    return apply_layout(fig, title, 640, lang)


def _time_range(part: pd.DataFrame, colour: str) -> dict | None:
    """Error bars from each point's median step time to the range of its timed runs
    (StrategyResult.step_range); None when the frame has no ranges."""
    if "step_seconds_low" not in part or part["step_seconds_low"].isna().all():
        return None
    return dict(type="data", symmetric=False, color=colour, thickness=1.5, width=4,
                array=((part["step_seconds_high"] - part["step_seconds"]) * 1000).to_numpy(),
                arrayminus=((part["step_seconds"] - part["step_seconds_low"]) * 1000
                            ).to_numpy())


def segment_figure(frame: pd.DataFrame, layers: int, *, x: str = "k", lang: str = "en"
                   ) -> go.Figure:
    """The trade-off of the segment size k (layers per segment) at a fixed depth. Top: the
    bytes kept at the end of forward (one boundary per segment: fall with k) and the peak
    (boundaries plus one segment rebuilt in backward: rises with k), measured dots on
    dashed theory, with the measured optimum and √N marked. Bottom: step time."""
    data = _fitting_rows(frame).sort_values(x)
    title = gettext(lang, "Layers per segment (k) at {layers} layers", layers=layers)
    if data.empty:
        return empty_figure(title, gettext(lang, "No measurements"), lang)
    colour = STRATEGIES["every-k"].colour
    best = data.loc[data["peak_bytes"].idxmin()]
    best_k, root = int(best[x]), math.sqrt(layers)
    columns = [c for c in ("peak_bytes", "predicted_peak_bytes", "activation_bytes",
                           "predicted_activation_bytes") if c in data]
    unit, scale = byte_unit(largest(pd.concat([data[c] for c in columns])))
    fig = stacked_panels((gettext(lang, "Memory ({unit})", unit=unit),
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
    return apply_layout(fig, title, 660, lang)


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
