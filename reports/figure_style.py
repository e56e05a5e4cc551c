"""What every Plotly figure of the live demos shares: layout, separators, units, helpers.

The figures are pure functions of measured records, no Streamlit.

One colour per strategy everywhere (its record in memory.strategies), memory axes in MiB or
GiB, time axes in milliseconds. Every builder takes result records (demos.results) or
DataFrames, so the tests can feed it synthetic data, and `lang` (a language code): titles,
axes, legends and hover texts come from the catalog in that language.

Built for a phone as well as a laptop: a short one-line title (what to notice is said in
the caption under the chart, see reports.report and the *_caption functions), panels
stacked one above the other rather than side by side, and the legend under the plot. Each
figure has a bounded number of traces, whatever the model's depth: the timeline draws its
phase bands as one filled trace per phase, not one shape per layer.

The figures themselves: reports.compare_figures (compare), timeline_figures (memory
during one step), sweep_figures (the curves) and fits_and_loss_figures (what fits, same
result); reports.budget_figures for the compiler's budget.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from babel.numbers import get_decimal_symbol, get_group_symbol
from plotly.subplots import make_subplots

from demos.results import StrategyResult
from memory.strategies import colour, fallback_colour, spec_of_label
from reports.report import babel

# Plotly's "plotly_white" as these figures use it: its layout, and its defaults for the two
# kinds of trace drawn here (bars and lines). Plotly copies a figure's template into it;
# the whole one, with its defaults for two dozen kinds of trace, took 10 ms of CPU a
# figure, this one 4 ms, and the figures look the same.
_WHITE = pio.templates["plotly_white"]
TEMPLATE = go.layout.Template(layout=_WHITE.layout,
                              data={"bar": _WHITE.data.bar, "scatter": _WHITE.data.scatter})

LAYOUT = dict(
    template=TEMPLATE,
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


def largest(values: Iterable[float | None]) -> float:
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


def apply_layout(fig: go.Figure, title: str, height: int, lang: str = "en", **extra: object
            ) -> go.Figure:
    fig.update_layout(**LAYOUT, height=height, separators=separators(lang), **extra)
    fig.update_layout(title_text=title)
    return fig


def empty_figure(title: str, message: str, lang: str = "en") -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font=dict(size=15))
    fig.update_layout(xaxis_visible=False, yaxis_visible=False)
    return apply_layout(fig, title, 300, lang)


def fitting(results: Sequence[StrategyResult]) -> list[StrategyResult]:
    return [r for r in results if r.fits and r.peak_bytes is not None]


PANEL_TITLE_CHARS = 36  # a panel title's line: about 250 px at 13 px, a phone's plot


def panel_title(text: str, width: int = PANEL_TITLE_CHARS) -> str:
    """A panel's title in lines of at most `width` characters (words kept whole): Plotly
    never wraps a subplot title, and a phone cut a long one at the screen's edges ("Step
    time (ms), median and middle half of the runs", longer still in German)."""
    return "<br>".join(textwrap.wrap(text, width, break_long_words=False,
                                     break_on_hyphens=False)) or text


def stacked_panels(titles: tuple[str, str], spacing: float = 0.2) -> go.Figure:
    """Two panels, one above the other: readable at 390 px as at 1400."""
    # one shared x axis: its tick labels only under the lower panel, so the upper panel's
    # (rotated strategy names on a phone) never run into the lower panel's title
    return make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=spacing,
                         subplot_titles=[panel_title(title) for title in titles])


def colour_of(text: str) -> str:
    """The colour of the strategy a table's "strategy" column names by its canonical text
    (memory.strategies.spec_of_label), a stable fallback colour for a text that names no
    strategy of the lab. Records are coloured with memory.strategies.colour."""
    spec = spec_of_label(str(text))
    return colour(spec) if spec is not None else fallback_colour(str(text))
