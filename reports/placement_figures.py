"""The /placement page's figure, sentences and table: each checkpoint placement method
run for a byte budget (demos.placement_lab.PlacementRun), its recomputed FLOPs against its
peak, measured beside what the chain predicts, with the optimal placements' frontier and
the budget. Pure functions, no Streamlit; texts in the language `lang`."""

from __future__ import annotations

import statistics

import pandas as pd
import plotly.graph_objects as go

from demos.placement_lab import MethodRun, PlacementRun
from demos.results import step_range
from i18n import N_, format_percent, gettext
from i18n.units import (
    MIB,
    MISSING,
    byte_unit,
    column_unit,
    flop_unit,
    format_bytes,
    format_bytes_in,
    format_flops,
    format_ms,
)
from reports.figure_style import apply_layout, colour_of
from reports.report import babel

METHOD_NAMES = {
    "optimal": N_("optimal (dynamic program)"),
    "greedy": N_("Chen's greedy walk"),
    "sqrt": N_("every √N layers"),
    "every": N_("every layer"),
    "first-k": N_("the first k layers"),
    "none": N_("no checkpoints"),
    "sac": N_("torch's SAC solver (ops inside each block)"),
}
# the lab's strategies' colours where a method is one of them (memory.strategies)
METHOD_COLOURS = {
    "optimal": "#16a34a",
    "greedy": "#ca8a04",
    "sqrt": colour_of("sqrt"),
    "every": colour_of("every-layer"),
    "first-k": "#9333ea",
    "none": colour_of("none"),
    "sac": "#0891b2",
}
FRONTIER_COLOUR = "#94a3b8"
# FLOPs within this share of a step count as the same recompute (rounding of the counter)
SAME_SHARE = 1e-6


def method_name(method: str, lang: str = "en") -> str:
    return gettext(lang, METHOD_NAMES[method])


def over_budget(run: MethodRun, budget: int) -> bool:
    """Whether the method's step peaked above the budget, as measured."""
    return run.ran and run.peak_bytes > budget  # type: ignore[operator]


def placement_figure(result: PlacementRun, lang: str = "en") -> go.Figure:
    """Recomputed FLOPs (x) against the peak above the parameters (y): each method measured
    (a dot) and predicted (a ring), the optimal frontier (a staircase) and the budget."""
    ran = [r for r in result.runs if r.ran]
    peaks = [r.peak_bytes or 0 for r in ran] + [n for n, _ in result.frontier]
    unit, scale = byte_unit(max([*peaks, result.budget_bytes, 1]))
    flops = [r.recompute_flops or 0 for r in ran] + [f for _, f in result.frontier]
    funit, fscale = flop_unit(max([*flops, 1.0]))
    fig = go.Figure()
    if result.frontier:
        points = sorted(result.frontier, key=lambda p: (p[1], -p[0]))
        fig.add_scatter(
            x=[f / fscale for _, f in points],
            y=[n / scale for n, _ in points],
            mode="lines+markers",
            line=dict(color=FRONTIER_COLOUR, width=2, shape="hv"),
            marker=dict(size=5, color=FRONTIER_COLOUR),
            name=gettext(lang, "optimal at every budget (predicted)"),
            hovertemplate=f"%{{x:.2f}} {funit}<br>%{{y:.2f}} {unit}<extra></extra>",
        )
    for r in ran:
        colour, name = METHOD_COLOURS[r.method], method_name(r.method, lang)
        fig.add_scatter(
            x=[r.predicted_recompute_flops / fscale],
            y=[r.predicted_peak_bytes / scale],
            mode="markers",
            marker=dict(size=17, color=colour, symbol="circle-open", line=dict(width=2)),
            name=name,
            legendgroup=r.method,
            showlegend=False,
            hovertemplate=(
                name
                + "<br>"
                + gettext(lang, "predicted")
                + f": %{{x:.2f}} {funit}, %{{y:.2f}} {unit}<extra></extra>"
            ),
        )
        fig.add_scatter(
            x=[(r.recompute_flops or 0) / fscale],
            y=[(r.peak_bytes or 0) / scale],
            mode="markers",
            marker=dict(size=9, color=colour),
            name=name,
            legendgroup=r.method,
            hovertemplate=(
                name
                + "<br>"
                + gettext(lang, "measured")
                + f": %{{x:.2f}} {funit}, %{{y:.2f}} {unit}<extra></extra>"
            ),
        )
    fig.add_hline(
        y=result.budget_bytes / scale,
        line=dict(color="#dc2626", dash="dash", width=1.5),
        annotation_text=gettext(
            lang, "budget {budget}", budget=format_bytes(result.budget_bytes, locale=babel(lang))
        ),
        annotation_position="bottom left",
    )
    fig.update_xaxes(
        title_text=gettext(lang, "Recomputed in backward ({unit})", unit=funit),
        rangemode="tozero",
    )
    fig.update_yaxes(
        title_text=gettext(lang, "Peak above the parameters ({unit})", unit=unit),
        rangemode="tozero",
    )
    return apply_layout(fig, gettext(lang, "Recompute against peak, per method"), 520, lang)


def figure_caption(lang: str = "en") -> str:
    return gettext(
        lang,
        "Dots: each method's placement run on this server, its peak above the parameters "
        "(the live tracker) against the FLOPs its backward recomputed (torch's FLOP "
        "counter: the step's count less the plain step's). Rings: what the chain's memory "
        "model predicts for the same placement. The grey staircase: the optimal placement of "
        "whole layers at every budget, predicted; no placement of whole layers lies below it, "
        "while torch's SAC solver, which saves single ops inside every block, may. The dashed "
        "line: the budget.",
    )


def _share(flops: float, result: PlacementRun, lang: str) -> str:
    return format_percent(flops / result.step_flops, lang, 1) if result.step_flops else MISSING


def comparison_lines(result: PlacementRun, lang: str = "en") -> list[str]:
    """What the page says under the chart, from the measured numbers: the optimum's
    recompute and peak; how much more each other method recomputes (in FLOPs and as a
    share of the plain step's counted FLOPs); which peaked over the budget; which could
    place nothing."""
    loc = babel(lang)
    budget = format_bytes(result.budget_bytes, locale=loc)
    best = next((r for r in result.runs if r.method == "optimal" and r.ran), None)
    lines = []
    if best is not None:
        key = (
            N_(
                "**{name}** recomputes {flops} ({share} of a step's FLOPs) and peaks at "
                "{peak}, within the budget of {budget}."
            )
            if not over_budget(best, result.budget_bytes)
            else N_(
                "**{name}** recomputes {flops} ({share} of a step's FLOPs) and peaks at "
                "{peak}, over the budget of {budget}."
            )
        )
        lines.append(
            gettext(
                lang,
                key,
                name=method_name("optimal", lang),
                flops=format_flops(best.recompute_flops, locale=loc),
                share=_share(best.recompute_flops or 0, result, lang),
                peak=format_bytes(best.peak_bytes, locale=loc),
                budget=budget,
            )
        )
    else:
        every = next((r for r in result.runs if r.method == "every" and r.ran), None)
        lines.append(
            gettext(
                lang,
                "No placement fits the budget of {budget}: even checkpointing every layer "
                "peaks at {need}.",
                budget=budget,
                need=format_bytes(every.predicted_peak_bytes if every else None, locale=loc),
            )
        )
    others = [r for r in result.runs if r.ran and r.method != "optimal"]
    # those within the budget first, least recompute first
    others.sort(key=lambda r: (over_budget(r, result.budget_bytes), r.recompute_flops or 0))
    for r in others:
        lines.append(
            gettext(
                lang,
                "**{name}**: {recompute}; {peak}.",
                name=method_name(r.method, lang),
                recompute=_recompute_words(r, best, result, lang),
                peak=_peak_words(r, result, lang),
            )
        )
    sac = next((r for r in result.runs if r.method == "sac" and r.ran), None)
    if sac is not None:
        lines.append(
            gettext(
                lang,
                "**{name}**: every block checkpointed, saving the ops torch's solver picks "
                "within {share} of the block's op memory, the largest share whose predicted "
                "peak fits the budget.",
                name=method_name("sac", lang),
                share=format_percent(sac.share or 0.0, lang, 1),
            )
        )
    refused = [method_name(r.method, lang) for r in result.runs if r.error is not None]
    if refused and best is not None:
        lines.append(
            gettext(lang, "Nothing fits the budget for: {names}.", names=", ".join(refused))
        )
    over = [method_name(r.method, lang) for r in result.runs if over_budget(r, result.budget_bytes)]
    lines.append(
        gettext(lang, "Over the budget, measured: {names}.", names=", ".join(over))
        if over
        else gettext(lang, "Every method that ran stayed within the budget, measured.")
    )
    return lines


def _recompute_words(r: MethodRun, best: MethodRun | None, result: PlacementRun, lang: str) -> str:
    loc = babel(lang)
    flops = r.recompute_flops or 0.0
    if best is None:
        return gettext(
            lang, "recomputes {flops}", flops=format_flops(r.recompute_flops, locale=loc)
        )
    extra = flops - (best.recompute_flops or 0.0)
    if abs(extra) <= SAME_SHARE * (result.step_flops or 1.0):
        return gettext(lang, "recomputes as much as the optimum")
    if extra > 0:
        return gettext(
            lang,
            "recomputes {extra} more than the optimum (+{share} of a step's FLOPs)",
            extra=format_flops(extra, locale=loc),
            share=_share(extra, result, lang),
        )
    return gettext(
        lang, "recomputes {less} less than the optimum", less=format_flops(-extra, locale=loc)
    )


def _peak_words(r: MethodRun, result: PlacementRun, lang: str) -> str:
    loc = babel(lang)
    peak = format_bytes(r.peak_bytes, locale=loc)
    if over_budget(r, result.budget_bytes):
        return gettext(
            lang,
            "peaks at {peak}, {over} over the budget",
            peak=peak,
            over=format_bytes((r.peak_bytes or 0) - result.budget_bytes, locale=loc),
        )
    return gettext(lang, "peaks at {peak}, within the budget", peak=peak)


def segments_text(run: MethodRun, lang: str = "en") -> str:
    """The checkpointed segments: a layer alone ("5"), or layers rebuilt together as one
    segment ("0–2"); "none" when nothing is checkpointed."""
    if run.share is not None:
        return gettext(lang, "each layer, selective")
    parts = [
        str(a) if b - a == 1 else f"{a}–{b - 1}" for a, b, mode in run.segments if mode != "keep"
    ]
    return ", ".join(parts) if parts else gettext(lang, "none")


def widths_text(result: PlacementRun) -> str:
    """Each layer's MLP width in multiples of the hidden size: "16h, 2h, 6h, …"."""
    h = result.config.hidden
    return ", ".join(f"{w // h}h" for w in result.widths)


TABLE_COLUMNS = {
    "method": N_("Method"),
    "layers": N_("Checkpointed segments"),
    "peak": N_("Peak (measured)"),
    "peak_predicted": N_("Peak (predicted)"),
    "recompute": N_("Recomputed (measured)"),
    "recompute_predicted": N_("Recomputed (predicted)"),
    "step_time": N_("Step time, median (middle half)"),
    "budget": N_("Budget"),
}


def step_time_text(r: MethodRun, lang: str = "en") -> str:
    """A placement's step time: the median of its timed steps and their middle half
    (demos.results.step_range), in milliseconds; a dash when it was not timed."""
    if not r.step_seconds:
        return MISSING
    loc = babel(lang)
    low, high = step_range(r.step_seconds) or (None, None)
    median = statistics.median(r.step_seconds)
    return (
        f"{format_ms(median, locale=loc)} ({format_ms(low, locale=loc)}–"
        f"{format_ms(high, locale=loc)})"
    )


def timing_caption(result: PlacementRun, lang: str = "en") -> str:
    """What the step times are, and what they are not."""
    if result.timing == "wall":
        return gettext(
            lang,
            "Step times: the GPU's wall time, synchronised, over a few "
            "steps. They show what a placement costs on this run; which "
            "placement recomputes least is read from the counted FLOPs, not "
            "from times.",
        )
    return gettext(
        lang,
        "Step times: this process's CPU time over a few steps (less disturbed "
        "than wall time by other work on the machine). They show what a "
        "placement costs on this run; which placement recomputes least is read "
        "from the counted FLOPs, not from times.",
    )


def placement_table(result: PlacementRun, lang: str = "en") -> pd.DataFrame:
    """One row per method: the segments it checkpoints, its peak and recompute measured
    and predicted, and whether its measured peak kept to the budget."""
    loc = babel(lang)
    sizes = [r.peak_bytes for r in result.runs] + [r.predicted_peak_bytes for r in result.runs]
    # KiB with a decimal on the lab's small models: measured beside predicted to 0.1 KiB
    unit = "KiB" if max([s or 0 for s in sizes]) < 100 * MIB else column_unit(sizes)
    rows = []
    for r in result.runs:
        if not r.ran:
            verdict = gettext(lang, "nothing fits")
        elif over_budget(r, result.budget_bytes):
            verdict = gettext(lang, "✗ over")
        else:
            verdict = gettext(lang, "✓ within")
        rows.append(
            {
                "method": method_name(r.method, lang),
                "layers": segments_text(r, lang) if r.ran else MISSING,
                "peak": format_bytes_in(r.peak_bytes, unit, locale=loc),
                "peak_predicted": format_bytes_in(
                    r.predicted_peak_bytes if r.ran else None, unit, locale=loc
                ),
                "recompute": format_flops(r.recompute_flops, locale=loc),
                "recompute_predicted": format_flops(
                    r.predicted_recompute_flops if r.ran else None, locale=loc
                ),
                "step_time": step_time_text(r, lang) if r.ran else MISSING,
                "budget": verdict,
            }
        )
    frame = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    return frame.rename(columns={k: gettext(lang, v) for k, v in TABLE_COLUMNS.items()})
