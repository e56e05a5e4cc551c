"""What fits: the largest batch or sequence length within a memory budget, per strategy."""

import pandas as pd
import streamlit as st

from i18n import N_
from reports import fits_and_loss_tables, memory_snapshot, report
from reports.fits_and_loss_figures import fits_caption, fits_figure
from ui import demo_controls as controls
from ui import demo_display as display
from ui import demo_runner as runner
from ui import query
from ui.device_words import device_text
from ui.i18n import current_language, t

st.title(t("What fits in memory"))
st.markdown(t(
    "Pick a memory budget. For each strategy the engine **predicts** the largest batch (or "
    "sequence length) whose training step fits, then **confirms** it with a real run and "
    "times it, the same number of steps at every size. The sources advise spending the "
    "memory checkpointing frees on a larger batch. Whether that wins back time depends on "
    "the hardware: the verdict under the table says what it bought on this server."))

# When a larger batch pays on a GPU: NVIDIA's "Matrix Multiplication Background User's
# Guide" (docs.nvidia.com/deeplearning/performance) compares a GEMM's arithmetic intensity,
# 2·M·N·K FLOPs over 2·(M·K + K·N + M·N) bytes in 16-bit, with the GPU's FLOPs per byte of
# memory bandwidth; below it the GEMM waits for memory. The H100 SXM data sheet: 989 TFLOP/s
# dense bf16 (1,979 with sparsity), 3.35 TB/s. A linear layer h -> h over T tokens reaches
# T·h / (h + 2·T) FLOPs per byte: with h = 4,096 it matches the GPU's 295 at T ≈ 345.
H100_TFLOPS, H100_TBS, HIDDEN = 989, 3.35, 4096
RIDGE = H100_TFLOPS / H100_TBS  # FLOPs per byte
BUSY_TOKENS = RIDGE * HIDDEN / (HIDDEN - 2 * RIDGE)  # tokens per micro-batch


def when_a_larger_batch_pays() -> None:
    with st.expander(t("When does a larger batch win back the time?")):
        st.markdown(t(
            "On a GPU, while it is not yet busy. A GPU multiplies matrices at full speed only "
            "when each one carries enough tokens: NVIDIA's guide to matrix multiplication "
            "compares a multiply's arithmetic intensity (FLOPs per byte it moves) with the "
            "GPU's own ratio. An H100 SXM does {tflops:,} TFLOP/s in dense bf16 over {tbs} "
            "TB/s of memory, about {ridge:,.0f} FLOPs per byte; a linear layer of hidden size "
            "{hidden:,} reaches that with about {tokens:,.0f} tokens per micro-batch. Below "
            "that the GPU waits for memory, and a larger batch raises throughput almost for "
            "free, enough to win back the rerun forward. Above it the GPU is busy: a "
            "4,096-token sequence is past it at batch 1, and a larger batch then saves only "
            "the small overhead of the accumulation steps.\n\n"
            "A CPU has no such idle reserve at these sizes: its few cores are busy at small "
            "batches already, so a larger batch costs about the same CPU time per token, and "
            "checkpointing's rerun forward stays a cost. The verdict under the table compares "
            "CPU time per token, the work itself, so another learner's run does not decide it.",
            tflops=H100_TFLOPS, tbs=H100_TBS, ridge=RIDGE, hidden=HIDDEN, tokens=BUSY_TOKENS))


GROW = {"batch": N_("batch"), "seq": N_("sequence length")}


@st.fragment
def what_fits_demo() -> None:
    lo, hi, step, default = controls.budget_range()
    left, right = st.columns(2)
    with left:
        budget_mib = query.int_slider("budget", t("Memory budget (MiB, parameters included)"),
                                      lo, hi, step, default, help=controls.budget_help())
    with right:
        vary = query.choice("grow", t("Grow"), list(GROW), "batch",
                            format_func=lambda item: t(GROW[item]),
                            help=t("Which dimension to make as large as the budget allows."))
    kept = "seq" if vary == "batch" else "batch"  # the other one stays fixed
    config = controls.model_controls(("layers", "hidden", "heads", "vocab", kept, "arch"),
                                     columns=6, defaults=controls.fit_default())
    field = "batch" if vary == "batch" else "seq_len"

    def show(frame: pd.DataFrame) -> None:
        """Draw a result: the finished one, the previous (dimmed) or what is measured so far."""
        lang = current_language()
        key = (config, field, budget_mib, display.fingerprint(frame))
        display.show_fit_notes(frame, field)
        display.table(display.shared(
            "fits-table", key, lambda lang: fits_and_loss_tables.fits_table(frame, field, lang)))
        if frame["value_confirmed"].notna().any():  # no empty axes when nothing fits
            display.paint_numbers_first()
            display.chart("fits", key,
                          lambda lang: fits_figure(frame, field, budget_mib * 2**20, lang))
            display.note(fits_caption(frame, field, lang))
        verdict = display.shared("fits-verdict", key, lambda lang: (
            fits_and_loss_tables.equal_work_verdict(frame, field, lang)))
        if verdict:
            st.markdown(f"**{verdict}**")
        when_a_larger_batch_pays()
        display.measured_caption(device_text(runner.device()), list(frame["measured_by"]),
                                 fits_and_loss_tables.fits_timing_note(frame, lang))
        display.downloads(
            frame, f"what-fits-{field}-{budget_mib}MiB-{report.config_slug(config)}",
            memory_snapshot.fits_runs(frame, config),
            t("The memory snapshot holds each strategy's confirmed step, at the largest size "
              "that fit the budget; the search's other tries are not kept."))

    runner.run_fits(config, controls.FIT_STRATEGIES, field, budget_mib * 2**20, show=show)


what_fits_demo()
