"""What this exact model should hold and peak at, from its shapes alone; FLOPs; and the
reference figures of the sources (Korthikanti et al. 2022, the seed documents).

Every number here is derived from the tensors the blocks save for backward, listed in
block_tensors(): for a pre-LN block in fp32 with fused attention that is
64·s·b·h + 4·(4·b·s + a·b·s) bytes, the figure measured on the prototype."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from demos import strategies
from demos.config import ConfigError, ModelConfig
from demos.segments import Segment
from demos.strategies import (
    CHECKPOINT_KEEPS,
    PLAIN_BLOCK_KEEPS,
    PlanInputs,
    StrategySpec,
    parse_strategy,
)
from i18n import gettext


@dataclass(frozen=True)
class HeldTensor:
    name: str
    bytes: int
    kind: str  # input, layernorm, matmul, attention, gelu, add, dropout


# The matmuls of a block, in h² weights each (with s·b tokens: 2·s·b·h²·units FLOPs forward).
MATMUL_UNITS = {"qkv": 3, "proj": 1, "fc": 4, "out": 4}


def _keeps(how: str) -> frozenset[str]:
    """Which of a block's tensors a way of running it keeps alive for backward."""
    if how == "keep":
        return PLAIN_BLOCK_KEEPS
    if how == "checkpoint":
        return CHECKPOINT_KEEPS
    return strategies.policy(how).keeps


def _sizes(cfg: ModelConfig, device: str) -> tuple[int, int, int, int]:
    """(element bytes, LayerNorm-statistics bytes, dropout-mask bytes, sbh) for a device."""
    e = cfg.dtype_bytes
    stats = e if device == "cpu" else 4  # CUDA keeps LayerNorm statistics in fp32
    mask = e if device == "cpu" else 1  # CPU dropout masks have the input dtype; CUDA bool
    return e, stats, mask, cfg.batch * cfg.seq_len * cfg.hidden


def _lse_bytes(cfg: ModelConfig, device: str) -> int:
    s = cfg.seq_len
    if device == "cuda" and cfg.dtype == "float32":  # memory-efficient kernel pads to 32
        s = math.ceil(s / 32) * 32
    return 4 * cfg.heads * cfg.batch * s


def block_tensors(cfg: ModelConfig, device: str = "cpu") -> list[HeldTensor]:
    """Every tensor a block makes that a strategy may keep for backward, with its bytes."""
    e, st, m, sbh = _sizes(cfg, device)
    bs = cfg.batch * cfg.seq_len
    out = [
        HeldTensor("input", sbh * e, "input"),
        HeldTensor("ln1.out", sbh * e, "layernorm"),
        HeldTensor("ln1.stats", 2 * bs * st, "layernorm"),
        HeldTensor("qkv", 3 * sbh * e, "matmul"),
        HeldTensor("attn.out", sbh * e, "attention"),
        HeldTensor("attn.lse", _lse_bytes(cfg, device), "attention"),
        HeldTensor("proj", sbh * e, "matmul"),
        HeldTensor("x2", sbh * e, "add"),
        HeldTensor("ln2.out", sbh * e, "layernorm"),
        HeldTensor("ln2.stats", 2 * bs * st, "layernorm"),
        HeldTensor("fc", 4 * sbh * e, "matmul"),
        HeldTensor("gelu", 4 * sbh * e, "gelu"),
        HeldTensor("out", sbh * e, "matmul"),
    ]
    if cfg.dropout > 0:
        out += [HeldTensor("drop1.mask", sbh * m, "dropout"),
                HeldTensor("drop1.out", sbh * e, "dropout"),
                HeldTensor("drop2.mask", sbh * m, "dropout"),
                HeldTensor("drop2.out", sbh * e, "dropout")]
    return out


def held_in_block(cfg: ModelConfig, how: str = "keep", device: str = "cpu") -> list[HeldTensor]:
    """The tensors one block keeps: how is 'keep', 'checkpoint' or a selective policy."""
    names = _keeps(how)
    return [t for t in block_tensors(cfg, device) if t.name in names]


def predicted_block_bytes(cfg: ModelConfig, device: str = "cpu") -> int:
    """Bytes one plain block keeps for backward, its input included.
    fp32, CPU, no dropout: 64·s·b·h + 4·(4·b·s + a·b·s)."""
    return sum(t.bytes for t in held_in_block(cfg, "keep", device))


def outside_blocks(cfg: ModelConfig, device: str = "cpu") -> list[HeldTensor]:
    """Held outside the blocks, loss excluded: the final LayerNorm's input, output and
    statistics, and the embedding's dropout mask."""
    e, st, m, sbh = _sizes(cfg, device)
    out = [HeldTensor("ln_f.in", sbh * e, "input"), HeldTensor("ln_f.out", sbh * e, "layernorm"),
           HeldTensor("ln_f.stats", 2 * cfg.batch * cfg.seq_len * st, "layernorm")]
    if cfg.dropout > 0:
        out.append(HeldTensor("emb.mask", sbh * m, "dropout"))
    return out


def logits_bytes(cfg: ModelConfig) -> int:
    """One b·s·V tensor: the logits, their log-softmax, or a gradient of either."""
    return cfg.batch * cfg.seq_len * cfg.vocab * cfg.dtype_bytes


def loss_held_bytes(cfg: ModelConfig) -> int:
    """Held by the loss at the end of forward: the log-softmax output and two scalars."""
    return logits_bytes(cfg) + 2 * cfg.dtype_bytes


def plan_for(cfg: ModelConfig, spec: StrategySpec | str, device: str = "cpu") -> list[Segment]:
    """The segments a strategy runs the layers in. Raises BudgetTooSmall for budgets."""
    inputs = PlanInputs(cfg.layers, predicted_block_bytes(cfg, device),
                        cfg.batch * cfg.seq_len * cfg.hidden * cfg.dtype_bytes)
    return strategies.plan(spec, inputs)


def _segment_held(cfg: ModelConfig, seg: Segment, device: str) -> int:
    if seg.mode == "keep":
        return seg.size * predicted_block_bytes(cfg, device)
    if seg.mode == "checkpoint":
        return sum(t.bytes for t in held_in_block(cfg, "checkpoint", device))
    # selective: every layer is its own checkpoint with a per-op policy
    return seg.size * sum(t.bytes for t in held_in_block(cfg, seg.policy, device))


def predicted_activation_bytes(cfg: ModelConfig, spec: StrategySpec | str,
                               device: str = "cpu") -> int:
    """Bytes held for backward at the end of forward, outside the loss (the log-softmax
    is loss_held_bytes). Offload moves them to CPU memory: 0 stay on the GPU."""
    spec = parse_strategy(spec)
    if spec.strategy.offloads:
        return 0
    plan = plan_for(cfg, spec, device)
    return (sum(_segment_held(cfg, seg, device) for seg in plan)
            + sum(t.bytes for t in outside_blocks(cfg, device)))


def parameter_count(cfg: ModelConfig) -> int:
    h, v = cfg.hidden, cfg.vocab
    block = 12 * h * h + 13 * h  # qkv, proj, fc, out with biases, and two LayerNorms
    return v * h + cfg.seq_len * h + cfg.layers * block + 2 * h + v * h


def parameter_bytes(cfg: ModelConfig) -> int:
    return parameter_count(cfg) * cfg.dtype_bytes


def predicted_peak_bytes(cfg: ModelConfig, spec: StrategySpec | str, device: str = "cpu") -> int:
    """Peak bytes above the parameters during one step (gradients included).

    Three moments compete. (1) In the loss's backward the log-softmax, its gradient and
    the logits' gradient (three b·s·V tensors) sit on top of everything held. (2) In the
    layers' backward, last layer first, the peak comes at a segment's first GELU backward:
    the earlier layers' held bytes, the segment's rebuilt layers (its last GELU output
    already released), the gradients made so far, and 9·s·b·h in flight (the gradients of
    the GELU output and input, 4h each, and of the residual stream). (3) At the very end
    every gradient exists, plus the one flowing into the embedding: this wins when the
    weights outweigh the activations. On the CPU this is exact to the byte without dropout
    (and within 1% with it)."""
    spec = parse_strategy(spec)
    e, _, _, sbh = _sizes(cfg, device)
    held = predicted_activation_bytes(cfg, spec, device)
    lg = logits_bytes(cfg)
    h, v = cfg.hidden, cfg.vocab
    head_grad = (v * h + 2 * h) * e  # LM head and final LayerNorm
    loss_peak = held + loss_held_bytes(cfg) + 2 * lg
    head_peak = held + lg + head_grad + sbh * e
    block_grad = (12 * h * h + 13 * h) * e
    out_grad = (4 * h * h + h) * e  # the MLP's output projection, first in a layer's backward
    gelu = 4 * sbh * e
    in_flight = 9 * sbh * e + 2 * e  # and the loss scalar and its unit gradient
    emb_mask = sum(t.bytes for t in outside_blocks(cfg, device) if t.name == "emb.mask")
    if spec.strategy.offloads:  # held bytes live in CPU memory; one layer comes back at a time
        plan, held_by = [Segment(0, cfg.layers, "checkpoint")], [0] * (cfg.layers + 1)
        rebuilt_of = {0: predicted_block_bytes(cfg, device)}
    else:
        plan = plan_for(cfg, spec, device)
        held_by = [emb_mask]
        for seg in plan:
            held_by.append(held_by[-1] + _segment_held(cfg, seg, device))
        rebuilt_of = {j: (held_by[j + 1] - held_by[j]) if seg.mode == "keep"
                      else seg.size * predicted_block_bytes(cfg, device)
                      + _cached_extra(cfg, seg, device) for j, seg in enumerate(plan)}
    layer_peak = 0
    for j, seg in enumerate(plan):
        grads = head_grad + (cfg.layers - seg.stop) * block_grad + out_grad
        layer_peak = max(layer_peak, held_by[j] + rebuilt_of[j] - gelu + grads + in_flight)
    # last, the token embedding's gradient (V·h) appears when every other gradient exists
    end_peak = parameter_bytes(cfg) + sbh * e + 2 * e
    return int(max(loss_peak, head_peak, layer_peak, end_peak))


def _cached_extra(cfg: ModelConfig, seg: Segment, device: str) -> int:
    if seg.mode != "selective":
        return 0
    e, _, _, sbh = _sizes(cfg, device)
    sizes = {t.name: t.bytes for t in block_tensors(cfg, device)} | {"output": sbh * e}
    return sum(sizes[name] for name in strategies.policy(seg.policy).rebuild_extra)


def korthikanti_layer_bytes(batch: int, seq: int, hidden: int, heads: int,
                            full: bool = False) -> float:
    """Korthikanti et al. 2022, 16-bit activations, 1-byte dropout masks: 34·s·b·h per
    layer with fused (flash) attention; full=True adds the attention scores, 5·a·s²·b."""
    value = 34.0 * seq * batch * hidden
    if full:
        value += 5.0 * heads * seq * seq * batch
    return value


# The source documents' worked example, a 2B-class model (the lessons and the quiz use it).
SEED_EXAMPLE: dict[str, int] = {"batch": 2, "seq": 1_024, "hidden": 2_048, "layers": 28,
                                "heads": 16, "vocab": 248_000}


def seed_example() -> dict[str, float]:
    """The seed documents' 2B-class example: hidden 2048, 28 layers, batch 2 x 1,024."""
    e = SEED_EXAMPLE
    b, s, h, n, vocab = e["batch"], e["seq"], e["hidden"], e["layers"], e["vocab"]
    layer = korthikanti_layer_bytes(b, s, h, e["heads"])
    return {
        "all_kept_bytes": n * layer,  # ~4.0 GB
        "checkpoint_inputs_bytes": 2.0 * b * s * h * n,  # ~0.23 GB
        "one_layer_rebuilt_bytes": layer,  # ~0.14 GB
        "logits_bytes": 4.0 * b * s * vocab,  # ~2.0 GB
    }


def step_flops(cfg: ModelConfig, spec: StrategySpec | str | None = None) -> dict[str, float]:
    """Matmul FLOPs of one step: forward, backward (2x forward), the recomputation a
    strategy adds, and the ratio to a step without checkpointing."""
    b, s, h, v, n = cfg.batch, cfg.seq_len, cfg.hidden, cfg.vocab, cfg.layers
    block = 2 * b * s * 12 * h * h + 2 * 2 * b * s * s * h / 2  # causal: half the scores
    head = 2 * b * s * h * v
    forward = n * block + head
    backward = 2 * forward
    recompute = 0.0
    if spec is not None:
        spec = parse_strategy(spec)
        for seg in plan_for(cfg, spec):
            if seg.mode == "checkpoint":
                recompute += seg.size * block
            elif seg.mode == "selective":
                recompute += seg.size * _selective_recompute_share(cfg, seg.policy) * block
    base = forward + backward
    every = n * block  # what checkpointing every layer adds: one more forward of the blocks
    return {"forward": forward, "backward": backward, "recompute": recompute,
            "total": base + recompute, "block_forward": block, "head_forward": head,
            "overhead": (base + recompute) / base,
            "recompute_every_layer": every, "overhead_every_layer": (base + every) / base}


# An effective rate for this model's training step on a small CPU (measured 60-110 GFLOP/s
# on 2 cores; lower under load). Used only to warn before a long run.
CPU_FLOPS_PER_SECOND = 8e10
TRACKED_STEP_COST = 3  # a step under the live-bytes tracker costs about 2-3 plain steps


def cpu_seconds(runs: Sequence[tuple[ModelConfig, StrategySpec | str, int]]) -> float:
    """Rough seconds on a CPU for (config, strategy, steps) runs, from step_flops; 0 when
    a config is invalid (the engine then explains why)."""
    try:
        flops = sum(step_flops(config, strategy)["total"] * steps
                    for config, strategy, steps in runs)
    except (ConfigError, ValueError, ZeroDivisionError):
        return 0.0
    return flops / CPU_FLOPS_PER_SECOND


def _selective_recompute_share(cfg: ModelConfig, policy: str | None) -> float:
    """Fraction of a block's matmul FLOPs (the attention products included) a policy
    reruns in backward: the matmuls its record lists, and attention unless it is saved."""
    b, s, h = cfg.batch, cfg.seq_len, cfg.hidden
    record = strategies.policy(policy)
    matmul = 2 * b * s * sum(MATMUL_UNITS.values()) * h * h
    attention = 2 * b * s * s * h
    redo = 2 * b * s * h * h * sum(MATMUL_UNITS[name] for name in record.recomputed_matmuls)
    if record.recomputes_attention:
        redo += attention
    return redo / (matmul + attention)


def explain_differences(cfg: ModelConfig, device: str = "cpu", lang: str = "en") -> str:
    """Why this model's bytes per layer differ from Korthikanti's 34·s·b·h, in `lang`."""
    ours = predicted_block_bytes(cfg, device)
    sbh = cfg.batch * cfg.seq_len * cfg.hidden
    theirs = korthikanti_layer_bytes(cfg.batch, cfg.seq_len, cfg.hidden, cfg.heads)
    e = cfg.dtype_bytes
    if cfg.dropout == 0:
        dropout = gettext(lang, "This model has no dropout, so no masks.")
    else:
        dropout = gettext(lang, "This model drops out after attention and after the MLP, not "
                                "inside attention, so the a·s² mask is absent.")
        dropout += " " + (gettext(lang, "On the CPU a mask has the activation's dtype.")
                          if device == "cpu" else gettext(lang, "Masks are 1-byte bool."))
    lines = [
        gettext(lang, "This model keeps {ours:.1f}·s·b·h bytes per layer; Korthikanti et al. "
                      "count 34·s·b·h ({ratio:.2f}×).", ours=ours / sbh, ratio=ours / theirs),
        "- " + gettext(lang, "Number size: Korthikanti assume 16-bit activations (2 bytes); "
                             "this run uses {dtype} ({bytes} bytes), so each kept tensor costs "
                             "{factor}× as much.", dtype=cfg.dtype, bytes=e, factor=f"{e / 2:g}"),
        "- " + gettext(lang, "Dropout: Korthikanti keep 1-byte dropout masks (attention, after "
                             "attention, after the MLP: 2·s·b·h plus 1·a·s²·b).") + " " + dropout,
        "- " + gettext(lang, "Attention: with fused attention (scaled_dot_product_attention) "
                             "the s×s scores are never stored; only the output and a "
                             "log-sum-exp per head and token are, so the 5·a·s²·b term is "
                             "gone."),
        "- " + gettext(lang, "Kept tensors in units of s·b·h elements: LayerNorm inputs and "
                             "outputs 4, fused QKV 3, attention output 1, MLP 4h GELU input and "
                             "output 8: 16, plus LayerNorm statistics and the log-sum-exp (b·s "
                             "numbers each)."),
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- what sets a peak

LOSS_OPS = ("softmax", "nll_loss", "cross_entropy")
PEAK_PARTS = ("activations", "logits", "gradients", "temporaries")
# the parts checkpointing can lower: what the forward keeps (and, in backward, rebuilds)
LOWERED_BY_CHECKPOINTING = frozenset({"activations"})


@dataclass(frozen=True)
class PeakCause:
    """Where a measured step peaked and which part of memory set the peak: ids and
    numbers from the run, worded by the UI.

    `where`: forward | loss | loss-backward (the loss's gradient, backward's first ops) |
    recompute | backward (of `layer`) | head-backward (embedding and LM head, outside the
    layers). `part`: the largest of PEAK_PARTS at the peak, `part_bytes` its bytes."""

    strategy: str
    where: str
    layer: int | None
    op: str | None
    peak_bytes: int
    part: str
    part_bytes: int

    @property
    def share(self) -> float:
        return self.part_bytes / self.peak_bytes if self.peak_bytes else 0.0

    @property
    def checkpointing_lowers_it(self) -> bool:
        return self.part in LOWERED_BY_CHECKPOINTING


def peak_where(phase: str | None, layer: int | None, op: str | None) -> str:
    """The place of a peak as an id (see PeakCause.where)."""
    if phase == "loss":
        return "loss"
    if phase in ("forward", "recompute"):
        return phase
    if layer is not None:
        return "backward"
    if op is not None and any(name in op for name in LOSS_OPS):
        return "loss-backward"
    return "head-backward"


def peak_cause(result) -> PeakCause | None:
    """What set a measured result's peak (a demos.results.StrategyResult), from the
    tracker's breakdown at the peak and the op there; None when it did not run."""
    if not result.fits or result.peak_bytes is None or not result.breakdown:
        return None
    parts = {p: int(result.breakdown.get(p, 0) or 0) for p in PEAK_PARTS}
    part = max(parts, key=lambda p: parts[p])
    return PeakCause(result.strategy, peak_where(result.peak_phase, result.peak_layer,
                                                 result.peak_op),
                     result.peak_layer, result.peak_op, int(result.peak_bytes), part,
                     parts[part])


def shared_peaks(results) -> list[list[str]]:
    """Groups (two or more) of checkpointing strategies that reached exactly the same
    peak: a sign that something checkpointing does not touch sets it."""
    groups: dict[int, list[str]] = {}
    for r in results:
        if r.fits and r.peak_bytes is not None and not strategies.parse_strategy(
                r.strategy).strategy.baseline:
            groups.setdefault(int(r.peak_bytes), []).append(r.strategy)
    return [names for names in groups.values() if len(names) > 1]
