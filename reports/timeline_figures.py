"""Memory during one training step: live bytes after every op, one line per strategy,
the phases shaded and each layer's run of ops labelled."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from demos.results import TimelinePoint
from i18n import N_, gettext, pgettext
from i18n.units import byte_unit
from memory.strategies import StrategySpec
from memory.strategies import title as strategy_title
from reports.figure_style import (
    apply_layout,
    colour_of,
    empty_figure,
    largest,
    panel_title,
)
from reports.peak_notes import op_name
from reports.report import label_of

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

# ---------------------------------------------------------------- timeline


TIMELINE_COLUMNS = ("strategy", "label", "index", "op", "phase", "layer", "live_bytes")


def timeline_frame(timelines: Mapping[StrategySpec, Sequence[TimelinePoint]],
                   lang: str = "en") -> pd.DataFrame:
    """{strategy record: [TimelinePoint, ...]} -> one long DataFrame (TIMELINE_COLUMNS);
    `strategy` is the canonical text (every-k:2), `label` its display title in `lang`
    (every 2 layers)."""
    rows = [
        {"strategy": spec.label, "label": title, "index": p.index,
         "op": p.op, "phase": p.phase, "layer": p.layer, "live_bytes": p.live_bytes}
        for spec, points in timelines.items()
        for title in (strategy_title(spec, lang),)
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
        return empty_figure(title, gettext(lang, "No timeline recorded"), lang)
    names = list(dict.fromkeys(frame["strategy"]))
    labels = [label_of(name, lang) for name in names]
    unit, scale = byte_unit(largest(frame["live_bytes"]))
    top = largest(frame["live_bytes"]) / scale
    rows = len(labels) if facet else 1
    height = 250 * rows + 160 if facet else 480
    # about 90 px between panels: the x tick labels above, then the next panel's title
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=False,
                        vertical_spacing=min(0.3, 90 / max(height - 136, 1)) if rows > 1 else 0,
                        subplot_titles=[panel_title(label) for label in labels]
                        if facet else None)
    layer_word = gettext(lang, "layer")
    phase_words = {p: gettext(lang, PHASE_NAMES.get(p, p)) for p in frame["phase"].unique()}
    peak_word = pgettext(lang, "chart legend", "peak")
    traces: list[tuple[go.Scatter, int]] = []  # added at once: one validation pass
    in_legend: set[str] = set()  # each phase's band once in the legend
    for number, (name, label) in enumerate(zip(names, labels, strict=True), start=1):
        part = frame[frame["strategy"] == name].sort_values("index")
        row = number if facet else 1
        colour = colour_of(name)
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
        # Two short lines rather than one long one: a phone's panel is under 300 px wide
        text = f"{peak_word} ({where}):<br>{op_name(peak['op'])}"
        traces.append((go.Scatter(
                        x=[peak["index"]], y=[peak["live_bytes"] / scale], mode="markers+text",
                        marker=dict(color=colour, size=12, symbol="star",
                                    line=dict(color="#0f172a", width=1)),
                        text=[text] if facet else [""],
                        # Above the star (the curve's highest point: nothing of the curve
                        # is up there), toward the middle, so a phone's edge does not cut
                        # it; the phase labels sit higher still (BAND_TOP).
                        textposition=peak_label_position(peak["index"], part["index"]),
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
    return apply_layout(fig, title, height, lang)


# × the highest point: the phase bands' top, where their labels hang. Between the peak's
# star and those labels: room for the peak's two-line label (about 34 px with the star)
# in a panel of 150 px; at 1.32 a phone's timeline put the label over the F/B labels.
BAND_TOP = 1.6


def peak_label_position(x: float, xs: pd.Series) -> str:
    """Where a peak's label goes beside its star, toward the middle of the panel: to the
    right in the first third, to the left in the last, centred between."""
    low, high = float(xs.min()), float(xs.max())
    share = (x - low) / (high - low) if high > low else 0.5
    if share < 1 / 3:
        return "top right"
    return "top left" if share > 2 / 3 else "top center"


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
