"""Lesson 10's arithmetic (the practitioner's toolbox): the pipeline bubble by schedule and
what recomputation does to it, a mixture-of-experts layer's router and dispatch buffers,
the capacity a dropping router would allow, causal attention's work per context-parallel
rank with and without torch's head-tail shard, Ulysses' limit, what grows first at a long
context, padding against packing, model against hardware FLOPs, and what a LoRA adapter
keeps. Pure arithmetic, no torch; tests/lessons/test_toolbox.py measures the facts a CPU
can show (autocast's kept dtypes, LoRA's kept inputs, packed against padded batches,
CheckpointError, the wrapper's names, the router's fp32 probabilities).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memory.architectures import Architecture
from memory.layer import forward_flops, layer_flops, rerun_flops

# ---------------------------------------------------------------------------- pipelines
# Time units of one micro-batch through one stage: forward 1, backward 2 (input and weight
# gradients, each about one forward), a recomputed forward 1 more, in backward.
FORWARD = 1.0
BACKWARD = 2.0


@dataclass(frozen=True)
class PipelineRow:
    """One schedule of a p-stage pipeline over m micro-batches (v chunks per GPU)."""

    schedule: str  # gpipe | 1f1b | interleaved
    bubble: float  # idle share of the ideal step: (p-1)/m, or (p-1)/(v·m) interleaved
    bubble_units: float  # idle time per GPU, in forwards of one micro-batch through a stage
    bubble_units_recompute: float  # the same with full recomputation
    in_flight: float  # micro-batches whose activations the first stage holds at its peak


def bubble_fraction(p: int, m: int, chunks: int = 1) -> float:
    """Idle time over ideal compute time per GPU: (p - 1)/m for GPipe and 1F1B (the same
    bubble), (p - 1)/(v·m) for the interleaved schedule with v chunks per GPU (Narayanan et
    al. 2021)."""
    return (p - 1) / (chunks * m)


def bubble_units(p: int, chunks: int = 1, recompute: bool = False) -> float:
    """The bubble in time, in forwards of one micro-batch through a whole stage: (p - 1)
    times a forward and a backward, divided by v when interleaved. Recomputation adds a
    forward to every backward, so the bubble in time grows with it (×4/3 here) while its
    share of the longer step stays (p - 1)/m."""
    backward = BACKWARD + (FORWARD if recompute else 0.0)
    return (p - 1) * (FORWARD + backward) / chunks


def first_stage_in_flight(schedule: str, p: int, m: int, chunks: int = 1) -> float:
    """Micro-batches the first stage holds at its peak (as memory.parallel.in_flight):
    GPipe all m, 1F1B at most p, interleaved Megatron's warm-up over v chunks."""
    from memory.parallel import Layout, in_flight

    return in_flight(Layout(pp=p, microbatches=m, schedule=schedule, chunks=chunks))


def pipeline_table(p: int, m: int, chunks: int) -> tuple[PipelineRow, ...]:
    """GPipe, 1F1B and interleaved 1F1B side by side for one p, m, v."""
    rows = []
    for schedule, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", chunks)):
        rows.append(
            PipelineRow(
                schedule,
                bubble_fraction(p, m, v),
                bubble_units(p, v),
                bubble_units(p, v, recompute=True),
                first_stage_in_flight(schedule, p, m, v),
            )
        )
    return tuple(rows)


# ----------------------------------------------------------------- mixture of experts
def router_probability_bytes(tokens: float, experts: int, value_bytes: int = 4) -> float:
    """The router's softmax output, tokens × experts, kept by softmax for its backward:
    fp32 in transformers' Mixtral and Qwen3-MoE routers (softmax of router_logits.float(),
    or softmax(..., dtype=torch.float))."""
    return tokens * experts * value_bytes


def dispatch_bytes(tokens: float, top_k: int, hidden: int, value_bytes: int = 2) -> float:
    """The tokens copied to their experts (one copy per chosen expert), tokens × k × h: the
    dispatch buffer an all-to-all sends, and in transformers' loop the `hidden_states[token_idx]`
    gathers each expert's first linear keeps; the combine side is as large again."""
    return tokens * top_k * hidden * value_bytes


def expert_capacity(tokens: int, experts: int, top_k: int, factor: float) -> int:
    """Slots per expert in a capacity-limited (dropping) router, GShard/Switch style:
    ceil(factor · tokens · k / E). transformers' Mixtral and Qwen3-MoE have no capacity."""
    return math.ceil(factor * tokens * top_k / experts)


def dropped_assignments(load: list[int], capacity: int) -> int:
    """Token-expert assignments a capacity-limited router drops for experts loaded `load`."""
    return sum(max(0, count - capacity) for count in load)


# ------------------------------------------------------------------------ long context
def causal_work_per_rank(cp: int, balanced: bool) -> list[float]:
    """Each context-parallel rank's share of a causal mask's query-key pairs, as a multiple
    of the mean (large s). Contiguous shards: rank r holds rows r·s/cp to (r+1)·s/cp, whose
    pairs grow with r: (2r + 1)/cp times the mean, the last rank (2·cp - 1)/cp. Head-tail
    (torch's default _HeadTailLoadBalancer): rank r holds chunks r and 2·cp - 1 - r of
    2·cp, the same work on every rank."""
    chunks = 2 * cp

    def rows(chunk: int) -> float:  # pairs of chunk `chunk` of `chunks`, each of s/chunks rows
        return chunk + 0.5

    if balanced:
        work = [rows(r) + rows(chunks - 1 - r) for r in range(cp)]
    else:
        work = [rows(2 * r) + rows(2 * r + 1) for r in range(cp)]
    mean = sum(work) / cp
    return [w / mean for w in work]


def ulysses_max_degree(heads: int, kv_heads: int) -> tuple[int, int]:
    """Ulysses' all-to-all turns s/sp tokens of every head into all s tokens of heads/sp
    heads, so sp can be at most the number of query heads, and at most the number of KV
    heads before the keys and values must be repeated across ranks."""
    return heads, kv_heads


def score_bytes(seq: int, heads: int, batch: int = 1, value_bytes: int = 2) -> float:
    """One layer's materialized attention scores (or probabilities): b·a·s² values."""
    return float(batch * heads * seq * seq * value_bytes)


# ------------------------------------------------------------------- packing, padding
def padded_tokens(lengths: list[int]) -> int:
    """Token slots of a padded batch: every sequence padded to the longest."""
    return len(lengths) * max(lengths)


def packed_tokens(lengths: list[int]) -> int:
    """Token slots of the same sequences packed into one row (a document mask keeps them
    apart): the real tokens only."""
    return sum(lengths)


# ---------------------------------------------------------------------------- FLOPs
def hardware_to_model_flops(
    arch: Architecture, batch: int, seq: int, early_stop: bool = False
) -> float:
    """HFU / MFU for every layer checkpointed: (3·forward + L·rerun) / (3·forward), the
    forward's FLOPs counted by memory.layer (the layers and the LM head), backward twice
    the forward. A full rerun of every layer (reentrant, or a dropout at the layer's end)
    adds the layer's forward; torch's non-reentrant early stop skips the MLP's last
    matmul (memory.layer.rerun_flops)."""
    model = 3.0 * forward_flops(arch, batch, seq)
    rerun = rerun_flops(arch, batch, seq) if early_stop else layer_flops(arch, batch, seq)
    return (model + arch.layers * rerun) / model


# ------------------------------------------------------------------------------- LoRA
def lora_kept_numbers(width: int, adapter_cast: bool, dropout: bool) -> dict[str, int]:
    """What one LoRA adapter's A path keeps per token beyond the tensors the layer keeps
    anyway, for an input of `width` (peft 0.21.2, peft/tuners/lora/layer.py,
    Linear.forward: lora_B(lora_A(dropout(x))) after x = self._cast_input_dtype(x,
    lora_A.weight.dtype); the frozen base linear keeps no input of its own).

    `adapter_cast`: the adapter's dtype differs from the input's (PEFT's default
    autocast_adapter_dtype=True keeps adapters fp32 beside a 16-bit base): the cast is a new
    tensor, which lora_A (or dropout) takes. Returns counts of numbers per token: `copy` in
    the adapter's dtype (the cast, or the dropped copy) and `mask` (dropout's mask)."""
    if adapter_cast:
        return {"copy": width, "mask": width if dropout else 0}
    return {"copy": width if dropout else 0, "mask": width if dropout else 0}


def lora_own_inputs(hidden: int, mlp_width: int) -> int:
    """Numbers per token that 16-bit adapters without dropout on every linear of a Llama-style
    layer make the frozen layer keep: lora_A keeps x itself, one tensor per distinct input
    (the norm's output that q, k and v read, the one gate and up read, and down's input);
    a frozen linear keeps no input, and o's input, the attention's output, is kept by the
    attention anyway. tests/lessons/test_toolbox.py measures it on a small Llama layer."""
    return 2 * hidden + mlp_width
