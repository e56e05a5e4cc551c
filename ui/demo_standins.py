"""What a demo page shows in place of a result while it is measured (ui.demo_runner draws
them): the memory model's predicted peaks of a comparison, drawn the moment a new config
is asked for and marked as predicted, and the caption over the numbers measured so far.

A predicted number never reads as measured: it stands in its own frame (keyed
"demo-predicted-<turn>", which the browser benchmark finds), each metric says "predicted —
measuring…", and none of the page's "measured" captions or tables draws it. The measured
numbers replace the whole frame when they land.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from demos.results import Comparison
from i18n import N_
from i18n.units import MISSING, format_bytes
from memory.strategies import title as strategy_title
from reports.compare_table import predicted_peaks
from serving.jobs import Job
from ui.i18n import babel_locale, current_language, t

PREDICTED_DELTA = N_("predicted — measuring…")  # under each predicted number
PREDICTED_COLUMNS = 4  # metrics per row: a phone stacks them, a laptop reads a row
PREDICTED_HELP = N_(
    "This model's prediction from its shapes alone (the course's memory model, "
    "the same one the chart 'Activations held: measured vs predicted' shows), "
    "counted above the parameters. The measurement of this run replaces it "
    "as soon as it lands."
)


def show_prediction(job: Job, device_kind: str, turn: int) -> None:
    """The predicted peak memory of each strategy of a comparison `job` on `device_kind`,
    marked as predicted; `turn` tells apart the frames one script run draws."""
    lang, loc = current_language(), babel_locale()
    peaks = predicted_peaks(job.config, job.strategies, device_kind)
    with st.container(key=f"demo-predicted-{turn}", border=True):
        st.caption(
            ":material/calculate: "
            + t(
                "Predicted by the course's memory model: the run of this configuration is "
                "under way, and its measurement replaces each number as soon as it lands."
            )
        )
        for start in range(0, len(peaks), PREDICTED_COLUMNS):
            cells = st.columns(PREDICTED_COLUMNS)
            for cell, (spec, peak) in zip(
                cells, peaks[start : start + PREDICTED_COLUMNS], strict=False
            ):
                cell.metric(
                    t("Peak memory: {strategy}", strategy=strategy_title(spec, lang)),
                    format_bytes(peak, locale=loc) if peak is not None else MISSING,
                    delta=t(PREDICTED_DELTA) if peak is not None else t("does not fit"),
                    delta_color="off",
                    delta_arrow="off",
                    help=t(PREDICTED_HELP),
                )


def partial_caption(job: Job, partial: Any) -> str:
    """What the numbers measured so far are: a comparison's memory (its times filling in),
    a sweep's points so far."""
    if isinstance(partial, Comparison):
        done = max((len(r.step_seconds_runs) for r in partial.results), default=0)
        total = int(job.option("repeats", 0))
        if done == 0:
            return t(
                "Memory measured. Timing the steps now: the times fill in as the repeats come in."
            )
        return t(
            "Memory measured; times from {done} of {total} repeats so far (their ranges "
            "narrow as more come in).",
            done=done,
            total=total,
        )
    if isinstance(partial, pd.DataFrame) and job.kind == "sweep":
        return t(
            "{done} of {total} points measured so far.",
            done=partial["value"].nunique(),
            total=job.step_count(),
        )
    return t("Measured so far:")
