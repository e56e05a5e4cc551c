"""Compare strategies: one real training step per strategy, memory and time side by side."""

import streamlit as st

from demos.results import Comparison
from reports import compare_table, report
from reports.compare_figures import (
    activation_caption,
    activation_theory_figure,
    breakdown_caption,
    breakdown_figure,
    peak_and_time_figure,
)
from ui import demo_controls as controls
from ui import demo_display as display
from ui import demo_runner as runner
from ui.i18n import current_language, t

st.title(t("Compare checkpointing strategies"))
st.markdown(t(
    "Pick a model and the strategies to compare. Each strategy runs **one real training "
    "step** (forward, loss, backward) of a small GPT on this server; the numbers below are "
    "measured, with this model's prediction beside them."))


@st.fragment
def compare_demo() -> None:
    config = controls.model_controls()
    # Two strategies whose peaks differ at the default model (every-layer 11.3 vs sqrt 17.8
    # MiB): a learner sees at once that where the checkpoints go matters.
    strategies = controls.strategy_picker(default=("every-layer", "sqrt"))

    def show(comparison: Comparison) -> None:
        """Draw a result: the finished one, the previous (dimmed) or what is measured so far."""
        lang = current_language()
        results = comparison.results
        key = (config, strategies, display.fingerprint(comparison))
        display.show_refusals(results)
        display.headline(results)
        display.table(display.shared("results-table", key,
                                     lambda lang: compare_table.results_table(
                                         results, lang, comparison.device.kind)))
        display.parameters_note(comparison)
        display.peak_explanations(results)
        display.paint_numbers_first()
        display.chart("peak-time", key, lambda lang: peak_and_time_figure(results, lang))
        # Two different quantities side by side: each in its own frame under its own
        # heading, so "everything at the peak" never reads as "the activations held".
        left, right = (column.container(border=True) for column in st.columns(2))
        left.markdown(":material/stacked_bar_chart: **" + t(
            "Memory at the peak: everything the step holds then") + "**")
        display.chart("breakdown", key, lambda lang: breakdown_figure(results, lang), left)
        left.caption(breakdown_caption(results, lang))
        right.markdown(":material/layers: **" + t(
            "Activations held for backward: one part of that memory") + "**")
        display.chart("activations", key, lambda lang: activation_theory_figure(
            results, report.korthikanti(config), lang), right)
        right.caption(activation_caption(results, lang))
        display.theory_notes(config)
        display.comparison_caption(comparison)
        display.download(comparison, f"compare-{report.config_slug(config)}")
        display.download_snapshot(comparison, f"compare-{report.config_slug(config)}")

    runner.run_compare(config, strategies, show=show, predict=True)


compare_demo()
