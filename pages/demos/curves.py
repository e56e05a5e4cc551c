"""Memory and time curves: sweep one dimension and see how each strategy scales."""

import streamlit as st

from demos import report
from ui import demo_controls as controls
from ui import demo_curves as curves
from ui import demo_display as display
from ui import demo_runner as runner
from ui import query

st.title("Memory and time curves")
st.markdown(
    "Sweep one dimension of the model and measure every point for real. Dots are "
    "measurements, dashed lines this model's theory, on the same axes. Each point is the "
    "median of three timed steps; on a shared CPU single points can still jump."
)


@st.fragment
def curves_demo() -> None:
    name = query.choice("sweep", "Sweep", list(curves.CURVES), "depth",
                        help="\n\n".join(f"**{k}**: {c.title}" for k, c in curves.CURVES.items()))
    curve = curves.CURVES[name]
    metric = "both"  # the segment sweep draws both: the trade-off is between them
    if curve.vary != "k":
        metric = query.choice("memory", "Memory shown", list(curves.MEMORY_METRICS), "held",
                              help="held: bytes kept for backward at the end of the forward "
                                   "pass; peak: the highest point of the step, above the "
                                   "parameters.")
    fields = [f for f in ("layers", "hidden", "heads", "seq", "batch", "vocab")
              if f not in curve.fixes]
    config = controls.model_controls(fields, columns=len(fields), defaults=curve.base)
    st.markdown(f"**{curve.title}**: {curve.values_text(config)}")
    frame = runner.run_sweep(config, curve.vary, curve.values(config), curve.strategies)
    if frame is None:
        return
    st.plotly_chart(curves.curve_figure(name, frame, config, metric))
    st.markdown(curve.explanation)
    display.measured_caption(runner.device().label(), curves.methods_of(frame))
    display.download(frame, f"curves-{name}-{report.config_slug(config)}")


curves_demo()
