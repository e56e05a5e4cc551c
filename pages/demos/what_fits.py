"""What fits: the largest batch or sequence length within a memory budget, per strategy."""

import pandas as pd
import streamlit as st

from demos.reports import fits_and_loss_tables, report
from demos.reports.fits_and_loss_figures import fits_caption, fits_figure
from i18n import N_
from ui import demo_controls as controls
from ui import demo_display as display
from ui import demo_runner as runner
from ui import query
from ui.i18n import current_language, t

st.title(t("What fits in memory"))
st.markdown(t(
    "Pick a memory budget. For each strategy the engine **predicts** the largest batch (or "
    "sequence length) whose training step fits, then **confirms** it with a real run, and "
    "reports the tokens per second it reaches. This is the sources' advice in numbers: "
    "spend the memory checkpointing frees on a larger batch or longer sequences, rather "
    "than cutting the maximum length."))

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
        display.measured_caption(runner.device().label(), list(frame["measured_by"]),
                                 fits_and_loss_tables.fits_timing_note(frame, lang))
        display.download(frame, f"what-fits-{field}-{budget_mib}MiB-{report.config_slug(config)}")

    runner.run_fits(config, controls.FIT_STRATEGIES, field, budget_mib * 2**20, show=show)


what_fits_demo()
