"""The what-fits and same-result pages' figures: the largest size within a budget per
strategy, and the training-loss curves drawn over each other."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from i18n import format_number, gettext, pgettext
from i18n.units import format_bytes
from reports.figure_style import (
    apply_layout,
    colour_of,
    empty_figure,
    stacked_panels,
)
from reports.report import babel, label_of

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
        return empty_figure(title, gettext(lang, "Nothing measured"), lang)
    strategies = list(frame["strategy"])
    labels = [label_of(s, lang) for s in strategies]
    colours = [colour_of(s) for s in strategies]
    fig = stacked_panels((name, gettext(lang, "Tokens per second")))
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
    return apply_layout(fig, title, 600, lang)


def fits_caption(frame: pd.DataFrame, vary: str, lang: str = "en") -> str:
    """What the fits figure shows: the gain of checkpointing every layer over none, when
    both fit."""
    confirmed = dict(zip(frame["strategy"], frame["value_confirmed"], strict=True))
    none, every = confirmed.get("none"), confirmed.get("every-layer")
    if not (pd.notna(none) and pd.notna(every) and none and every):
        return ""
    if vary == "batch":
        return gettext(lang, "Checkpointing turns freed memory into a larger batch: "
                             "{ratio:.1f}× with every layer checkpointed than without.",
                       ratio=every / none)
    return gettext(lang, "Checkpointing turns freed memory into longer sequences: {ratio:.1f}× "
                         "with every layer checkpointed than without.", ratio=every / none)


# ---------------------------------------------------------------- same result


def loss_figure(frame: pd.DataFrame, lang: str = "en") -> go.Figure:
    """Training-loss curves per run, drawn over each other: they should coincide."""
    title = gettext(lang, "Training loss, with and without checkpointing")
    if frame.empty:
        return empty_figure(title, gettext(lang, "No training run"), lang)
    fig = go.Figure()
    strategies = list(dict.fromkeys(frame["strategy"]))
    dashes = ("solid", "dash", "dot", "dashdot", "longdash")
    loss_word = pgettext(lang, "chart axis", "loss")
    step_word = gettext(lang, "step")
    for number, strategy in enumerate(strategies):
        part = frame[frame["strategy"] == strategy].sort_values("step")
        name = label_of(strategy, lang)
        fig.add_scatter(x=part["step"], y=part["loss"], mode="lines", name=name,
                        line=dict(color=colour_of(strategy), width=3 if number == 0 else 2,
                                  dash=dashes[number % len(dashes)]),
                        hovertemplate=(name + "<br>" + step_word + " %{x}<br>" + loss_word
                                       + " %{y:.6f}<extra></extra>"))
    fig.update_layout(xaxis_title=gettext(lang, "training step"),
                      yaxis_title=gettext(lang, "cross-entropy loss"))
    return apply_layout(fig, title, 440, lang)


def loss_caption(max_diff: float | None, lang: str = "en") -> str:
    if max_diff is None:
        return ""
    if max_diff == 0:
        return gettext(lang, "The curves lie on top of each other: identical to the last bit.")
    return gettext(lang, "The curves lie on top of each other: largest difference {diff}.",
                   diff=format(max_diff, ".2e"))
