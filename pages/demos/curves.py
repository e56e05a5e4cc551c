"""Memory and time curves: sweep one dimension and see how each strategy scales."""

import pandas as pd
import streamlit as st

from reports import memory_snapshot, report
from ui import demo_controls as controls
from ui import demo_curves as curves
from ui import demo_display as display
from ui import demo_runner as runner
from ui import query
from ui.device_words import device_text
from ui.i18n import current_language, t

st.title(t("Memory and time curves"))
st.markdown(t(
    "Sweep one dimension of the model and measure every point for real. Dots are "
    "measurements, dashed lines this model's theory, on the same axes. Each point is the "
    "median of three timed steps; on a shared CPU single points can still jump."))


@st.fragment
def curves_demo() -> None:
    name = query.choice("sweep", t("Sweep"), list(curves.CURVES), "depth",
                        format_func=lambda k: t(curves.CURVES[k].title),
                        help="\n\n".join(f"**{t(c.title)}**: {t(c.explanation)}"
                                         for c in curves.CURVES.values()))
    curve = curves.CURVES[name]
    metric = "both"  # the segment sweep draws both: the trade-off is between them
    if curve.vary != "k":
        metric = query.choice("memory", t("Memory shown"), list(curves.MEMORY_METRICS), "held",
                              format_func=lambda k: t(curves.MEMORY_METRICS[k][3]),
                              help=t("held for backward: bytes kept for backward at the end of "
                                     "the forward pass; peak: the highest point of the step, "
                                     "above the parameters."))
    fields = [f for f in ("layers", "hidden", "heads", "seq", "batch", "vocab", "arch")
              if f not in curve.fixes]
    config = controls.model_controls(fields, columns=len(fields), defaults=curve.base)
    lang = current_language()
    st.markdown(f"**{t(curve.title)}**: {curve.values_text(config, lang)}")

    def show(frame: pd.DataFrame) -> None:
        """Draw a result: the finished one, the previous (dimmed) or what is measured so far."""
        display.chart("curves", (name, metric, config, display.fingerprint(frame)),
                      lambda lang: curves.curve_figure(name, frame, config, metric, lang))
        display.note(curves.curve_caption(name, frame, config, lang))
        st.markdown(t(curve.explanation))
        display.measured_caption(device_text(runner.device()), curves.methods_of(frame))
        display.downloads(
            frame, f"curves-{name}-{report.config_slug(config)}",
            memory_snapshot.sweep_runs(frame, config, curve.vary),
            t("The memory snapshot holds one tracked step per strategy, at the largest "
              "value it ran in this sweep; the steps at the other values are not kept, so "
              "that a stored sweep stays small."))

    runner.run_sweep(config, curve.vary, curve.values(config), curve.strategies, show=show)


curves_demo()
