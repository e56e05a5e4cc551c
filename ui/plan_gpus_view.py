"""The planner page's section for more than one GPU: a layout (recommended in
practitioners' order, or your own tensor, sequence, context and pipeline parallelism),
every checkpointing strategy on the most loaded GPU, and the PyTorch code for the layout.
Numbers from planner.parallel_plan; this module keeps the widgets and the words."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from memory import footprint as P
from memory import parallel as M
from planner import parallel_plan as PP
from planner.parallel_code import experts_words, parallel_code
from ui import query
from ui.i18n import current_language, t
from ui.plan_words import LAYOUT_PROBLEMS, gib, word

SIZES = ["1", "2", "4", "8"]


def _layout(settings: P.PlannerInputs, per_node: int) -> tuple[M.Layout, tuple] | str:
    """The layout the controls give (with the steps that led to it when recommended), or
    a message saying why it cannot run."""
    mode = query.choice("layout", t("Layout"), ["auto", "own"], "auto",
                        format_func=lambda o: t("Recommended") if o == "auto"
                        else t("My own"))
    if mode == "auto":
        steps = PP.recommend_layout(settings, settings.shards, per_node)
        return steps[-1].layout, steps
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
        return replace(layout, ep=ep), ()
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
             "sharded over {sharded} GPUs, and FSDP gathers {gathered} of them at a time. "
             "With balanced routing, as the planner assumes, each GPU's experts keep "
             "{kept} per layer and micro-batch: {top_k} times its own tokens, whatever the "
             "expert-parallel size.", mine=split.per_gpu, count=split.experts, ep=split.ep,
             state=gib(split.state), sharded=split.sharded_over,
             gathered=gib(split.gathered), kept=gib(split.layer_activations),
             top_k=split.top_k)


def describe(layout: M.Layout, per_node: int) -> str:
    return t("Tensor {tp} x context {cp} x pipeline {pp} x FSDP {dp}, sequence "
             "parallelism {sp}: {gpus} GPUs on {nodes} nodes.", tp=layout.tp, cp=layout.cp,
             pp=layout.pp, dp=layout.dp, sp=t("on") if layout.sp else t("off"),
             gpus=layout.gpus, nodes=PP.nodes(layout.gpus, per_node))


def table(settings: P.PlannerInputs, layout: M.Layout) -> pd.DataFrame:
    rows = []
    for row in PP.gpu_rows(settings, layout).values():
        rows.append({t("Checkpointing"): word(row.strategy),
                     t("Kept for backward"): gib(row.kept),
                     t("Peak per GPU"): gib(row.peak),
                     t("Fits"): "✓" if row.fits else "✗"})
    return pd.DataFrame(rows)


def across_gpus(settings: P.PlannerInputs) -> None:
    """The section, shown when the plan has more than one GPU."""
    if settings.shards < 2:
        return
    st.subheader(t("Across {gpus} GPUs", gpus=settings.shards))
    st.markdown(t("Recommended means parallelism added as practitioners do: the training "
                  "state sharded over every GPU (FSDP), then tensor parallelism with "
                  "sequence parallelism inside a node, then pipeline stages (or, for long "
                  "sequences, context parallelism) across nodes, until a checkpointing "
                  "choice fits on the most loaded GPU."))
    per_node = int(query.choice("node", t("GPUs per node"), SIZES, "8"))
    chosen = _layout(settings, per_node)
    if isinstance(chosen, str):
        st.error(chosen, icon=":material/error:")
        return
    layout, steps = chosen
    st.markdown(describe(layout, per_node))
    for number, step in enumerate(steps, start=1):
        st.markdown(f"{number}. " + t("{layout} {strategy}, {peak} per GPU.",
                                      layout=describe(step.layout, per_node),
                                      strategy=word(step.row.strategy),
                                      peak=gib(step.row.peak)))
    st.dataframe(table(settings, layout), hide_index=True)
    if (words := experts_text(settings, layout)) is not None:
        st.markdown(words)
    best = PP.cheapest(PP.gpu_rows(settings, layout))
    st.code(parallel_code(settings.with_(strategy=best.strategy), layout,
                          current_language()), language="python")
    if _experts(settings) is not None:
        st.markdown(experts_words(settings, layout, current_language()))
    ran = t("This code, on a tiny Llama and on two tiny mixtures of experts (Mixtral, "
            "Qwen3-MoE), ran on two CPU processes over gloo in the course's tests: tensor "
            "parallel with and without sequence parallelism, and two pipeline stages under "
            "GPipe and 1F1B, each giving one process's loss and gradients and "
            "checkpointing the blocks it names.")
    if layout.cp > 1:
        ran += " " + t("The context-parallel step was not run: torch runs context "
                       "parallelism with CUDA's attention kernels only; it is checked to "
                       "compile and to import.")
    st.caption(ran)
