"""Compare strategies: one real training step per strategy, memory and time side by side."""

import streamlit as st

from demos import report
from demos.figures import activation_theory_figure, breakdown_figure, peak_and_time_figure
from ui import demo_controls as controls
from ui import demo_display as display
from ui import demo_runner as runner

st.title("Compare checkpointing strategies")
st.markdown(
    "Pick a model and the strategies to compare. Each strategy runs **one real training "
    "step** (forward, loss, backward) of a small GPT on this server; the numbers below are "
    "measured, with this model's prediction beside them."
)


@st.fragment
def compare_demo() -> None:
    config = controls.model_controls()
    strategies = controls.strategy_picker(default=("every-layer",))
    comparison = runner.run_compare(config, strategies)
    if comparison is None:
        return
    display.show_refusals(comparison.results)
    display.headline(comparison.results)
    st.table(report.results_table(comparison.results), hide_index=True, border="horizontal")
    display.parameters_note(comparison)
    display.paint_numbers_first()
    st.plotly_chart(peak_and_time_figure(comparison.results))
    left, right = st.columns(2)
    left.plotly_chart(breakdown_figure(comparison.results))
    right.plotly_chart(activation_theory_figure(comparison.results, report.korthikanti(config)))
    display.theory_notes(config)
    display.comparison_caption(comparison)
    display.download(comparison.to_frame(), f"compare-{report.config_slug(config)}")


compare_demo()
