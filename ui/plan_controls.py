"""The planner page's pieces that language and image plans share: the URL-bound
controls of the training (precision, optimizer, fine-tuning, LoRA rank and targets, the
GPUs you have), the GPU and the share of it kept free, the notice shown while a model's
class is measured in its own process, the words of a measurement that failed, and the
recommendation's headline box. ui.plan_view and ui.plan_picture_view lay them out."""

from __future__ import annotations

import time

import streamlit as st

from i18n import units
from memory import footprint as P
from memory import hardware
from memory.hardware import GPUS
from model_classes.causal_lm_config import ClassConfigError
from planner import class_worker
from ui import query
from ui.i18n import babel_locale, t
from ui.plan_words import CLASS_PROBLEMS, GiB, gib, word

DEFAULT_GPU = "a10"
HEADROOM_RANGE = (0, 30, 1)  # percent of the GPU kept free
RANKS = ["4", "8", "16", "32", "64", "128"]
SHARDS = ["1", "2", "4", "8", "16", "32", "64"]


def precision_control() -> str:
    return query.choice("precision", t("Precision"), P.PRECISION_KEYS, "mixed",
                        format_func=word)


def optimizer_control() -> str:
    return query.choice("optim", t("Optimizer"), P.OPTIMIZER_KEYS, "adamw", format_func=word)


def tuning_control(options: tuple[str, ...] = P.TUNINGS) -> str:
    return query.choice("tuning", t("Fine-tuning"), options, "lora", format_func=word)


def rank_control() -> int:
    return int(query.choice("rank", t("LoRA rank"), RANKS, "16"))


def targets_control(default: str) -> str:
    return query.choice("targets", t("LoRA on"), list(P.LORA_TARGETS), default,
                        format_func=word)


def shards_control() -> int:
    return int(query.choice(
        "shards", t("GPUs you have"), SHARDS, "1",
        help=t("More than one: FSDP / ZeRO-3 divides weights, gradients and optimizer "
               "state over them.")))


def headroom_control() -> float:
    """The share of the GPU a plan keeps free, a percentage bound to the URL."""
    percent = query.int_slider(
        "free", t("Keep free (percent of GPU memory)"), *HEADROOM_RANGE,
        round(P.DEFAULT_HEADROOM * 100),
        help=t("A plan fits only if its peak leaves this much of the GPU free: a margin for "
               "what the planner leaves out and for longer batches than planned. The table "
               "and the recommendation apply it alike."))
    return percent / 100


def gpu_control() -> int:
    options = [*hardware.GPUS, "custom"]
    key = query.choice("gpu", t("GPU"), options, DEFAULT_GPU,
                       format_func=lambda k: (f"{GPUS[k].name} · {gib(GPUS[k].bytes)}"
                                              if k in GPUS else word("other-gpu")),
                       help=t("The total memory nvidia-smi reports for each card."))
    if key == "custom":
        return query.int_slider("gpu_gib", t("GPU memory (GiB)"), 4, 256, 1, 32) * GiB
    return hardware.GPUS[key].bytes


def gpu_and_headroom() -> tuple[int, float]:
    """The GPU's bytes and the share kept free, side by side."""
    left, right = st.columns(2)
    with left:
        gpu = gpu_control()
    with right:
        headroom = headroom_control()
    return gpu, headroom


def headline(text: str, fits: bool) -> None:
    """The recommendation's box: green when the plan fits, amber when it does not."""
    (st.success if fits else st.warning)(text, icon=":material/lightbulb:")


def class_problem(error: ClassConfigError) -> str:
    """Why a pasted config.json's class was not measured, in the learner's words: the
    library's refusal, or a measurement past its limits (planner.class_worker)."""
    if isinstance(error, class_worker.MeasureFailed):
        params = error.params
        return t(CLASS_PROBLEMS[error.problem], seconds=params["seconds"],
                 size=units.format_bytes(params["size"], locale=babel_locale()),
                 detail=params["detail"], model_type=params["model_type"])
    return t(CLASS_PROBLEMS.get(error.problem, CLASS_PROBLEMS["cannot-build"]),
             model_type=error.model_type)


class MeasuringNotice:
    """What the page shows while a model's class is measured in its own process
    (planner.class_worker.waiting): the seconds so far against the limit. Drawing it is
    also where Streamlit stops the script of a learner who left or changed the page,
    which ends the measurement. `limit`: the measurement's time limit in seconds."""

    EVERY_S = 0.25

    def __init__(self, limit: float | None = None) -> None:
        self.place = None
        self.drawn = 0.0
        self.limit = class_worker.TIME_LIMIT_S if limit is None else limit

    def __call__(self, waited: float | None) -> None:
        if waited is None:
            if self.place is not None:
                self.place.empty()
                self.place = None
            return
        now = time.monotonic()
        if self.place is not None and now - self.drawn < self.EVERY_S:
            return
        if self.place is None:
            self.place = st.empty()
        self.drawn = now
        self.place.caption(self.text(waited))

    def text(self, waited: float) -> str:
        return t("Measuring the model's transformers class: {seconds} s so far (stopped at "
                 "{limit} s).", seconds=int(waited), limit=int(self.limit))
