"""Same result: train the tiny model with and without checkpointing; the losses match."""

import streamlit as st

from demos import report
from demos.figures import loss_figure
from ui import demo_controls as controls
from ui import demo_display as display
from ui import demo_runner as runner
from ui import query

st.title("Same result, less memory")
st.markdown(
    "Checkpointing changes **when** activations are computed, not **what** is computed. "
    "Here the tiny model trains for real on a synthetic next-token task, once per strategy, "
    "from the same weights and data. Turn dropout on to check that the random dropout masks "
    "are replayed exactly in the recomputation (PyTorch saves and restores the RNG state)."
)


@st.fragment
def same_result_demo() -> None:
    left, right = st.columns(2)
    with left:
        steps = query.int_slider("steps", "Training steps", 20, 100, 10, 40)
    with right:
        dropout = query.float_slider("dropout", "Dropout", 0.0, 0.5, 0.05, 0.1,
                                     help="Random masks in training: recomputation must "
                                          "draw the same ones.")
    config = controls.model_controls(("layers", "hidden", "seq", "batch"),
                                     defaults=controls.TRAINING_DEFAULT, dropout=dropout)
    strategies = controls.strategy_picker(default=("every-layer", "selective:save-matmuls"),
                                          label="Strategies to train beside none")
    losses = runner.run_training(config, strategies, steps)
    if losses is None:
        return
    differences = report.loss_differences(losses)
    largest = float(differences["largest loss difference"].max()) if len(differences) else 0.0
    st.plotly_chart(loss_figure(losses, largest))
    st.table(report.loss_table(differences), hide_index=True, border="horizontal")
    display.measured_caption(runner.device().label(), ["training for real"],
                             f"{steps} steps, dropout {dropout:g}.")
    display.download(losses, f"same-result-{report.config_slug(config)}-{steps}steps")


same_result_demo()
