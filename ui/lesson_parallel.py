"""Lesson 8's calculator: the activations on the most loaded GPU (the first pipeline stage)
of the lesson's GPT-3 175B example, for a layout the learner picks, under each kind of
recomputation. The arithmetic is memory.parallel's; registered in ui.lesson_widgets."""

from __future__ import annotations

import streamlit as st

from i18n import N_
from lessons import facts, figures
from memory.parallel import Layout, activations_per_gpu, in_flight, layer_bytes
from ui.i18n import current_language, fmt_decimal, fmt_number, t
from ui.lesson_common import CHART, bounded_number, gb, notices, option_words
from ui.progress import between, flag, keep, one_of

SIZES = [1, 2, 4, 8, 16, 32, 64]
SCHEDULE_LABELS = {"1f1b": N_("1F1B"), "interleaved": N_("interleaved 1F1B"),
                   "gpipe": N_("GPipe")}
RECOMPUTE_LABELS = {"none": N_("nothing recomputed"),
                    "selective": N_("selective (the attention scores)"),
                    "full": N_("every layer checkpointed")}
_LIMITS = {"par_seq": (1, 1_048_576), "par_microbatches": (1, 4_096), "par_chunks": (2, 12)}


def _defaults() -> dict[str, tuple[object, object]]:
    run = facts.GPT3_RUN
    return {"par_seq": (facts.GPT3["seq"], between(*_LIMITS["par_seq"])),
            "par_tp": (run["tp"], one_of(SIZES)), "par_sp": (True, flag),
            "par_cp": (1, one_of(SIZES)), "par_pp": (run["pp"], one_of(SIZES)),
            "par_schedule": ("1f1b", one_of(SCHEDULE_LABELS)),
            "par_microbatches": (run["microbatches"], between(*_LIMITS["par_microbatches"])),
            "par_chunks": (run["chunks"], between(*_LIMITS["par_chunks"]))}


def parallel_calculator() -> None:
    code = current_language()
    keep(_defaults())
    st.markdown(t("**Calculator: activations on the first pipeline stage of GPT-3 175B**"))
    sizes = st.columns(4)
    sizes[0].selectbox(t("Tensor parallel t"), SIZES, key="par_tp")
    sizes[1].selectbox(t("Context parallel cp"), SIZES, key="par_cp")
    sizes[2].selectbox(t("Pipeline stages p"), SIZES, key="par_pp")
    with sizes[3]:
        bounded_number(t("Tokens s"), "par_seq", *_LIMITS["par_seq"])
    st.checkbox(t("Sequence parallelism (splits the norms and dropouts over the t GPUs)"),
                key="par_sp")
    pipeline = st.columns(3)
    pipeline[0].radio(t("Schedule"), list(SCHEDULE_LABELS), key="par_schedule",
                      format_func=option_words(code, SCHEDULE_LABELS), horizontal=True)
    with pipeline[1]:
        bounded_number(t("Micro-batches m"), "par_microbatches", *_LIMITS["par_microbatches"])
    interleaved = st.session_state["par_schedule"] == "interleaved"
    with pipeline[2]:
        bounded_number(t("Chunks per GPU v"), "par_chunks", *_LIMITS["par_chunks"],
                       disabled=not interleaved)
    notices(list(_LIMITS))
    tp, cp, pp = (int(st.session_state[key]) for key in ("par_tp", "par_cp", "par_pp"))
    m, s = int(st.session_state["par_microbatches"]), int(st.session_state["par_seq"])
    layers, h, a = facts.GPT3["layers"], facts.GPT3["hidden"], facts.GPT3["heads"]
    if interleaved and m % pp:
        st.warning(t("The interleaved schedule needs a number of micro-batches divisible by "
                     "the number of stages ({stages}).", stages=pp), icon=":material/edit_note:")
        return
    if s % cp:
        st.warning(t("Context parallelism needs a number of tokens divisible by cp ({cp})."),
                   icon=":material/edit_note:")
        return
    layout = Layout(tp=tp, sp=bool(st.session_state["par_sp"]) and tp > 1, cp=cp, pp=pp,
                    schedule=st.session_state["par_schedule"], microbatches=m,
                    chunks=int(st.session_state["par_chunks"]) if interleaved else 1)
    b = facts.GPT3_RUN["micro_batch"]
    kept = {key: activations_per_gpu(layout, layers=layers, s=s, b=b, h=h, a=a,
                                     recompute=key) for key in RECOMPUTE_LABELS}
    label = t("activations on the first stage")
    rows = {t(RECOMPUTE_LABELS[key]): {label: size} for key, size in kept.items()}
    metrics = st.columns(3)
    metrics[0].metric(t("GPUs per model copy"), fmt_number(layout.gpus))
    metrics[1].metric(t("Micro-batches held"), fmt_decimal(round(in_flight(layout), 2)))
    metrics[2].metric(t("One layer, one micro-batch"),
                      gb(layer_bytes(s, b, h, a, tp, layout.sp, "none", cp)))
    st.plotly_chart(figures.layer_strategies_figure(rows, code), key="par_chart", **CHART)
    st.caption(t("GPT-3 175B: {layers} layers, hidden {hidden}, {heads} heads, micro-batches "
                 "of {batch}, 16-bit (Korthikanti et al. 2022, Table 2, p. 9, and Equation 5, "
                 "p. 8). Context parallelism runs a fused attention kernel, so no s×s scores "
                 "are kept. 1 GB = 10⁹ bytes.", layers=fmt_number(layers), hidden=fmt_number(h),
                 heads=fmt_number(a), batch=fmt_number(b)))
