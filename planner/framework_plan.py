"""A plan in the terms the training frameworks use: what DeepSpeed's config and
Megatron-LM's flags must say for the same run as the planner's Hugging Face and PyTorch
code. Numbers and ids only (planner.framework_code words and prints them).

From one plan (memory.footprint.PlannerInputs with its strategy, and the
memory.parallel.Layout the plan runs on; a plan without a layout is FSDP over its GPUs):

* checkpointing as Megatron-Core recomputes it (megatron/core/transformer/
  transformer_block.py, TransformerBlock._checkpointed_forward, megatron-core 0.16.1):
  every layer is `full` / `uniform` with 1 layer per unit; two-layer segments `full` /
  `uniform` with 2; the first k layers `full` / `block`, whose count is per pipeline stage
  (each stage's, or each virtual chunk's, TransformerBlock recomputes its own first
  recompute_num_layers layers), so a pipelined plan gives each stage its share, as the
  planner prices it and the PyTorch code checkpoints it
  (planner.parallel_code.checkpointed_per_stage); selective is `selective`; the compiler's
  budget has no equivalent;
* sharding: the planner's FSDP shards weights, gradients and optimizer state over the data
  x context parallel GPUs (memory.footprint.state_bytes), which is ZeRO-3; ZeRO-1 (and
  Megatron's distributed optimizer) shards the optimizer state only;
* the batch: micro-batches per step on each data-parallel rank (the pipeline's under
  pipelining, else the gradient accumulation steps) and the global batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memory.footprint import PlannerInputs
from memory.parallel import Layout, stage_layers
from planner.parallel_code import checkpointed_per_stage


@dataclass(frozen=True)
class Recompute:
    """What a framework recomputes for one plan.

    granularity: None (nothing), "full" (whole layers) or "selective" (parts of a layer);
    method: "uniform" (every layer, in units of `num_layers`) or "block" (the first
    `num_layers` layers of each stage); `checkpoints`: layer inputs kept on the most loaded
    GPU (the first stage); `recomputed`: layers rerun in backward, all stages together;
    `equivalent`: False when the plan's strategy has no equivalent (the compiler's budget).
    """

    granularity: str | None
    method: str | None
    num_layers: int | None
    checkpoints: int
    recomputed: int
    equivalent: bool = True


@dataclass(frozen=True)
class FrameworkPlan:
    """One plan for the frameworks: the settings, the layout and what each implies."""

    p: PlannerInputs
    layout: Layout
    recompute: Recompute
    sharding: str  # "full" (ZeRO-3, FSDP's full shard) | "none"
    micro_batches: int  # per step on each data-parallel rank
    global_batch: int  # samples per optimizer step, every data-parallel rank together
    stages: int  # pipeline stages, virtual chunks counted (the units "block" counts in)

    @property
    def shards(self) -> int:
        """The GPUs the plan's FSDP shards the training state over: data x context."""
        return self.layout.dp * self.layout.cp

    @property
    def stage_layers(self) -> int:
        """Layers of the first (most loaded) stage, or of the whole model."""
        return stage_layers(self.p.arch.layers, self.stages)

    @property
    def even_stages(self) -> bool:
        """Whether every stage holds the same number of layers (Megatron's default split)."""
        return self.p.arch.layers % self.stages == 0


def effective_strategy(p: PlannerInputs) -> str:
    """The plan's strategy, "some-layers" with k = 0 as none and k >= L as every layer (as
    memory.footprint.activations prices them)."""
    if p.strategy != "some-layers":
        return p.strategy
    k = max(0, min(p.arch.layers, p.some_layers))
    return "none" if k == 0 else "every-layer" if k == p.arch.layers else "some-layers"


def recompute(p: PlannerInputs, layout: Layout) -> Recompute:
    """Megatron-Core's recomputation for the plan's checkpointing on `layout`."""
    stages = layout.pp * (layout.chunks if layout.schedule == "interleaved" else 1)
    per_stage = stage_layers(p.arch.layers, stages)
    layers = p.arch.layers
    strategy = effective_strategy(p)
    if strategy == "every-layer":
        return Recompute("full", "uniform", 1, per_stage, layers)
    if strategy == "two-layer":
        return Recompute("full", "uniform", 2, math.ceil(per_stage / 2), layers)
    if strategy == "some-layers":
        k = min(per_stage, checkpointed_per_stage(p, layout))
        return Recompute("full", "block", k, k, min(layers, k * stages))
    if strategy == "selective":
        return Recompute("selective", None, None, 0, 0)
    if strategy == "budget":
        return Recompute(None, None, None, 0, 0, equivalent=False)
    return Recompute(None, None, None, 0, 0)


def framework_plan(p: PlannerInputs, layout: Layout | None = None) -> FrameworkPlan:
    """The plan `p` on `layout` (default: FSDP over p.shards GPUs) for the frameworks."""
    if layout is None:
        layout = Layout(dp=p.shards)
    stages = layout.pp * (layout.chunks if layout.schedule == "interleaved" else 1)
    micro = layout.microbatches if layout.pp > 1 else p.accumulation
    return FrameworkPlan(
        p=p, layout=layout, recompute=recompute(p, layout),
        sharding="full" if layout.dp * layout.cp > 1 else "none",
        micro_batches=micro, global_batch=p.batch * micro * layout.dp, stages=stages)
