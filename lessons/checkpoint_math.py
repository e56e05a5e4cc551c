"""The formulas the lessons teach, as pure functions.

Units: bytes unless a name says otherwise; GB means 10**9 bytes (as in the sources' figures).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from i18n.units import format_gb  # noqa: F401 - the one formatter, re-exported
from memory.worked_examples import korthikanti_layer_bytes

GB = 1e9


# --------------------------------------------------------------------------------------
# Segments: memory(k) = k checkpoints + one segment of n/k layers rebuilt (Chen et al. 2016)
# --------------------------------------------------------------------------------------


def segment_memory(layers: float, segments: float, boundary: float = 1.0,
                   layer: float = 1.0) -> float:
    """Activation memory with `segments` equal segments: the kept segment inputs
    (`boundary` each) plus one whole segment of layers (`layer` each) rebuilt at a time.

    With boundary == layer == 1 this is Chen et al.'s n/k + k.
    """
    if segments <= 0 or layers <= 0:
        raise ValueError("layers and segments must be positive")
    return segments * boundary + (layers / segments) * layer


def optimal_segments(layers: float, boundary: float = 1.0, layer: float = 1.0) -> float:
    """The (real-valued) segment count that minimises `segment_memory`: √(n·layer/boundary).

    For boundary == layer this is √n; a layer that keeps much more than its input (a
    transformer layer keeps ~17x its input) pushes the optimum towards one segment per layer.
    """
    return math.sqrt(layers * layer / boundary)


def best_segment_count(layers: int, boundary: float = 1.0, layer: float = 1.0) -> int:
    """The best whole number of segments (1..layers) under `segment_memory`."""
    return min(range(1, layers + 1),
               key=lambda k: (segment_memory(layers, k, boundary, layer), k))


def best_segment_length(layers: int, boundary: float = 1.0, layer: float = 1.0) -> int:
    """The best whole number of layers per segment: ⌈n/L⌉ kept inputs plus L layers rebuilt."""
    return min(range(1, layers + 1),
               key=lambda length: (uniform_segments_memory(layers, length, boundary, layer),
                                   length))


def uniform_segments_memory(layers: int, length: int, boundary: float = 1.0,
                            layer: float = 1.0) -> float:
    """Activation memory with segments of `length` whole layers (the last one may be shorter):
    ⌈n/length⌉ kept segment inputs plus one whole segment rebuilt at a time. This is what
    Megatron's uniform recomputation of k layers per segment keeps."""
    if layers < 1 or length < 1:
        raise ValueError("layers and length must be at least 1")
    return math.ceil(layers / length) * boundary + min(length, layers) * layer


def every_layer_best_up_to(boundary: float = 2.0, layer: float = 34.0,
                           limit: int = 10_000) -> int:
    """The deepest model for which a checkpoint at every layer is still the best uniform
    spacing (ties go to every layer): about 34 layers for a GPT-style layer (2 vs 34 units).
    From one layer deeper on, segments of two or more layers keep less."""
    deepest = 0
    for layers in range(1, limit + 1):
        if best_segment_length(layers, boundary, layer) == 1:
            deepest = layers
        elif deepest:
            return deepest
    return deepest


def minimum_memory(layers: float, boundary: float = 1.0, layer: float = 1.0) -> float:
    """segment_memory at its real-valued optimum: 2·√(n·boundary·layer)."""
    return 2.0 * math.sqrt(layers * boundary * layer)


def optimal_segment_length(layers: float, boundary: float, layer: float) -> float:
    """Layers per segment at the optimum: √(n·boundary/layer)."""
    return math.sqrt(layers * boundary / layer)


# --------------------------------------------------------------------------------------
# The recursive variant: O(log n) memory for O(n log n) forward compute
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecursiveCost:
    layers: int
    forwards: int  # layer forward computations in one training step, the first pass included
    peak_boundaries: int  # most layer inputs held at once (each one unit)


def recursive_cost(layers: int) -> RecursiveCost:
    """Bisection recomputation on a chain of `layers` single-tensor layers.

    To backpropagate through the layers [a, b) while holding the input of layer a: if it is
    one layer, recompute it and backpropagate; otherwise run forward to the middle, keep
    that one tensor, handle the right half, drop it, and handle the left half. Only one
    tensor per level of the recursion is held: about log2(n) + 1 at once.
    """
    if layers < 1:
        raise ValueError("layers must be at least 1")
    forwards = layers  # the ordinary forward pass (it keeps only the input)
    peak = 1

    def walk(start: int, stop: int, held: int) -> None:
        nonlocal forwards, peak
        if stop - start == 1:
            forwards += 1  # rebuild this layer to backpropagate through it
            peak = max(peak, held + 1)
            return
        middle = (start + stop) // 2
        forwards += middle - start
        peak = max(peak, held + 1)
        walk(middle, stop, held + 1)
        walk(start, middle, held)

    walk(0, layers, 1)
    return RecursiveCost(layers, forwards, peak)


# --------------------------------------------------------------------------------------
# Chen et al.'s placement under a memory budget
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BudgetPlan:
    budget: float
    checkpoints: tuple[int, ...]  # indices of the layers whose output is kept
    stored: float  # x: total size of the kept outputs
    largest_segment: float  # y: the most memory one segment needs when it is rebuilt

    @property
    def memory(self) -> float:
        """Chen et al.'s estimate of activation memory: x + y."""
        return self.stored + self.largest_segment

    def segments(self, layers: int) -> list[tuple[int, int]]:
        """The (first, last) layer index of each segment, the checkpoint layer closing it."""
        bounds, start = [], 0
        for index in self.checkpoints:
            bounds.append((start, index))
            start = index + 1
        if start < layers:
            bounds.append((start, layers - 1))
        return bounds


def budget_placement(sizes: list[float], budget: float) -> BudgetPlan:
    """Walk the layers in order, adding up their output sizes; whenever the running total
    passes the budget, keep that layer's output as a checkpoint and start a new segment."""
    running, stored, largest = 0.0, 0.0, 0.0
    checkpoints: list[int] = []
    for index, size in enumerate(sizes):
        running += size
        if running > budget:
            checkpoints.append(index)
            stored += size
            largest = max(largest, running)
            running = 0.0
    largest = max(largest, running)
    return BudgetPlan(budget, tuple(checkpoints), stored, largest)


def best_budget(sizes: list[float], budgets: list[float]) -> BudgetPlan:
    """The plan with the least x + y among `budgets` (Chen et al. search around √(x·y))."""
    return min((budget_placement(sizes, budget) for budget in budgets),
               key=lambda plan: (plan.memory, plan.budget))


# --------------------------------------------------------------------------------------
# A transformer layer (Korthikanti et al. 2022)
# --------------------------------------------------------------------------------------


def layer_activation_parts(batch: int, seq: int, hidden: int, heads: int,
                           efficient_attention: bool = True) -> dict[str, float]:
    """Bytes one GPT-style layer keeps for backward, by part: 16-bit activations, 1-byte
    dropout masks, MLP width 4h. Efficient (fused) attention never stores the s×s scores."""
    sbh = seq * batch * hidden
    return {
        "attention (Q, K, V, output, projections)": 11 * sbh,
        "attention scores (softmax, dropout)": (0 if efficient_attention
                                                else 5 * heads * seq * seq * batch),
        "MLP": 19 * sbh,
        "layer norms": 4 * sbh,
    }


def layer_activation_bytes(batch: int, seq: int, hidden: int, heads: int = 1,
                           efficient_attention: bool = True) -> float:
    """s·b·h·(34 + 5·a·s/h) bytes, or 34·s·b·h with efficient attention: Korthikanti's
    formula, written once in memory.theory (layer_activation_parts splits it by part)."""
    return korthikanti_layer_bytes(batch, seq, hidden, heads, full=not efficient_attention)


def layer_input_bytes(batch: int, seq: int, hidden: int, bytes_per_value: int = 2) -> float:
    """One layer's input: b·s·h values (2 bytes each in 16-bit): what a checkpoint keeps."""
    return float(bytes_per_value * batch * seq * hidden)


@dataclass(frozen=True)
class TransformerActivations:
    per_layer: float
    layer_input: float
    layers: int

    @property
    def all_kept(self) -> float:
        return self.per_layer * self.layers

    @property
    def checkpoint_inputs(self) -> float:
        return self.layer_input * self.layers

    @property
    def one_layer_rebuilt(self) -> float:
        return self.per_layer

    @property
    def checkpointed(self) -> float:
        """Every-layer checkpointing: every layer's input, plus one layer rebuilt."""
        return self.checkpoint_inputs + self.one_layer_rebuilt

    @property
    def saving(self) -> float:
        """The fraction of activation memory every-layer checkpointing frees."""
        return 1.0 - self.checkpointed / self.all_kept


def transformer_activations(batch: int, seq: int, hidden: int, layers: int, heads: int = 1,
                            efficient_attention: bool = True) -> TransformerActivations:
    return TransformerActivations(
        layer_activation_bytes(batch, seq, hidden, heads, efficient_attention),
        layer_input_bytes(batch, seq, hidden),
        layers,
    )


def selective_saving(seq: int, hidden: int, heads: int) -> float:
    """Fraction of a layer's activations selective recomputation frees by dropping only
    the attention scores: (5as/h) / (34 + 5as/h)."""
    scores = 5 * heads * seq / hidden
    return scores / (34 + scores)


def layer_constant_parts(*, mlp_ratio: float = 4.0, kv_fraction: float = 1.0,
                         gated_mlp: bool = False, dropout: bool = True) -> dict[str, float]:
    """Bytes per s·b·h one transformer layer keeps for backward, by part, in Korthikanti et
    al.'s accounting (16-bit activations, 1-byte dropout masks, fused attention so no s×s
    term, a norm keeps only its input). The defaults are GPT-2/3's layer: 11 + 19 + 4 = 34.

    Attention: the normed input of the Q/K/V projections (2), Q (2), K and V (2 each,
    times `kv_fraction` = KV heads / heads under grouped-query attention), the attention
    output that feeds the output projection (2), and a dropout mask (1).
    MLP of width r·h (`mlp_ratio`): its input (2); plain GELU keeps the activation's input
    and output (2r each); a gated SwiGLU MLP keeps gate, SiLU(gate), up and their product
    (2r each, 8r in all); a dropout mask (1).
    Two norms (LayerNorm or RMSNorm) keep their inputs (2 each).
    """
    mask = 1 if dropout else 0
    return {
        "attention": 2 + 2 + 4 * kv_fraction + 2 + mask,
        "mlp": 2 + (8 if gated_mlp else 4) * mlp_ratio + mask,
        "norms": 4,
    }


def layer_constant(**shape: float | bool) -> float:
    """The sum of `layer_constant_parts`: 34 for a GPT-2/3-style layer."""
    return sum(layer_constant_parts(**shape).values())  # type: ignore[arg-type]


# Llama-3-8B's shape: hidden 4,096, SwiGLU width 14,336, 32 query heads, 8 KV heads.
LLAMA3_8B_SHAPE = {"hidden": 4_096, "mlp": 14_336, "heads": 32, "kv_heads": 8, "layers": 32}


def llama_layer_constant(hidden: int = LLAMA3_8B_SHAPE["hidden"],
                         mlp: int = LLAMA3_8B_SHAPE["mlp"],
                         heads: int = LLAMA3_8B_SHAPE["heads"],
                         kv_heads: int = LLAMA3_8B_SHAPE["kv_heads"]) -> float:
    """The constant for a Llama-style layer: SwiGLU, RMSNorm, grouped-query attention, no
    dropout (49 for Llama-3-8B's shape, against 34 for GPT-3's)."""
    return sum(llama_layer_parts(hidden, mlp, heads, kv_heads).values())


def llama_layer_parts(hidden: int = LLAMA3_8B_SHAPE["hidden"],
                      mlp: int = LLAMA3_8B_SHAPE["mlp"],
                      heads: int = LLAMA3_8B_SHAPE["heads"],
                      kv_heads: int = LLAMA3_8B_SHAPE["kv_heads"]) -> dict[str, float]:
    """A Llama-style layer's bytes per s·b·h by part (norms, attention, mlp), from the
    planner's tensor list (memory.worked_examples.constant_parts): 16-bit, a fused GQA-aware
    attention kernel, RMSNorm as Hugging Face computes it (in fp32)."""
    from memory.architectures import custom
    from memory.worked_examples import constant_parts

    return constant_parts(custom(1, hidden, heads, kv_heads, mlp, "swiglu", "rmsnorm", 1, False))


def score_term_dominates_from(head_dim: int) -> int:
    """The shortest sequence at which a layer's attention-score term (Korthikanti's
    5·a·s²·b bytes, without a fused kernel) outweighs all the rest (34·s·b·h): 5·a·s > 34·h,
    s > 6.8·h/a = 6.8 × the head dimension. Found from the formula, one head."""
    rest = korthikanti_layer_bytes(1, 1, head_dim, 1)  # 34·h per token, a = 1
    return math.floor(rest / 5.0) + 1  # 5·a·s²·b > 34·s·b·h from s = ⌊34·h/(5a)⌋ + 1


def internals_ratio() -> float:
    """How many times its input a transformer layer keeps inside it: (34 - 2) / 2 = 16."""
    return (34 - 2) / 2


# --------------------------------------------------------------------------------------
# Logits and the cost of a step
# --------------------------------------------------------------------------------------


def logits_bytes(batch: int, seq: int, vocab: int, bytes_per_value: int = 4) -> float:
    """b·s·V·bytes: one score per vocabulary entry at every position."""
    return float(batch * seq * vocab * bytes_per_value)


def recompute_overhead(backward_ratio: float = 2.0, extra_forwards: float = 1.0) -> float:
    """Extra time per step, as a fraction of a step without checkpointing, if backward costs
    `backward_ratio` forwards and checkpointing adds `extra_forwards` forwards."""
    return extra_forwards / (1.0 + backward_ratio)


def extra_share_of_new_step(backward_ratio: float = 2.0, extra_forwards: float = 1.0) -> float:
    """The same extra work as a share of the *new*, longer step: 1/4 when 1/3 is added."""
    return extra_forwards / (1.0 + backward_ratio + extra_forwards)


def offload_hidden_from(bytes_per_sbh: float, flops_per_s: float,
                        link_bytes_per_s: float) -> float:
    """The hidden size from which moving `bytes_per_sbh`·s·b·h bytes per layer to the host
    takes no longer than the layer's forward (24·b·s·h² FLOPs), so the copy can hide behind
    the compute: h ≥ bytes_per_sbh · flops_per_s / (24 · link_bytes_per_s)."""
    return bytes_per_sbh * flops_per_s / (24.0 * link_bytes_per_s)


def percent_change(before: float, after: float) -> float:
    return (after - before) / before
