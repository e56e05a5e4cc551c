"""Same result: train the tiny model with and without checkpointing; the losses match."""

import pandas as pd
import streamlit as st

from i18n import N_
from reports import fits_and_loss_tables, memory_snapshot, report
from reports.fits_and_loss_figures import loss_caption, loss_figure
from ui import demo_controls as controls
from ui import demo_display as display
from ui import demo_runner as runner
from ui import query
from ui.device_words import device_text
from ui.i18n import current_language, fmt_decimal, t

st.title(t("Same result with checkpointing"))
st.markdown(t(
    "Checkpointing changes **when** activations are computed, not **what** is computed. "
    "Here the tiny model trains for real on a synthetic next-token task, once per strategy, "
    "from the same weights and data. Turn dropout on to check that the random dropout masks "
    "are replayed exactly in the recomputation (PyTorch saves and restores the RNG state). "
    "How much memory each strategy saves is on *Compare strategies*."))


@st.fragment
def same_result_demo() -> None:
    left, right = st.columns(2)
    with left:
        steps = query.int_slider("steps", t("Training steps"), 20, 100, 10, 40)
    with right:
        dropout = query.float_slider("dropout", t("Dropout"), 0.0, 0.5, 0.05, 0.1,
                                     help=t("Random masks in training: recomputation must "
                                            "draw the same ones."))
    config = controls.model_controls(("layers", "hidden", "seq", "batch", "arch"),
                                     defaults=controls.TRAINING_DEFAULT, dropout=dropout)
    strategies = controls.strategy_picker(default=("every-layer", "selective:save-matmuls"),
                                          label=t("Strategies to train beside no checkpointing"))

    def show(losses: pd.DataFrame) -> None:
        """Draw a result: the finished one, the previous (dimmed) or what is measured so far."""
        lang = current_language()
        key = (config, strategies, steps, display.fingerprint(losses))
        differences = display.shared("loss-differences", key,
                                     lambda lang: fits_and_loss_tables.loss_differences(losses))
        largest = float(differences["largest"].max()) if len(differences) else 0.0
        display.table(display.shared(
            "loss-table", key, lambda lang: fits_and_loss_tables.loss_table(differences, lang)))
        display.paint_numbers_first()
        display.chart("loss", key, lambda lang: loss_figure(losses, lang))
        display.note(loss_caption(largest, lang))
        display.measured_caption(device_text(runner.device()), [N_("training for real")],
                                 t("{steps} steps, dropout {dropout}.", steps=steps,
                                   dropout=fmt_decimal(dropout)))
        display.downloads(
            losses, f"same-result-{report.config_slug(config)}-{steps}steps",
            memory_snapshot.training_runs(losses, config),
            t("The memory snapshot holds each strategy's first training step (forward, loss "
              "and backward; the optimizer's update after it is not tracked); the later "
              "steps repeat it on other data and are not kept."))

    runner.run_training(config, strategies, steps, show=show)


same_result_demo()
