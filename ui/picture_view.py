"""The /pictures page's pieces: its controls bound to the URL (ui.query), and one tiny
image model's step drawn from what the demo service measured (demos.picture_models, run
through serving.picture_jobs): the code a practitioner writes, what each block saves for
backward with and without checkpointing, the peak, the counted FLOPs and the times, and
the same as the image grows."""

from __future__ import annotations

from typing import Any

import streamlit as st

from demos.mistake_records import CASE_CONFIG
from demos.picture_models import PictureRun, from_frame
from demos.picture_settings import (
    BATCHES,
    FAMILIES,
    INTERVALS,
    LORA_RANK,
    SIZES,
    STRATEGIES,
    PictureSetup,
    code,
)
from i18n import N_
from i18n.units import format_bytes
from reports import picture_figures as figures
from reports import timing
from serving import picture_jobs
from serving.jobs import Job
from ui import demo_display as display
from ui import demo_runner as runner
from ui import query
from ui.device_words import device_text
from ui.i18n import babel_locale, current_language, fmt_percent, t

DEFAULT = PictureSetup()
CHECKPOINTING = {"none": N_("off"), "every-layer": N_("every block (the library's switch)"),
                 "every-n": N_("one block in n")}
TRAINING = {"full": N_("full fine-tuning"), "lora": N_("LoRA r=4 on the attention")}


def controls() -> PictureSetup:
    """The setup the sliders and choices ask for (each bound to the URL)."""
    family = query.choice("family", t("Model family"), list(FAMILIES), DEFAULT.family,
                          format_func=lambda key: t(FAMILIES[key].label))
    left, right = st.columns(2)
    with left:
        size = query.int_slider("size", t("Image side (pixels)"), SIZES[0], SIZES[-1],
                                SIZES[1] - SIZES[0], DEFAULT.size,
                                help=t("A square image of this side; the diffusion models "
                                       "train on its latents, an eighth of the side."))
    with right:
        batch = query.int_slider("batch", t("Batch"), BATCHES[0], BATCHES[1], 1,
                                 DEFAULT.batch)
    left, right = st.columns(2)
    with left:
        strategy = query.choice("ckpt", t("Checkpointing"), list(STRATEGIES),
                                DEFAULT.strategy,
                                format_func=lambda key: t(CHECKPOINTING[key]))
    with right:
        tuning = query.choice("tuning", t("Training"), list(TRAINING), "full",
                              format_func=lambda key: t(TRAINING[key]))
    n = DEFAULT.n
    if strategy == "every-n":
        n = query.int_slider("n", t("Checkpoint one block in n"), INTERVALS[0], INTERVALS[1],
                             1, DEFAULT.n,
                             help=t("Blocks 0, n, 2n, … are checkpointed, the others keep "
                                    "their activations: SimpleTuner's checkpointing "
                                    "interval, transformers' every_n_layers."))
    return PictureSetup(family, size, batch, strategy, n,
                        LORA_RANK if tuning == "lora" else 0)


def _job(setup: PictureSetup, part: str) -> Job:
    return Job.make("pictures", CASE_CONFIG, (), **picture_jobs.options(setup, part))


def _runs(setup: PictureSetup, part: str) -> list[PictureRun] | None:
    frame = runner.run_pictures(_job(setup, part))
    return None if frame is None else from_frame(frame)


def describe(setup: PictureSetup) -> str:
    fam = FAMILIES[setup.family]
    return t("The class {cls}, built from a small config of this family's shape with random "
             "weights (nothing downloaded), trained one step on {batch} × {size} × {size} "
             "pixels.", cls=fam.library_class, batch=setup.batch, size=setup.size)


def _metrics(runs: list[PictureRun]) -> None:
    base = next((r for r in runs if r.strategy == "none"), None)
    loc = babel_locale()
    cells = st.columns(2 * len(runs))
    for i, run in enumerate(runs):
        name = figures.run_name(run, current_language())
        if not run.fits:
            cells[2 * i].metric(name, t("out of memory"))
            continue
        share = None
        if base is not None and run is not base and base.total and base.peak_bytes:
            share = t("{share} of no checkpointing", share=fmt_percent(run.total / base.total))
        cells[2 * i].metric(t("Saved for backward, {name}", name=name),
                            format_bytes(run.total, locale=loc), share, delta_color="off",
                            delta_arrow="off")
        peak_share = None
        if share is not None and run.peak_bytes:
            peak_share = t("{share} of no checkpointing",
                           share=fmt_percent(run.peak_bytes / base.peak_bytes))  # type: ignore[union-attr]
        cells[2 * i + 1].metric(t("Peak, {name}", name=name),
                                format_bytes(run.peak_bytes or 0, locale=loc), peak_share,
                                delta_color="off", delta_arrow="off")


def show_memory(setup: PictureSetup, runs: list[PictureRun]) -> None:
    lang = current_language()
    key = ("pictures-blocks", setup, repr([(r.strategy, r.per_block, r.peak_bytes)
                                           for r in runs]))
    _metrics(runs)
    display.note(figures.memory_sentence(runs, lang))
    display.chart("picture-blocks", key, lambda lang: figures.block_figure(runs, lang))
    st.caption(t("Each bar is one block diffusers or transformers checkpoints (a UNet's "
                 "resnets and transformer blocks, a transformer's blocks), in the order the "
                 "forward runs them; the last group is what no block holds. A checkpointed "
                 "block keeps only what it is handed."))
    display.note(figures.level_sentence(runs, lang))
    with st.expander(t("What stays outside the checkpointed blocks")):
        display.table(figures.outside_table(runs, lang))
    info = runner.device()
    display.measured_caption(
        device_text(info), [N_("saved-tensor hooks (each storage once, parameters apart)"),
                            N_("live-tensor tracker (TorchDispatchMode)")],
        describe(setup))
    events = [(figures.run_name(r, lang), r.memory_events) for r in runs]
    display.snapshot_button(events, runs[0].parameter_bytes, f"pictures-{setup.family}",
                            (setup, "memory"))


def show_costs(runs: list[PictureRun]) -> None:
    lang = current_language()
    kind = runner.device().kind
    display.table(figures.cost_table(runs, lang, kind))
    display.note(timing.wall_cpu_note(runs, False, lang))  # type: ignore[arg-type]
    st.caption(t("The verdict rests on CPU time on a CPU and on the FLOPs torch counted on a "
                 "GPU: wall time is shown with its spread, and it grows with other "
                 "learners' runs on this server."))


def show_sweep(runs: list[PictureRun]) -> None:
    lang = current_language()
    key = ("pictures-sweep", repr([(r.size, r.strategy, r.total) for r in runs]))
    display.chart("picture-sweep", key, lambda lang: figures.sweep_figure(runs, lang))
    st.caption(t("Measured per image (batch 1), forward and loss only: what autograd "
                 "saves is known when the loss is. The dashed lines grow the smallest image's "
                 "bytes as {what} grows: doubling the side makes it four times larger; an "
                 "attention that kept its scores would grow with its square again.",
                 what=figures.growth_words(runs[0].family, lang)))
    display.table(figures.sweep_table(runs, lang))


def show(setup: PictureSetup) -> Any:
    """The page below the controls."""
    st.code(code(setup), language="python")
    st.subheader(t("Memory of one step"))
    memory = _runs(setup, "memory")
    if memory:
        show_memory(setup, memory)
    st.subheader(t("What it costs"))
    costs = _runs(setup, "time")
    if costs:
        show_costs(costs)
    st.subheader(t("As the image grows"))
    sweep = _runs(setup, "sweep")
    if sweep:
        show_sweep(sweep)
    return memory
