"""The home page's live teaser: one real measurement of the default demo."""

from __future__ import annotations

import streamlit as st

from demos.results import Comparison
from i18n.units import format_bytes
from memory.strategies import StrategySpec
from reports.report import baseline_and_best
from ui.demo_controls import default_config
from ui.demo_display import (
    comparison_caption,
    compute_metric,
    gradient_metric,
    show_refusals,
    time_metric,
)
from ui.demo_runner import run_compare
from ui.i18n import babel_locale, fmt_percent, t


def home_teaser() -> None:
    """One real measurement at the default config (none against every-layer), cached after
    the first visit: the memory checkpointing saves and the time it costs, on this server.
    The memory shows as soon as it is measured, the time once the steps are timed."""
    config = default_config()
    strategies = (StrategySpec("none"), StrategySpec("every-layer"))
    if run_compare(config, strategies, show=_teaser_numbers) is None:
        return
    st.caption(t("Model: {layers} layers, hidden {hidden}, {heads} heads, {seq:,} tokens × "
                 "batch {batch}, vocabulary {vocab:,}, {dtype}.", layers=config.layers,
                 hidden=config.hidden, heads=config.heads, seq=config.seq_len,
                 batch=config.batch, vocab=config.vocab, dtype=config.dtype))


def _teaser_numbers(comparison: Comparison) -> None:
    """The teaser's numbers for a comparison, finished or measured so far."""
    base, best = baseline_and_best(comparison.results)
    if base is None or best is None:
        show_refusals(comparison.results)
        return
    saved = base.peak_bytes - best.peak_bytes
    cells = st.columns(4)
    cells[0].metric(t("Peak memory saved by checkpointing every layer"),
                    format_bytes(saved, locale=babel_locale()),
                    delta=fmt_percent(-saved / base.peak_bytes),
                    delta_color="inverse")
    time_metric(cells[1], best, base)
    compute_metric(cells[2], best, base)
    gradient_metric(cells[3], best)
    comparison_caption(comparison)
