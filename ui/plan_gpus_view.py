"""The planner page's parts for more than one GPU: the layout controls (recommended in the
course's order, or your own tensor, sequence, context, pipeline and expert parallelism),
the plan's layout with why it was chosen and the layouts tried, every checkpointing
strategy on its most loaded GPU, and the PyTorch code for a layout beyond FSDP. Numbers
from planner.recommend and planner.parallel_plan; this module keeps the widgets and words."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from i18n import N_
from memory import footprint as P
from memory import parallel as M
from planner import parallel_plan as PP
from planner import recommend as R
from planner.parallel_code import experts_words, parallel_code
from ui import query
from ui.i18n import current_language, t, tn
from ui.plan_words import LAYOUT_PROBLEMS, gib, word

SIZES = ["1", "2", "4", "8"]


def _layout(settings: P.PlannerInputs, per_node: int) -> M.Layout | str | None:
    """The learner's own layout from the controls (None: the recommended one), or a
    message saying why it cannot run."""
    mode = query.choice("layout", t("Layout"), ["auto", "own"], "auto",
                        format_func=lambda o: t("Recommended") if o == "auto"
                        else t("My own"))
    if mode == "auto":
        return None
    row = st.columns(4)
    with row[0]:
        tp = int(query.choice("tp", t("Tensor parallel"), SIZES, "1"))
    with row[1]:
        sp = query.choice("sp", t("Sequence parallel"), ["off", "on"], "off",
                          format_func=lambda o: t("on") if o == "on" else t("off")) == "on"
    with row[2]:
        pp = int(query.choice("pp", t("Pipeline stages"), SIZES, "1"))
    with row[3]:
        cp = int(query.choice("cp", t("Context parallel"), SIZES, "1"))
    schedule = (query.choice("schedule", t("Pipeline schedule"), list(M.SCHEDULES), "1f1b")
                if pp > 1 else "1f1b")
    experts = _experts(settings)
    ep = (int(query.choice("ep", t("Expert parallel"),
                           [size for size in SIZES if experts[0] % int(size) == 0], "1"))
          if experts else 1)
    try:
        layout = M.Layout(tp=tp, sp=sp and tp > 1, cp=cp, pp=pp, schedule=schedule,
                          microbatches=max(settings.accumulation, pp),
                          chunks=2 if schedule == "interleaved" else 1)
        layout = PP.check_layout(PP.with_dp(layout, settings.shards), settings.arch,
                                 per_node)
        return replace(layout, ep=ep)
    except PP.LayoutRefused as refused:  # this model or these nodes cannot run it
        return t(LAYOUT_PROBLEMS[refused.problem], schedule=schedule, **refused.params)
    except M.LayoutError:
        return t("{gpus} GPUs cannot be split as tensor {tp} x context {cp} x pipeline "
                 "{pp} (with the interleaved schedule, micro-batches a multiple of the "
                 "stages): pick sizes whose product divides the GPUs.",
                 gpus=settings.shards, tp=tp, cp=cp, pp=pp) + (
            " " + t("Expert parallelism ({ep}) splits the data x context parallel GPUs: "
                    "it must divide them.", ep=ep) if ep > 1 else "")


def _experts(settings: P.PlannerInputs) -> tuple[int, int] | None:
    """(experts per layer, per token) of a mixture-of-experts config; None when dense."""
    return getattr(settings.source, "experts", None) or None


def experts_text(settings: P.PlannerInputs, layout: M.Layout) -> str | None:
    """What one GPU holds of the experts under the layout (None for a dense model)."""
    experts = _experts(settings)
    if experts is None:
        return None
    split = PP.expert_split(settings, layout, experts)
    return t("Experts: {mine} of the {count} of each layer on every GPU (expert parallel "
             "{ep}); their weights, gradients and optimizer state take {state} per GPU, "
             "{sharded}, and FSDP gathers {gathered} of them at a time. "
             "With balanced routing, as the planner assumes, each GPU's experts keep "
             "{kept} per layer and micro-batch: {top_k} times its own tokens, whatever the "
             "expert-parallel size.", mine=split.per_gpu, count=split.experts, ep=split.ep,
             state=gib(split.state),
             sharded=tn("sharded over {count} GPU", "sharded over {count} GPUs",
                        split.sharded_over),
             gathered=gib(split.gathered), kept=gib(split.layer_activations),
             top_k=split.top_k)


def describe(layout: M.Layout, per_node: int) -> str:
    nodes = PP.nodes(layout.gpus, per_node)
    return t("Tensor {tp} x context {cp} x pipeline {pp} x FSDP {dp}, sequence "
             "parallelism {sp}: {on}.", tp=layout.tp, cp=layout.cp, pp=layout.pp,
             dp=layout.dp, sp=t("on") if layout.sp else t("off"),
             on=tn("{gpus} GPUs on {count} node", "{gpus} GPUs on {count} nodes", nodes,
                   gpus=layout.gpus)) + (
        " " + t("Expert parallel {ep}.", ep=layout.ep) if layout.ep > 1 else "")


REASONS = {  # recommend.layout_reason's ids: why the plan has its layout
    "yours": N_("The layout is yours: the planner picks the checkpointing and the other "
                "tools for it."),
    "fsdp": N_("Sharding the training state over all {gpus} GPUs (FSDP) is enough: no "
               "tensor, context, expert or pipeline parallelism is needed, nor their "
               "traffic."),
    "tp": N_("FSDP alone needs {before} per GPU: tensor parallelism with sequence "
             "parallelism over {tp} GPUs of a node divides the activations and the "
             "gathered layers by {tp}, on the node's fast links."),
    "cp": N_("At {seq} tokens tensor parallelism inside a node still needs {before} per "
             "GPU: context parallelism over {cp} GPUs splits the sequence, attention "
             "included."),
    "ep": N_("Without expert parallelism {before} per GPU: over {ep} GPUs each GPU "
             "gathers only its own experts of a layer, not all of them."),
    "pp": N_("Without a pipeline {before} per GPU: {pp} pipeline stages across nodes "
             "divide the layers each GPU gathers and holds."),
    "none-fits": N_("No layout of {gpus} GPUs fits this task: the closest needs {peak} "
                    "per GPU."),
}


def table(settings: P.PlannerInputs, layout: M.Layout, recommended: str | None = None
          ) -> pd.DataFrame:
    rows = []
    for row in PP.gpu_rows(settings, layout).values():
        name = word(row.strategy)
        if row.strategy == recommended:
            name = t("{strategy} (recommended)", strategy=name)
        rows.append({t("Checkpointing"): name,
                     t("Kept for backward"): gib(row.kept),
                     t("Peak per GPU"): gib(row.peak),
                     t("Fits"): "✓" if row.fits else "✗"})
    return pd.DataFrame(rows)


def layout_controls(settings: P.PlannerInputs) -> tuple[M.Layout | None, int]:
    """With more than one GPU: the GPUs per node and the layout (recommended: None; or
    the learner's own, refused in words with the recommended one kept)."""
    if settings.shards < 2:
        return None, 8
    st.subheader(t("Layout across {gpus} GPUs", gpus=settings.shards))
    per_node = int(query.choice("node", t("GPUs per node"), SIZES, "8"))
    chosen = _layout(settings, per_node)
    if isinstance(chosen, str):
        st.error(chosen + " " + t("The plan below takes the recommended layout."),
                 icon=":material/error:")
        return None, per_node
    return chosen, per_node


def across_gpus(rec: R.Recommendation) -> None:
    """The section, shown when the plan spans more than one GPU: its layout, why, the
    layouts tried, every strategy on its most loaded GPU (the recommended one marked)."""
    if rec.layout is None:
        return
    search = rec.closest or rec
    layout, per_node = search.layout, rec.per_node
    assert layout is not None
    st.subheader(t("Across {gpus} GPUs", gpus=layout.gpus))
    reason, params = R.layout_reason(rec)
    sizes = {k: gib(v) for k, v in params.items() if k in ("peak", "before")}
    st.markdown(describe(layout, per_node) + " " + t(REASONS[reason], **{**params, **sizes}))
    if rec.chosen_by != "learner":
        st.markdown(t("Layouts tried, in the course's order (FSDP, then tensor with "
                      "sequence parallelism inside a node, context parallelism from "
                      "32,768 tokens, expert parallelism for a mixture of experts, "
                      "pipeline stages), until a plan fits on the most loaded GPU:"))
        for number, step in enumerate(search.layout_steps, start=1):
            st.markdown(f"{number}. " + t("{layout} {strategy}, {peak} per GPU.",
                                          layout=describe(step.layout, per_node),
                                          strategy=word(step.row.strategy),
                                          peak=gib(step.row.peak)))
    if rec.closest is not None:
        st.markdown(t("So the recommendation above is a choice: {layout}",
                      layout=describe(rec.layout, per_node)))
    settings = rec.inputs
    st.dataframe(table(settings, rec.layout, rec.strategy if rec.fits else None),
                 hide_index=True, column_config={
                     t("Checkpointing"): st.column_config.TextColumn(width="large"),
                     t("Fits"): st.column_config.TextColumn(width="small")})
    if (words := experts_text(settings, rec.layout)) is not None:
        st.markdown(words)


def spread_code(rec: R.Recommendation) -> None:
    """The PyTorch code of a plan whose layout splits more than the state, and what the
    course's tests ran of it."""
    layout = rec.layout
    assert layout is not None
    st.code(parallel_code(rec.inputs, layout, current_language(), rec.per_node),
            language="python")
    if _experts(rec.inputs) is not None:
        st.markdown(experts_words(rec.inputs, layout, current_language()))
    ran = t("This code, on a tiny Llama and on two tiny mixtures of experts (Mixtral, "
            "Qwen3-MoE), ran on two CPU processes over gloo in the course's tests: tensor "
            "parallel with and without sequence parallelism, and two pipeline stages under "
            "GPipe and 1F1B, each giving one process's loss and gradients and "
            "checkpointing the blocks it names.")
    ran += " " + t("So did the whole script, two optimizer steps on the tiny Llama built on "
                   "the meta device, each process reading its slices of the saved "
                   "safetensors: tensor with sequence parallelism, and two 1F1B stages.")
    if layout.cp > 1:
        ran += " " + t("The context-parallel step was not run: torch runs context "
                       "parallelism with CUDA's attention kernels only; it is checked to "
                       "compile and to import.")
    st.caption(ran)
