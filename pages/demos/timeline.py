"""Memory timeline: live bytes after every op of one training step."""

import streamlit as st

from demos import report
from demos.figures import timeline_figure, timeline_frame
from ui import demo_controls as controls
from ui import demo_display as display
from ui import demo_runner as runner
from ui import query

st.title("Memory over one training step")
st.markdown(
    "Live tensor bytes after **every op** of one real training step. Without checkpointing "
    "memory climbs through the forward pass, spikes at the loss (the logits and their "
    "gradient) and falls through backward. With checkpointing the climb is flatter, and "
    "backward shows a **sawtooth**: each layer is recomputed (orange band, R) just before "
    "its backward (green band, B). Hover a line to see the op and the layer."
)


@st.fragment
def timeline_demo() -> None:
    config = controls.model_controls(defaults=controls.default_config().replace(layers=4))
    strategies = controls.strategy_picker(
        default=("every-layer", "sqrt", "selective:save-matmuls"),
        label="Strategies to draw beside none")
    layout = query.choice("view", "Layout", ["faceted", "overlaid"], "faceted")
    comparison = runner.run_compare(config, strategies, timeline=True, time_steps=False)
    if comparison is None:
        return
    display.show_refusals(comparison.results)
    frame = timeline_frame({r.strategy: r.timeline for r in comparison.results
                            if r.fits and r.timeline})
    st.plotly_chart(timeline_figure(frame, facet=layout == "faceted"))
    display.peak_summary(comparison.results)
    display.comparison_caption(comparison)
    display.download(frame, f"timeline-{report.config_slug(config)}")


timeline_demo()
