"""The compiler-budget page's figure, table and sentences: pure functions of the measured
frame (demos.compiler_budget.to_frame), worded in the language given. No Streamlit."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from i18n import N_, gettext
from i18n.units import byte_unit, flop_unit, format_bytes, format_flops, format_ms, number
from reports.figure_style import LAYOUT, separators
from reports.report import babel, label_of

# Catalog messages for the manual strategies the sweep runs (demos.compiler_budget)
# that are titled apart from the demos' own (reports.report.label_of titles the rest).
STRATEGY_NAMES: dict[str, str] = {
    "none": N_("no checkpointing"),
    "every-k:2": N_("two-layer segments"),
    "selective:save-every-other-matmul": N_("selective: save every other matmul"),
}
METHOD_NAMES = {"saved-tensors-hooks": N_("saved-tensor hooks (compiled points)"),
                "live-tracker": N_("the live tracker (eager points)")}
KIND_COLOURS = {"budget": "#7c3aed", "compiled": "#ea580c", "eager": "#2563eb"}
KIND_SYMBOLS = {"budget": "circle", "compiled": "diamond", "eager": "square"}
KIND_NAMES = {"budget": N_("torch.compile, memory budget"),
              "compiled": N_("torch.compile + manual checkpointing"),
              "eager": N_("manual checkpointing, eager")}


def point_label(kind: str, strategy: str, budget: float | None, lang: str = "en") -> str:
    if kind == "budget":
        value = f"{budget:g}"
        return gettext(lang, "budget {budget}", budget=value)
    name = STRATEGY_NAMES.get(strategy)
    name = gettext(lang, name) if name else label_of(strategy, lang)
    if kind == "compiled":
        return gettext(lang, "compiled, {strategy}", strategy=name)
    return name


def _labels(frame: pd.DataFrame, lang: str) -> list[str]:
    return [point_label(k, s, None if pd.isna(b) else float(b), lang)
            for k, s, b in zip(frame["kind"], frame["strategy"], frame["budget"], strict=True)]


def pareto_figure(frame: pd.DataFrame, lang: str = "en") -> go.Figure:
    """Bytes saved for backward (x) against step time (top) and recomputed FLOPs (bottom):
    the budgets joined as the compiler's curve, the manual strategies as points."""
    title = gettext(lang, "The budget's trade-off")
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.2, subplot_titles=(
        gettext(lang, "Step time (ms)"), gettext(lang, "Recomputed FLOPs")))
    if frame.empty:
        fig.update_layout(**LAYOUT, height=300, title_text=title)
        return fig
    unit, scale = byte_unit(float(frame["saved_bytes"].max()) or 1.0)
    flops_unit, flop_scale = flop_unit(float(frame["recomputed_flops"].abs().max()) or 1.0)
    labels = _labels(frame, lang)
    data = frame.assign(label=labels)
    for kind in ("budget", "compiled", "eager"):
        part = data[data["kind"] == kind]
        if part.empty:
            continue
        if kind == "budget":
            part = part.sort_values("saved_bytes")
        colour = KIND_COLOURS[kind]
        name = gettext(lang, KIND_NAMES[kind])
        mode = "lines+markers+text" if kind == "budget" else "markers"
        text = [f"{b:g}" for b in part["budget"]] if kind == "budget" else None
        x = part["saved_bytes"] / scale
        spread = dict(type="data", symmetric=False, thickness=1, width=3,
                      array=(part["step_seconds_high"] - part["step_seconds"]) * 1000,
                      arrayminus=(part["step_seconds"] - part["step_seconds_low"]) * 1000)
        for row, y, y_text, error in (
                (1, part["step_seconds"] * 1000, "%{y:.1f} ms", spread),
                (2, part["recomputed_flops"] / flop_scale, "%{y:.2f} " + flops_unit, None)):
            fig.add_scatter(
                x=x, y=y, error_y=error, mode=mode, text=text, textposition="top center",
                cliponaxis=False, name=name,
                legendgroup=kind, showlegend=row == 1, customdata=part["label"],
                line=dict(color=colour, width=2),
                marker=dict(size=10, color=colour, symbol=KIND_SYMBOLS[kind]),
                hovertemplate=("%{customdata}<br>%{x:.2f} " + unit + "<br>" + y_text
                               + "<extra></extra>"), row=row, col=1)
    x_title = gettext(lang, "Bytes saved for backward ({unit})", unit=unit)
    fig.update_xaxes(title_text=x_title, rangemode="tozero", row=1, col=1)
    fig.update_xaxes(title_text=x_title, rangemode="tozero", row=2, col=1)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text=flops_unit, rangemode="tozero", row=2, col=1)
    fig.update_layout(**LAYOUT, height=720, separators=separators(lang))
    fig.update_layout(title_text=title)
    return fig


def _row(frame: pd.DataFrame, kind: str, strategy: str) -> pd.Series | None:
    rows = frame[(frame["kind"] == kind) & (frame["strategy"] == strategy)]
    return rows.iloc[0] if len(rows) else None


def end_points(frame: pd.DataFrame) -> tuple[pd.Series, pd.Series] | None:
    """The budget points with the most and the fewest bytes saved (the sweep's ends)."""
    budgets = frame[frame["kind"] == "budget"]
    if len(budgets) < 2:
        return None
    ordered = budgets.sort_values("saved_bytes")
    return ordered.iloc[-1], ordered.iloc[0]


def _flops(value: float, lang: str) -> str:
    return format_flops(value, locale=babel(lang))


def budget_caption(frame: pd.DataFrame, lang: str = "en") -> str:
    """The curve's end points, read from this run: what the default (budget 1) keeps
    beside eager without checkpointing, and what the least budget keeps and recomputes."""
    ends = end_points(frame)
    if ends is None:
        return ""
    top, bottom = ends
    loc = babel(lang)
    plain = _row(frame, "eager", "none")
    high, low = f"{top['budget']:g}", f"{bottom['budget']:g}"
    text = gettext(
        lang, "At budget {high} the compiler kept {high_bytes} for backward and recomputed "
              "{high_flops}; at budget {low} it kept {low_bytes} and recomputed {low_flops}.",
        high=high, high_bytes=format_bytes(top["saved_bytes"], locale=loc),
        high_flops=_flops(top["recomputed_flops"], lang), low=low,
        low_bytes=format_bytes(bottom["saved_bytes"], locale=loc),
        low_flops=_flops(bottom["recomputed_flops"], lang))
    if plain is not None:
        text += " " + gettext(
            lang, "Eager, without checkpointing, the same step keeps {bytes} and its "
                  "forward costs {forward}.",
            bytes=format_bytes(plain["saved_bytes"], locale=loc),
            forward=_flops(plain["forward_flops"], lang))
    return text


def compiler_changes(frame: pd.DataFrame, lang: str = "en") -> list[str]:
    """One sentence per manual strategy measured both eagerly and compiled: what the
    compiler changed in bytes kept and FLOPs recomputed."""
    loc = babel(lang)
    lines = []
    for strategy in frame.loc[frame["kind"] == "compiled", "strategy"]:
        compiled, eager = _row(frame, "compiled", strategy), _row(frame, "eager", strategy)
        if compiled is None or eager is None:
            continue
        lines.append(gettext(
            lang, "**{strategy}**: eager it kept {eager_bytes} and recomputed {eager_flops}; "
                  "compiled it kept {compiled_bytes} and recomputed {compiled_flops}.",
            strategy=point_label("eager", strategy, None, lang),
            eager_bytes=format_bytes(eager["saved_bytes"], locale=loc),
            eager_flops=_flops(eager["recomputed_flops"], lang),
            compiled_bytes=format_bytes(compiled["saved_bytes"], locale=loc),
            compiled_flops=_flops(compiled["recomputed_flops"], lang)))
    plain, default = _row(frame, "eager", "none"), _row(frame, "budget", "budget:1")
    if plain is not None and default is not None:
        lines.append(gettext(
            lang, "**{strategy}**: eager it kept {eager_bytes}; compiled at the default "
                  "budget it kept {compiled_bytes} and recomputed {compiled_flops}.",
            strategy=point_label("eager", "none", None, lang),
            eager_bytes=format_bytes(plain["saved_bytes"], locale=loc),
            compiled_bytes=format_bytes(default["saved_bytes"], locale=loc),
            compiled_flops=_flops(default["recomputed_flops"], lang)))
    return lines


TABLE_COLUMNS: dict[str, str] = {
    "label": N_("Point"),
    "saved_bytes": N_("Saved for backward"),
    "recomputed_flops": N_("Recomputed FLOPs"),
    "flops": N_("FLOPs per step"),
    "step_seconds": N_("Step time (middle half)"),
    "compile_seconds": N_("Compile time"),
    "max_grad_diff": N_("Largest gradient difference"),
}


def budget_table(frame: pd.DataFrame, lang: str = "en") -> pd.DataFrame:
    """The measured points as text, in the language's number format."""
    loc = babel(lang)
    out = pd.DataFrame({
        "label": _labels(frame, lang),
        "saved_bytes": [format_bytes(v, locale=loc) for v in frame["saved_bytes"]],
        "recomputed_flops": [_flops(v, lang) for v in frame["recomputed_flops"]],
        "flops": [_flops(v, lang) for v in frame["flops"]],
        "step_seconds": [gettext(lang, "{median} ({low}–{high})",
                                 median=format_ms(m, locale=loc), low=format_ms(lo, locale=loc),
                                 high=format_ms(hi, locale=loc))
                         for m, lo, hi in zip(frame["step_seconds"], frame["step_seconds_low"],
                                              frame["step_seconds_high"], strict=True)],
        "compile_seconds": ["" if pd.isna(v) else f"{number(v, 1, locale=loc)} s"
                            for v in frame["compile_seconds"]],
        "max_grad_diff": [gettext(lang, "{diff:.1e}", diff=float(v))
                          for v in frame["max_grad_diff"]],
    })
    return out.rename(columns={k: gettext(lang, v) for k, v in TABLE_COLUMNS.items()})


def methods(frame: pd.DataFrame, lang: str = "en") -> list[str]:
    """How the points' bytes were measured, worded."""
    return [gettext(lang, METHOD_NAMES.get(m, m)) for m in dict.fromkeys(frame["measured_by"])]
