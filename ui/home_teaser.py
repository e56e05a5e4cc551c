"""The home page's live teaser: one real measurement of the default demo."""

from __future__ import annotations

import streamlit as st

from demos.report import baseline_and_best
from demos.units import format_bytes, format_ms
from ui.demo_controls import default_config
from ui.demo_display import comparison_caption, gradient_metric, show_refusals
from ui.demo_runner import run_compare


def home_teaser() -> None:
    """One real measurement at the default config (none against every-layer), cached after
    the first visit: the memory checkpointing saves and the time it costs, on this server."""
    config = default_config()
    comparison = run_compare(config, ("none", "every-layer"))
    if comparison is None:
        return
    base, best = baseline_and_best(comparison.results)
    if base is None or best is None:
        show_refusals(comparison.results)
        return
    saved = base.peak_bytes - best.peak_bytes
    cells = st.columns(3)
    cells[0].metric("Peak memory saved by checkpointing every layer", format_bytes(saved),
                    delta=f"{-saved / base.peak_bytes:+.0%}", delta_color="inverse")
    if best.step_seconds and base.step_seconds:
        ratio = best.step_seconds / base.step_seconds
        cells[1].metric("Time it costs per step",
                        format_ms(best.step_seconds - base.step_seconds),
                        delta=f"{ratio - 1:+.0%}", delta_color="inverse")
    gradient_metric(cells[2], best)
    comparison_caption(comparison)
    st.caption(f"Model: {config.layers} layers, hidden {config.hidden}, {config.heads} heads, "
               f"{config.seq_len} tokens × batch {config.batch}, vocabulary {config.vocab}, "
               f"{config.dtype}.")
