"""Memory timeline: live bytes after every op of one training step."""

import streamlit as st

from demos.results import Comparison
from i18n import N_
from reports import compare_table, report
from reports.timeline_figures import timeline_figure, timeline_frame
from ui import demo_controls as controls
from ui import demo_display as display
from ui import demo_runner as runner
from ui import query
from ui.i18n import t

st.title(t("Memory over one training step"))
st.markdown(t(
    "Live tensor bytes after **every op** of one real training step. Without checkpointing "
    "memory climbs through the forward pass and falls through backward. With checkpointing "
    "the climb is flat, and backward shows a **sawtooth**: each layer is recomputed (orange "
    "band, R) just before its backward (green band, B). A star marks each strategy's peak "
    "and names the op there; hover a line to see every op and its layer."))

# Three timed rounds (fewer than Compare's, no adaptive extension): the wall and CPU time
# of each strategy cost about as much again as the tracked steps (memory.theory's estimate).
TIMELINE_REPEATS = 3
LAYOUTS = {"faceted": N_("one panel per strategy"), "overlaid": N_("all on one axis")}


@st.fragment
def timeline_demo() -> None:
    config = controls.model_controls()
    strategies = controls.strategy_picker(
        default=("every-layer", "sqrt", "selective:save-matmuls"),
        label=t("Strategies to draw beside no checkpointing"))
    layout = query.choice("view", t("Layout"), list(LAYOUTS), "faceted",
                          format_func=lambda item: t(LAYOUTS[item]))

    def show(comparison: Comparison) -> None:
        """Draw a result: the finished one, the previous (dimmed) or what is measured so far."""
        display.show_refusals(comparison.results)
        display.peak_explanations(comparison.results)
        key = (config, strategies, display.fingerprint(comparison))
        frame = display.shared("timeline-frame", key, lambda lang: timeline_frame(
            {r.spec: r.timeline for r in comparison.results if r.fits and r.timeline}, lang))
        display.chart("timeline", (*key, layout),
                      lambda lang: timeline_figure(frame, facet=layout == "faceted", lang=lang))
        # What the checkpointing drawn above costs: counted compute, wall and CPU time.
        display.table(display.shared("cost-table", key, lambda lang: compare_table.cost_table(
            comparison.results, lang, comparison.device.kind, display.uncounted_text(lang))))
        display.comparison_caption(comparison)
        display.download(frame, f"timeline-{report.config_slug(config)}")
        display.download_snapshot(comparison, f"timeline-{report.config_slug(config)}")

    # The memory first (the tracked steps draw the timeline), then TIMELINE_REPEATS rounds of
    # timed steps, strategies interleaved as on Compare: the times fill in as they come.
    runner.run_compare(config, strategies, timeline=True, repeats=TIMELINE_REPEATS, show=show)


timeline_demo()
