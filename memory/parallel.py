"""Activation memory per GPU when a transformer is split over many GPUs: tensor (t),
sequence, context (cp), pipeline (p, with its schedule and micro-batches), expert (ep) and
data parallelism / FSDP, each with or without recomputation. Pure arithmetic, no torch.

The per-layer bytes follow Korthikanti et al. 2022, "Reducing Activation Recomputation in
Large Transformer Models" (arXiv:2205.05198v1; pages as in that PDF): a GPT layer in
16-bit with 1-byte dropout masks keeps

* sbh(34 + 5as/h) with no parallelism (their Equation 1, Section 4.1, p. 4);
* sbh(10 + 24/t + 5as/(ht)) under t-way tensor parallelism (Equation 2, Section 4.2.1, p. 5): the
  10 is what stays whole on every rank (the two norms' inputs 4, the inputs of the QKV and
  the first MLP projection 4, the two dropout masks 2);
* sbh(34 + 5as/h)/t with sequence parallelism added (Equation 4, Section 4.2.2, p. 7);
* sbh(10 + 24/t) and sbh·34/t with selective recomputation of the attention scores
  (Table 2, p. 9, Section 5; Equation 6, p. 9);
* 2sbh, a layer's input, under full recomputation (Table 2, p. 9). Table 2 gives it without
  sequence parallelism; with it the layer's input is already split along the sequence
  (Megatron keeps the residual stream [s/t, b, h]), so 2sbh/t.

The pipeline's first stage holds the most (Section 4.2.3, p. 8): under 1F1B it keeps p
micro-batches of its L/p layers, L layers' worth whatever p is (Equation 5); Megatron's
interleaved schedule with v chunks per GPU keeps L(1 + (p-1)/(pv)) layers' worth; GPipe
runs every micro-batch forward before any backward, so all m of them.

Context parallelism splits the sequence of every tensor, the attention's included: each
rank keeps its own s/cp tokens' queries, keys and values, and the keys and values reach
the other ranks around a ring (ring attention) or in one all-gather (torch's default,
which holds the whole sequence's keys and values during attention), computed with a fused
kernel, so no s x s scores are kept. Expert parallelism places the experts of a
mixture-of-experts layer, E/ep on each rank, which computes with their full weights only
(next to FSDP over every rank, each stores the same share of them either way); the
tokens a GPU's experts process are, with balanced routing, top-k times its own tokens,
whatever ep is. FSDP / ZeRO-3 splits the weights, gradients and optimizer state over the
data-parallel ranks; every rank runs its own micro-batches, so activations stay whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Schedule = Literal["1f1b", "interleaved", "gpipe"]
Recompute = Literal["none", "selective", "full"]
SCHEDULES: tuple[str, ...] = ("1f1b", "interleaved", "gpipe")
RECOMPUTE: tuple[str, ...] = ("none", "selective", "full")

# Korthikanti et al.'s per-layer constants (bytes per s·b·h): the part tensor parallelism
# leaves whole on every rank, and the part it divides.
REPLICATED = 10
DIVIDED = 24
# Of the 10: the projections' inputs (QKV, the MLP's first), and the rest between the blocks.
GATHERED = 4
BETWEEN = REPLICATED - GATHERED
WHOLE = REPLICATED + DIVIDED  # 34
SCORES = 5  # bytes per a·s²·b: QKᵀ (2), softmax (2), its dropout mask (1)... see Section 4.1 (p. 4)
INPUT = 2  # a layer's input, 16-bit


class LayoutError(ValueError):
    """A layout that cannot run; the message names the field and why."""


@dataclass(frozen=True)
class Layout:
    """How one training job splits a model over its GPUs.

    tp: tensor parallel size; sp: sequence parallelism on (needs tp > 1 to matter);
    cp: context parallel size; pp: pipeline stages; schedule: 1f1b | interleaved | gpipe;
    microbatches: micro-batches per step (m); chunks: model chunks per GPU under the
    interleaved schedule (v); ep: expert parallel size; dp: data parallel (FSDP) size.
    """

    tp: int = 1
    sp: bool = False
    cp: int = 1
    pp: int = 1
    schedule: str = "1f1b"
    microbatches: int = 1
    chunks: int = 1
    ep: int = 1
    dp: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "cp", "pp", "microbatches", "chunks", "ep", "dp"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise LayoutError(f"{name} must be a whole number of at least 1, not {value!r}")
        if self.schedule not in SCHEDULES:
            raise LayoutError(f"schedule must be one of {', '.join(SCHEDULES)}, "
                              f"not {self.schedule!r}")
        if self.schedule == "interleaved":
            if self.chunks < 2:
                raise LayoutError("the interleaved schedule needs at least 2 chunks per GPU")
            if self.microbatches % self.pp:
                raise LayoutError("the interleaved schedule needs a number of micro-batches "
                                  f"divisible by the pipeline size {self.pp}")
        elif self.chunks != 1:
            raise LayoutError(f"chunks > 1 needs the interleaved schedule, not {self.schedule}")
        if (self.dp * self.cp) % self.ep:
            raise LayoutError(f"expert parallel size {self.ep} must divide data x context "
                              f"parallel size {self.dp * self.cp}")

    @property
    def gpus(self) -> int:
        """GPUs of the job: t x cp x p x dp (expert parallelism reuses the data and context
        parallel ranks, as Megatron-Core and torchtitan do)."""
        return self.tp * self.cp * self.pp * self.dp


def split_bytes(tokens: float, between: float, gathered: float, inside: float, tp: int = 1,
                sp: bool = False, regather: bool = True) -> float:
    """Bytes one of t tensor-parallel GPUs keeps for one layer over `tokens` tokens, from
    what the whole layer keeps per token in three parts:

    * `between`: what lies between the split blocks (the norms' inputs and statistics, the
      dropout masks after the row-split projections): whole on every GPU under tensor
      parallelism, split along the sequence under sequence parallelism;
    * `gathered`: the inputs of the column-split projections (QKV, the MLP's first): whole
      under tensor parallelism; under sequence parallelism split when the layer keeps its
      shard and gathers again in backward (Megatron, `regather`), whole when autograd
      keeps the gathered tensor (torch's DTensor `SequenceParallel` + `PrepareModuleInput`);
    * `inside`: everything within the split blocks, divided by t.
    """
    between_kept = between / tp if sp else between
    gathered_kept = gathered / tp if sp and regather else gathered
    return tokens * (between_kept + gathered_kept + inside / tp)


def input_bytes(tokens: float, h: int, tp: int = 1, sp: bool = False,
                act_bytes: int = INPUT) -> float:
    """A layer's input, what full recomputation keeps per layer: whole on every
    tensor-parallel GPU, split along the sequence under sequence parallelism."""
    return act_bytes * tokens * h / (tp if sp else 1)


def layer_bytes(s: int, b: int, h: int, a: int, tp: int = 1, sp: bool = False,
                recompute: str = "none", cp: int = 1, fused: bool = False,
                regather: bool = True) -> float:
    """Bytes one GPU keeps for one GPT layer and one micro-batch (Korthikanti et al.'s
    Table 2), with its s/cp tokens under context parallelism. `fused`: a fused attention
    kernel keeps no s x s scores (context parallelism always runs one). `regather=False`:
    sequence parallelism as torch's DTensor runs it, the projections' inputs kept whole."""
    if recompute not in RECOMPUTE:
        raise LayoutError(f"recompute must be one of {', '.join(RECOMPUTE)}, not {recompute!r}")
    tokens = s / cp * b
    if recompute == "full":
        return input_bytes(tokens, h, tp, sp)
    scores = SCORES * a * s if recompute == "none" and not fused and cp == 1 else 0
    return split_bytes(tokens, BETWEEN * h, GATHERED * h, DIVIDED * h + scores, tp, sp,
                       regather)


def stage_layers(layers: int, pp: int) -> int:
    """Layers of the first (most loaded) stage: L/p, rounded up where p does not divide L."""
    return -(-layers // pp)


def in_flight(layout: Layout, stage: int = 0) -> float:
    """Micro-batches whose activations pipeline stage `stage` (0: the first) holds at its
    peak, in units of one micro-batch through all its layers (1F1B: min(p - stage, m);
    GPipe: m; interleaved with v chunks: Megatron's warm-up (p-stage-1)·2 + (v-1)·p chunk
    passes plus the one in steady state, each over L/(pv) layers, at most m·v of them)."""
    p, m = layout.pp, layout.microbatches
    if not 0 <= stage < p:
        raise LayoutError(f"stage must be between 0 and {p - 1}, not {stage}")
    if layout.schedule == "gpipe":
        return float(m)
    if layout.schedule == "1f1b":
        return float(min(p - stage, m))
    v = layout.chunks
    passes = min(m * v, 2 * (p - stage - 1) + (v - 1) * p + 1)
    return passes / v


def interleave_factor(pp: int, chunks: int) -> float:
    """Korthikanti et al.'s (1 + (p-1)/(pm)) for m interleaving stages (Section 4.2.3, p. 8)."""
    return 1 + (pp - 1) / (pp * chunks)


def activations_per_gpu(layout: Layout, *, layers: int, s: int, b: int, h: int, a: int,
                        recompute: str = "none", fused: bool = False) -> float:
    """Activation bytes on the most loaded GPU (the first pipeline stage) at its peak:
    the layers of one stage, times the micro-batches it holds, times one layer's bytes;
    under full recomputation plus the one layer rebuilt in backward. Equation 5 of
    Korthikanti et al. (p. 8; and 6, p. 9, for selective recomputation) when p divides L
    and m >= p."""
    per_layer = layer_bytes(s, b, h, a, layout.tp, layout.sp, recompute, layout.cp, fused)
    kept = per_layer * stage_layers(layers, layout.pp) * in_flight(layout)
    if recompute == "full":
        kept += layer_bytes(s, b, h, a, layout.tp, layout.sp, "none", layout.cp, fused)
    return kept


def expert_bytes(tokens: float, top_k: int, per_token: float) -> float:
    """Bytes the experts on one GPU keep for the `tokens` tokens that GPU owns, with
    balanced routing: each token reaches top_k experts wherever they sit, so the experts
    of each of the ep GPUs process top_k times its own tokens, whatever ep is.
    `per_token`: what one expert keeps for one token (its input and internals)."""
    return tokens * top_k * per_token


def expert_token_bytes(hidden: int, width: int, act_bytes: int) -> float:
    """What one SwiGLU expert keeps for backward per token it processes: the token's copy
    grouped by expert (h), the gate and up projections' outputs, SiLU's output and their
    product (4 x its width); measured on two gloo processes in
    tests/demos/test_parallel_runs.py."""
    return act_bytes * (hidden + 4 * width)


def stage_output_bytes(s: int, b: int, h: int, in_flight_microbatches: int,
                       act_bytes: int = 2) -> float:
    """A pipeline stage's output tensors, s·b·h per micro-batch in flight, which Megatron
    frees once sent (Korthikanti et al., Appendix B, pp. 15-16: sbh·r per rank, sbhp on the
    first)."""
    return act_bytes * s * b * h * in_flight_microbatches


def state_per_gpu(dense_params: float, expert_params: float, bytes_per_param: float,
                  layout: Layout, sharded: bool = True) -> float:
    """Weights + gradients + optimizer state on one GPU (`bytes_per_param` of them per
    parameter): tensor and pipeline parallelism divide every weight by t·p; expert
    parallelism divides the experts' by ep as well; FSDP / ZeRO-3 (`sharded`) divides what
    is left over the data x context parallel ranks that hold the same part (dp·cp for the
    dense weights, dp·cp/ep for the experts)."""
    dense = dense_params / (layout.tp * layout.pp)
    experts = expert_params / (layout.tp * layout.pp * layout.ep)
    if sharded:
        dense /= layout.dp * layout.cp
        experts /= layout.dp * layout.cp // layout.ep
    return (dense + experts) * bytes_per_param


@dataclass(frozen=True)
class Transfer:
    """What one kind of parallelism sends for one layer (or one stage boundary) and one
    micro-batch, forward and backward together: `count` collectives of `elements` each."""

    kind: str  # tp | sp | cp | pp | ep | fsdp
    collective: str  # all-reduce | all-gather | reduce-scatter | send/recv | all-to-all
    count: int
    elements: float


def layer_transfers(layout: Layout, *, s: int, b: int, h: int, kv_hidden: int | None = None,
                    top_k: int = 0, layer_params: float = 0.0,
                    recompute: str = "none") -> tuple[Transfer, ...]:
    """The collectives one layer needs per micro-batch, forward + backward (and the forward
    rerun under full recomputation), with their sizes in elements:

    * tensor parallel: 2 all-reduces of s·b·h forward and 2 backward (Korthikanti et al.:
      "four all-reduces in a single forward and backward pass"), 2 more in a full rerun;
    * + sequence parallel: 4 all-gathers and 4 reduce-scatters instead (the same bytes: a
      ring all-reduce is a reduce-scatter then an all-gather), and 2 more all-gathers in
      backward for the sequence-split projection inputs kept instead of whole ones (a full
      rerun gathers them itself, adding 2 reduce-scatters instead);
    * context parallel: cp-1 blocks of the local keys and values (2·b·(s/cp)·kv_hidden)
      forward, as ring steps or in one all-gather (torch's default); backward passes them
      again, and their gradients around the ring;
    * expert parallel: an all-to-all dispatching each token to its top-k experts and one
      combining them, forward and backward: 4 of b·s·top_k·h / cp (its own tokens);
    * FSDP: the layer's weights all-gathered forward and again backward, its gradients
      reduce-scattered;
    * pipeline (per stage boundary, not per layer): the activation s·b·h sent forward and
      its gradient back.
    """
    out: list[Transfer] = []
    sbh = s / layout.cp * b * h
    rerun = recompute == "full"
    if layout.tp > 1:
        if layout.sp:
            out.append(Transfer("sp", "all-gather", 6, sbh))
            out.append(Transfer("sp", "reduce-scatter", 4 + (2 if rerun else 0), sbh))
        else:
            out.append(Transfer("tp", "all-reduce", 4 + (2 if rerun else 0), sbh))
    if layout.cp > 1:
        kv = 2 * b * s / layout.cp * (kv_hidden or h)
        steps = layout.cp - 1
        out.append(Transfer("cp", "send/recv", steps * (3 if rerun else 2), kv))
        out.append(Transfer("cp", "send/recv (gradients)", steps, kv))
    if layout.ep > 1 and top_k:
        out.append(Transfer("ep", "all-to-all", 4 + (2 if rerun else 0), sbh * top_k))
    if layout.dp > 1 and layer_params:
        out.append(Transfer("fsdp", "all-gather", 2, layer_params / (layout.tp)))
        out.append(Transfer("fsdp", "reduce-scatter", 1, layer_params / (layout.tp)))
    if layout.pp > 1:
        out.append(Transfer("pp", "send/recv", 2, sbh / (layout.tp if layout.sp else 1)))
    return tuple(out)
