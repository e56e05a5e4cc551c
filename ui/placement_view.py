"""The /placement page's pieces: its controls bound to the URL (ui.query: the layers'
widths, their number, the budget as a share of the plain step's peak), and every placement
method's run drawn from what the demo service measured (serving.placement_jobs): the chart
of recompute against peak with the optimal frontier and the budget (reports.
placement_figures), what each method pays beside the optimum, the table, the caption."""

from __future__ import annotations

import streamlit as st

from demos.placement_lab import PlacementRun
from i18n import N_
from memory.lab_chain import SHAPES
from reports import placement_figures as figures
from serving import placement_jobs
from serving.jobs import Job
from ui import demo_display as display
from ui import demo_runner as runner
from ui import query
from ui.device_words import device_text
from ui.i18n import current_language, t

SHAPE_LABELS = {
    "equal": N_("equal: every MLP 4h wide"),
    "unequal": N_("unequal: a 16h first block, then 2h and 6h in turn"),
}


def controls() -> Job:
    """The run the widgets ask for (each bound to the URL)."""
    shape = query.choice(
        "shape",
        t("Layer widths"),
        list(SHAPES),
        placement_jobs.DEFAULT_SHAPE,
        format_func=lambda key: t(SHAPE_LABELS[key]),
        help=t(
            "The lab's GPT model with each layer's MLP as wide as this says (h is the hidden "
            "size). With equal layers √N segments are close to the best; with unequal ones "
            "the methods part ways."
        ),
    )
    left, right = st.columns(2)
    with left:
        low, high = placement_jobs.LAYERS
        layers = query.int_slider(
            "layers",
            t("Layers"),
            low,
            high,
            1,
            placement_jobs.BASE.layers,
            help=t("Transformer blocks: activation memory grows with each one."),
            where=t("on this page"),
        )
    with right:
        low, high, step = placement_jobs.BUDGETS
        share = query.int_slider(
            "share",
            t("Budget, percent of the peak without checkpointing"),
            low,
            high,
            step,
            placement_jobs.DEFAULT_BUDGET,
            help=t(
                "The most the step may hold above the parameters, as a share of what it "
                "peaks at without checkpointing. The optimal, greedy and first-k placements "
                "read it; √N, every layer and no checkpointing ignore it."
            ),
        )
    config = placement_jobs.BASE.replace(layers=layers)
    return Job.make("placement", config, (), **placement_jobs.options(shape, share))


def show(result: PlacementRun) -> None:
    """One run of every method: the chart, what each pays against the optimum, the table."""
    lang = current_language()
    cfg = result.config
    st.caption(
        t(
            "The model: {layers} GPT layers, hidden size {hidden}, {seq} tokens × batch "
            "{batch}, vocabulary {vocab}; the layers' MLP widths: {widths}.",
            layers=cfg.layers,
            hidden=cfg.hidden,
            seq=cfg.seq_len,
            batch=cfg.batch,
            vocab=cfg.vocab,
            widths=figures.widths_text(result),
        )
    )
    key = ("placement", repr(result.to_json()))
    display.chart("placement", key, lambda lang: figures.placement_figure(result, lang))
    display.note(figures.figure_caption(lang))
    st.markdown("\n".join(f"- {line}" for line in figures.comparison_lines(result, lang)))
    display.table(figures.placement_table(result, lang))
    st.caption(
        t(
            "Checkpointed segments: 5 is layer 5 checkpointed alone, 0–2 layers 0 to 2 "
            "rebuilt together from layer 0's input. Peaks above the parameters, to 0.1 KiB."
        )
    )
    st.caption(figures.timing_caption(result, lang))
    display.measured_caption(
        device_text(runner.device()),
        [N_("live-tensor tracker (TorchDispatchMode)"), N_("torch's FlopCounterMode")],
    )


def demo() -> None:
    """The page below its introduction."""
    runner.run_placement(controls(), show=show)
