"""The Streamlit pieces that show a demo's results.

The headline metrics, the per-strategy peaks, the refusals explained, the "measured on
<device> by <method>" caption, the CSV download, the theory notes, and the pause that
lets the numbers reach the screen before the charts. The tables and strings they show
come from demos.report.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from demos.config import ModelConfig
from demos.report import baseline_and_best, gradient_badge, gradient_match, timing_note
from demos.results import Comparison, StrategyResult
from demos.units import format_bytes, format_ms
from ui.demo_runner import device

NUMBERS_FIRST_PAUSE_S = 0.3


def headline(results: Sequence[StrategyResult]) -> None:
    """Three numbers: the most memory a strategy saved, what it cost in time, and whether
    its gradients match the baseline's."""
    base, best = baseline_and_best(results)
    if base is not None and len(results) == 1:  # the learner cleared every strategy
        st.info("Only the baseline (none) was measured: pick a strategy above to compare "
                "with it.", icon=":material/arrow_upward:")
    if base is None or best is None:
        return
    saved = 1 - best.peak_bytes / base.peak_bytes
    cells = st.columns(3)
    change = f"{-saved:+.0%}"
    if change in ("+0%", "-0%"):  # a tiny model: no saving worth a signed percentage
        cells[0].metric(f"Peak memory with {best.label}", format_bytes(best.peak_bytes),
                        delta=f"same as none ({format_bytes(base.peak_bytes)})",
                        delta_color="off", delta_arrow="off", help=PEAK_HELP)
    else:
        cells[0].metric(f"Peak memory with {best.label}", format_bytes(best.peak_bytes),
                        delta=f"{change} vs none ({format_bytes(base.peak_bytes)})",
                        delta_color="inverse", help=PEAK_HELP)
    if best.step_seconds and base.step_seconds:
        ratio = best.step_seconds / base.step_seconds
        cells[1].metric(f"Step time with {best.label}", format_ms(best.step_seconds),
                        delta=f"{ratio - 1:+.0%} vs none ({format_ms(base.step_seconds)})",
                        delta_color="inverse")
    gradient_metric(cells[2], best)


PEAK_HELP = ("The highest point of the step, counted above the parameters, which every "
             "strategy holds alike (the stacked chart 'What the memory holds at the peak' "
             "adds them back).")


def parameters_note(comparison: Comparison) -> None:
    """Say what "peak memory" leaves out, so it squares with the stacked chart."""
    if comparison.parameter_bytes:
        st.caption(f"Peak memory and activations are counted above the parameters "
                   f"({format_bytes(comparison.parameter_bytes)} here, the same for every "
                   "strategy); the stacked chart below adds them back.")


def gradient_metric(cell: DeltaGenerator, result: StrategyResult) -> None:
    """The 'Gradients vs none' metric: the short badge, the full verdict on hover."""
    cell.metric("Gradients vs none", gradient_badge(result), help=gradient_match(result))


def peak_summary(results: Sequence[StrategyResult]) -> None:
    """One line per strategy: its peak and where in the step it happened."""
    lines = []
    for r in results:
        if not r.fits or not r.timeline:
            continue
        top = max(r.timeline, key=lambda p: p.live_bytes)
        where = f"{top.phase}" + (f", layer {top.layer}" if top.layer is not None else "")
        lines.append(f"- **{r.label}**: peak {format_bytes(top.live_bytes)} at op {top.index} "
                     f"(`{top.op}`, {where})")
    if lines:
        st.markdown("\n".join(lines))


def show_refusals(results: Sequence[StrategyResult]) -> None:
    """Explain each strategy that did not fit (OOM or guard refusal)."""
    for result in results:
        if not result.fits:
            st.warning(f"**{result.label}** does not fit: {result.error}",
                       icon=":material/memory:")


def show_fit_notes(frame: pd.DataFrame, field: str) -> None:
    """Say why a strategy has no confirmed size (nothing fits, or the real run was over
    the budget), instead of leaving its row and bars blank."""
    name = "batch" if field == "batch" else "sequence length"
    missing = frame[frame["value_confirmed"].isna()]
    if missing.empty:
        return
    if len(missing) == len(frame):
        st.warning(f"Nothing fits: not even the smallest {name} trains within this budget with "
                   "any strategy. Raise the budget or make the model smaller.",
                   icon=":material/block:")
    for row in missing.itertuples():
        note = str(row.note or "no size fits the budget").replace("seq_len=", "seq=")
        st.caption(f":material/block: **{row.strategy}**: {note}.")


def measured_caption(device_label: str, methods: Sequence[str], extra: str = "") -> None:
    """'Measured on CPU (...) by <method>' under every demo."""
    # A strategy that did not run has no method (None, or NaN in a frame): skip it.
    unique = ", ".join(dict.fromkeys(m for m in methods if isinstance(m, str) and m)
                       ) or "the engine"
    st.caption(f":material/science: Measured on this run on **{device_label}** by {unique}."
               + (f" {extra}" if extra else ""))


def comparison_caption(comparison: Comparison) -> None:
    methods = [r.measured_by for r in comparison.results]
    measured_caption(comparison.device.label(), methods, timing_note(comparison.results))


def paint_numbers_first() -> None:
    """Call between a demo's numbers and its charts.

    The browser draws the elements of a script run that arrive together in one go, and
    on a session's first chart Plotly's library has to load (about a second on a small
    CPU), holding the whole batch back: the numbers would wait for the charts. A short
    pause, once per session, lets the numbers reach the screen first (measured on this
    2-core machine: first numbers of a page load ~3.3 s -> ~2.1 s, charts unchanged).
    Later runs draw the charts with the library already loaded, so they skip the pause."""
    if not st.session_state.get("_charts_drawn"):
        st.session_state["_charts_drawn"] = True
        time.sleep(NUMBERS_FIRST_PAUSE_S)


def download(frame: pd.DataFrame, name: str, label: str = "Download the results (CSV)") -> None:
    st.download_button(label, frame.to_csv(index=False).encode(), file_name=f"{name}.csv",
                       mime="text/csv", on_click="ignore", icon=":material/download:",
                       key=f"download-{name}")


def theory_notes(config: ModelConfig) -> None:
    """Why this model's measured bytes differ from the published formula."""
    from demos.theory import explain_differences

    with st.expander("Why the measurement differs from Korthikanti et al.'s 34·s·b·h"):
        st.markdown(explain_differences(config, device().kind))
