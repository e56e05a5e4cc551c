"""The planner across many GPUs: memory on the most loaded GPU for every checkpointing
strategy under a layout (tensor, sequence, context, pipeline, data/FSDP parallelism), and
the layout a practitioner would reach for, added in their order: shard the training state
(FSDP) over every GPU, then tensor parallelism (with sequence parallelism) inside a node,
then pipeline parallelism across nodes, or context parallelism first for long sequences.

The per-layer bytes are the planner's own (memory.footprint: the course's formula or the
measured transformers class), split by memory.parallel: what a checkpoint keeps (a
layer's input) is divided by t only under sequence parallelism; the rest of a layer by
Korthikanti et al.'s ratio layer_bytes(t, sp) / layer_bytes(1). Context parallelism runs
the planner's layer over s/cp tokens with a fused attention kernel. The first pipeline
stage keeps its L/p layers for the micro-batches in flight (memory.parallel.in_flight);
the last stage holds the loss. Pure arithmetic; no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from memory import parallel as M
from memory.architectures import Architecture
from memory.footprint import (
    MAX_BATCH,
    MAX_SEQ,
    STRATEGIES,
    Breakdown,
    PlannerInputs,
    StrategyRow,
    activations,
    breakdown,
    fewest_n,
    largest_n,
    logits_peak_bytes,
    state_bytes,
    step_flops,
    strategy_row,
)
from memory.hardware import FRAGMENTATION, WORKSPACE_BYTES

LONG_SEQ = 32_768  # from here on the layout search tries context parallelism (lesson 8)


@dataclass(frozen=True)
class GpuRow:
    """One strategy on the most loaded GPU of a layout."""

    strategy: str
    kept: float  # activations kept for backward on that GPU at its peak
    rebuilt: float  # the layers rebuilt at once in backward
    state: float  # weights + gradients + optimizer state (and FSDP's gathered layers)
    logits: float
    peak: float
    fits: bool
    stage: str  # "first" | "last" | "only": the pipeline stage with that peak
    recompute_flops: float


def local_inputs(p: PlannerInputs, layout: M.Layout) -> PlannerInputs:
    """The planner's settings for one GPU's share of a micro-batch: s/cp tokens (context
    parallelism runs a fused attention kernel, so no s x s scores), no sharding of its own."""
    if layout.cp == 1:
        return p.with_(shards=1)
    return p.with_(seq=math.ceil(p.seq / layout.cp), fused=True, shards=1)


def checkpoints(p: PlannerInputs, strategy: str) -> int:
    """How many layer inputs a strategy keeps as checkpoints (memory.footprint.activations)."""
    n = p.arch.layers
    if strategy == "every-layer":
        return n
    if strategy == "two-layer":
        return math.ceil(n / 2)
    if strategy == "some-layers":
        return max(0, min(n, p.some_layers))
    return 0


def tp_ratio(p: PlannerInputs, layout: M.Layout, strategy: str) -> float:
    """The share of a plain layer's bytes one tensor-parallel GPU keeps (Korthikanti et
    al.'s Table 2, p. 9 of arXiv:2205.05198v1, over their no-parallelism row)."""
    arch, q = p.arch, local_inputs(p, layout)
    recompute = "selective" if strategy == "selective" else "none"
    args = dict(s=p.seq, b=p.batch, h=arch.hidden, a=arch.heads, recompute=recompute,
                cp=layout.cp, fused=q.fused)
    return (M.layer_bytes(**args, tp=layout.tp, sp=layout.sp)
            / M.layer_bytes(**args, tp=1, sp=False))


def fsdp_only(layout: M.Layout) -> bool:
    """Whether the layout splits only the training state (FSDP over its dp GPUs)."""
    return (layout.tp, layout.cp, layout.pp, layout.ep) == (1, 1, 1, 1)


def layout_breakdown(p: PlannerInputs, layout: M.Layout, strategy: str | None = None
                     ) -> tuple[Breakdown, str]:
    """Memory on the most loaded GPU of `layout` for `strategy` (the settings' own when
    None), piece by piece as memory.footprint.breakdown gives one GPU's, and the pipeline
    stage it is on: the first and the last stage are both priced (the first holds the
    most micro-batches, the last the loss) and the larger is the row's."""
    strategy = strategy or p.strategy
    if fsdp_only(layout):  # the one-GPU planner's sum, its state sharded over dp GPUs
        return breakdown(p.with_(shards=layout.dp), strategy), "only"
    q = local_inputs(p, layout)
    act = activations(q, strategy)
    ckpt = q.batch * q.seq * q.arch.hidden * q.residual_bytes
    ckpt_part = checkpoints(q, strategy) * ckpt
    plain = tp_ratio(p, layout, strategy)
    per_step = (ckpt_part / (layout.tp if layout.sp else 1)
                + (act.kept - ckpt_part) * plain)
    share = M.stage_layers(q.arch.layers, layout.pp) / q.arch.layers
    rebuilt = act.rebuilt * plain
    st = state_bytes(q.with_(shards=layout.dp * layout.cp))
    gathered = st["gathered"] - expert_gather_saving(p, layout, st["gathered"])
    split = layout.tp * layout.pp
    weights = ((st["weights"] - st["gathered"] - st["root"]) / split
               + (gathered + st["root"]) / layout.tp)
    grads, optimizer = st["gradients"] / split, st["optimizer"] / split
    logits = logits_peak_bytes(q) / layout.tp  # vocabulary-parallel loss under t > 1

    def stage(index: int, with_logits: bool) -> Breakdown:
        kept = per_step * share * M.in_flight(layout, index)
        loss = logits if with_logits else 0.0
        subtotal = weights + grads + optimizer + kept + rebuilt + loss
        return Breakdown(weights, grads, optimizer, kept, rebuilt, loss,
                         WORKSPACE_BYTES + FRAGMENTATION * subtotal)

    if layout.pp == 1:
        return stage(0, True), "only"
    first, last = stage(0, False), stage(layout.pp - 1, True)
    return (first, "first") if first.total >= last.total else (last, "last")


def gpu_row(p: PlannerInputs, layout: M.Layout, strategy: str) -> GpuRow:
    """Memory on the most loaded GPU of `layout` for `strategy` (layout_breakdown)."""
    bd, where = layout_breakdown(p, layout, strategy)
    act = activations(local_inputs(p, layout), strategy)
    return GpuRow(strategy, bd.activations_kept, bd.activations_rebuilt,
                  bd.weights + bd.gradients + bd.optimizer, bd.logits, bd.total,
                  bd.total <= p.usable_bytes, where, act.recompute_flops)


def layout_peak(p: PlannerInputs, layout: M.Layout, strategy: str | None = None) -> float:
    return layout_breakdown(p, layout, strategy)[0].total


def layout_row(p: PlannerInputs, layout: M.Layout, strategy: str) -> StrategyRow:
    """memory.footprint.strategy_row on the most loaded GPU of `layout`: the peak, what
    is to spare, the recomputation, and the largest micro-batch and longest sequence that
    fit under the layout."""
    if fsdp_only(layout):  # the one-GPU planner's row, its state sharded over dp GPUs
        return strategy_row(p.with_(shards=layout.dp), strategy)
    bd = layout_breakdown(p, layout, strategy)[0]
    act, none = activations(p, strategy), activations(p, "none")

    def ok(**change: int) -> bool:
        return layout_peak(p.with_(**change), layout, strategy) <= p.usable_bytes

    return StrategyRow(strategy, bd.total, bd.total <= p.usable_bytes,
                       p.gpu_bytes - bd.total, act.recompute_flops / step_flops(p),
                       largest_n(lambda b: ok(batch=b), MAX_BATCH),
                       largest_n(lambda s: ok(seq=s), MAX_SEQ),
                       act.kept + act.rebuilt < none.kept, bd)


def fewest_layers(p: PlannerInputs, layout: M.Layout) -> int | None:
    """The fewest layers "only some layers" checkpoints to fit under `layout` (None if
    even all of them do not): memory.footprint.minimal_some_layers on the most loaded
    GPU, found by bisection (the peak falls as k grows)."""
    def ok(k: int) -> bool:
        return layout_peak(p.with_(some_layers=k), layout, "some-layers") <= p.usable_bytes

    return fewest_n(ok, 1, p.arch.layers - 1)


def _gathered_share(ranks: int) -> float:
    """The share of a layer FSDP gathers from the other ranks of a group of `ranks`."""
    return (ranks - 1) / ranks if ranks > 1 else 0.0


def expert_gather_saving(p: PlannerInputs, layout: M.Layout, gathered: float) -> float:
    """How much less of a layer FSDP gathers on one GPU under expert parallelism: the
    experts of a layer are split over the ep GPUs, so each gathers only its own experts
    (from the dp·cp/ep GPUs that shard them) instead of all of them (from dp·cp)."""
    arch, shards = p.arch, layout.dp * layout.cp
    if layout.ep == 1 or not arch.expert_block or not gathered:
        return 0.0
    per_param = gathered / (arch.block_params() * _gathered_share(shards))
    own = arch.expert_block / layout.ep * _gathered_share(shards // layout.ep)
    return per_param * (arch.expert_block * _gathered_share(shards) - own)


@dataclass(frozen=True)
class ExpertSplit:
    """A mixture-of-experts model's experts under expert parallelism, on one GPU."""

    ep: int
    experts: int  # experts per MoE layer
    per_gpu: int  # experts of each MoE layer on one GPU
    top_k: int
    state: float  # the experts' weights, gradients and optimizer state on one GPU
    sharded_over: int  # GPUs that shard one expert's state (FSDP): dp·cp / ep
    gathered: float  # one layer's experts FSDP gathers on one GPU while it uses them
    layer_activations: float  # what one GPU's experts keep per layer and micro-batch


def expert_split(p: PlannerInputs, layout: M.Layout, experts: tuple[int, int]
                 ) -> ExpertSplit:
    """The experts' share of a GPU under `layout`: their parameters split over the ep
    GPUs, each GPU's part sharded by FSDP over the dp·cp/ep GPUs that hold the same
    experts (so the sharded state per GPU is what FSDP alone over dp·cp gives; the gathered
    layer is what shrinks), and the activations of its experts with balanced routing:
    top_k times the GPU's own tokens (memory.parallel.expert_bytes), whatever ep is."""
    count, top_k = experts
    arch, q = p.arch, local_inputs(p, layout)
    shards = layout.dp * layout.cp
    st = state_bytes(q.with_(shards=shards))
    base = st["weights"] - st["gathered"] - st["root"] + st["gradients"] + st["optimizer"]
    share = arch.expert_params / arch.params()
    per_param = (st["gathered"] / (arch.block_params() * _gathered_share(shards))
                 if st["gathered"] else 0.0)
    gathered = per_param * arch.expert_block / layout.ep * _gathered_share(shards // layout.ep)
    width = arch.expert_block // (count * 3 * arch.hidden)
    tokens = q.batch * q.seq
    return ExpertSplit(
        layout.ep, count, count // layout.ep, top_k,
        base * share / (layout.tp * layout.pp), shards // layout.ep, gathered / layout.tp,
        M.expert_bytes(tokens, top_k, M.expert_token_bytes(arch.hidden, width, q.act_bytes)))


def gpu_rows(p: PlannerInputs, layout: M.Layout) -> dict[str, GpuRow]:
    return {s: gpu_row(p, layout, s) for s in STRATEGIES}


@dataclass(frozen=True)
class LayoutStep:
    action: str  # fsdp | tp | cp | ep | pp | yours
    layout: M.Layout
    row: GpuRow


def _powers(limit: int) -> list[int]:
    out, k = [], 2
    while k <= limit:
        out.append(k)
        k *= 2
    return out


def experts_of(p: PlannerInputs) -> tuple[int, int] | None:
    """(experts per MoE layer, experts per token) of a mixture-of-experts config's class;
    None for a dense model."""
    return getattr(p.source, "experts", None) or None


def _widest_ep(ep: int, ranks: int) -> int:
    """The largest power of two up to `ep` that divides the data x context ranks."""
    while ep > 1 and ranks % ep:
        ep //= 2
    return ep


def candidates(p: PlannerInputs, gpus: int, per_node: int) -> list[tuple[str, M.Layout]]:
    """Layouts in the course's order (lesson 8, "The decision"): FSDP over every GPU;
    tensor parallelism with sequence parallelism inside a node, t dividing the heads, the
    key/value heads and the node; then, with the widest t, context parallelism, only for
    sequences of LONG_SEQ tokens or more; expert parallelism for a mixture of experts
    (ep dividing the experts and the data x context GPUs, keeping the widest cp tried);
    pipeline stages (1F1B, at least p micro-batches; stages up to the layers), with the
    widest t and ep."""
    out: list[tuple[str, M.Layout]] = [("fsdp", M.Layout(dp=gpus))]
    tp = 1
    for t in _powers(min(per_node, gpus)):
        if gpus % t or p.arch.heads % t or p.arch.kv_heads % t:
            break
        tp = t
        out.append(("tp", M.Layout(tp=t, sp=True, dp=gpus // t)))
    base = M.Layout(tp=tp, sp=tp > 1, dp=gpus // tp)
    rest = gpus // tp
    if p.seq >= LONG_SEQ:
        for k in _powers(rest):
            if rest % k == 0:
                base = M.Layout(tp=tp, sp=tp > 1, cp=k, dp=rest // k)
                out.append(("cp", base))
    ep = 1
    experts = experts_of(p)
    if experts is not None:
        for e in _powers(base.dp * base.cp):
            if (base.dp * base.cp) % e == 0 and experts[0] % e == 0:
                ep = e
                out.append(("ep", replace(base, ep=e)))
    m = max(p.accumulation, 1)
    for k in _powers(rest):
        if rest % k or k > p.arch.layers:
            continue
        dp = rest // k
        out.append(("pp", M.Layout(tp=tp, sp=tp > 1, pp=k, microbatches=max(m, k), dp=dp,
                                   ep=_widest_ep(ep, dp))))
    return out


def nodes(gpus: int, per_node: int) -> int:
    return math.ceil(gpus / per_node)


def layout_dict(layout: M.Layout, per_node: int) -> dict:
    return {"tp": layout.tp, "sp": layout.sp, "cp": layout.cp, "pp": layout.pp,
            "schedule": layout.schedule, "microbatches": layout.microbatches,
            "chunks": layout.chunks, "ep": layout.ep, "dp": layout.dp,
            "gpus": layout.gpus, "gpus_per_node": per_node,
            "nodes": nodes(layout.gpus, per_node)}


class LayoutRefused(M.LayoutError):
    """A layout this model or these machines cannot run: `problem` (an id the page words:
    tp-heads, tp-kv-heads, tp-node, pp-layers, chunks-layers, microbatches) and the numbers
    it names (`params`); str() is the command line's one line."""

    def __init__(self, problem: str, message: str, **params: int) -> None:
        super().__init__(message)
        self.problem, self.params = problem, params


def check_layout(layout: M.Layout, arch: Architecture, per_node: int) -> M.Layout:
    """`layout` if this model and nodes of `per_node` GPUs can run it as the printed code
    runs it, else LayoutRefused naming the rule:

    * tensor parallelism splits the attention by whole heads (torch's ColwiseParallel on
      q/k/v, transformers' tp_plan, Megatron alike): t divides the query heads and the
      key/value heads. With fewer key/value heads than t, each would have to be replicated
      on t / kv GPUs (inference engines do that); neither torch's styles nor transformers'
      tp_plan replicate one, and memory.parallel counts the keys and values divided by t
      (Korthikanti et al.'s layer), so such a layout is refused, not priced as if split;
    * tensor parallelism stays inside a node (its all-reduces in every layer need the
      links inside one);
    * a pipeline stage holds at least one layer (the interleaved schedule: each of its
      chunks);
    * 1F1B and the interleaved schedule need at least as many micro-batches as stages
      (torch's Schedule1F1B raises otherwise; Megatron's interleaved schedule needs a
      multiple of them)."""
    tp, pp, micro = layout.tp, layout.pp, layout.microbatches
    if arch.heads % tp:
        raise LayoutRefused("tp-heads", f"--tp {tp} must divide the model's {arch.heads} "
                            "attention heads: tensor parallelism splits them whole",
                            tp=tp, heads=arch.heads)
    if tp > per_node:
        raise LayoutRefused("tp-node", f"--tp {tp} is more than the {per_node} GPUs of a "
                            "node (--gpus-per-node): tensor parallelism stays inside one",
                            tp=tp, per_node=per_node)
    if arch.kv_heads % tp:
        raise LayoutRefused("tp-kv-heads", f"--tp {tp} must divide the model's "
                            f"{arch.kv_heads} key/value heads: torch's ColwiseParallel and "
                            "transformers' tp_plan split k_proj and v_proj by whole heads "
                            "and replicate none (the planner counts keys and values divided "
                            "by tp)", tp=tp, kv_heads=arch.kv_heads)
    stages = pp * (layout.chunks if layout.schedule == "interleaved" else 1)
    if stages > arch.layers:
        problem = "chunks-layers" if stages > pp else "pp-layers"
        raise LayoutRefused(problem, f"--pp {pp}" + (f" x --chunks {layout.chunks}"
                                                     if stages > pp else "")
                            + f" stages are more than the model's {arch.layers} layers: "
                            "each stage needs one", pp=pp, stages=stages, layers=arch.layers)
    if pp > 1 and layout.schedule in ("1f1b", "interleaved") and micro < pp:
        raise LayoutRefused("microbatches", f"the {layout.schedule} schedule needs at least "
                            f"as many micro-batches as stages: --microbatches {micro} for "
                            f"--pp {pp}", microbatches=micro, pp=pp)
    return layout


def with_dp(layout: M.Layout, gpus: int) -> M.Layout:
    """`layout` with the data-parallel (FSDP) size that fills `gpus`."""
    inner = layout.tp * layout.cp * layout.pp
    if gpus % inner:
        raise M.LayoutError(f"--gpus {gpus} is not a multiple of tp x cp x pp = {inner}")
    return replace(layout, dp=gpus // inner)
