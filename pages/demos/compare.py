"""Compare strategies: one real training step per strategy, memory and time side by side."""

import streamlit as st

from demos.figures import activation_theory_figure, breakdown_figure, peak_and_time_figure
from ui import demo_runner as demo

st.title("Compare checkpointing strategies")
st.markdown(
    "Pick a model and the strategies to compare. Each strategy runs **one real training "
    "step** (forward, loss, backward) of a small GPT on this server; the numbers below are "
    "measured, with this model's prediction beside them."
)


@st.fragment
def compare_demo() -> None:
    config = demo.model_controls()
    strategies = demo.strategy_picker(default=("every-layer",))
    comparison = demo.run_compare(config, strategies)
    if comparison is None:
        return
    demo.show_refusals(comparison.results)
    demo.headline(comparison.results)
    st.table(demo.results_table(comparison.results), hide_index=True, border="horizontal")
    demo.paint_numbers_first()
    st.plotly_chart(peak_and_time_figure(comparison.results))
    left, right = st.columns(2)
    left.plotly_chart(breakdown_figure(comparison.results))
    right.plotly_chart(activation_theory_figure(comparison.results, demo.korthikanti(config)))
    demo.theory_notes(config)
    demo.comparison_caption(comparison)
    demo.download(comparison.to_frame(), f"compare-{demo.config_slug(config)}")


compare_demo()
