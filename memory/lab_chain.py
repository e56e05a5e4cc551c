"""The lab's model as a chain for checkpoint placement (memory.placement.Chain), its layers
equal or of unequal MLP widths, and what torch's FLOP counter counts of a placement.

The terms are memory.theory's prediction of a step's peak for the lab's GPT model
(predicted_peak_moments: the loss, the LM head, each layer's backward, the end), written
per layer so that a layer may be wider than the others: the layer's kept tensors
(memory.layer.layer_tensors of its own architecture), its weight gradient, and what its
MLP's backward has in flight. For equal layers the chain's need of a plan is theory's
predicted peak of the same segments (tests/demos/test_placement_lab.py holds them equal).

Shapes (`SHAPES`): 'equal' (every MLP 4h wide, the lab's model) and 'unequal' (a first
block 16h wide, then 2h and 6h in turn: the same 4h on average after the first), so the
methods that treat layers as equal (√N, every layer, first-k) are no longer the best."""

from __future__ import annotations

from memory.architectures import Architecture, of_config
from memory.config import ConfigError, ModelConfig
from memory.layer import (
    attention_flops,
    early_stop_skips,
    head_flops,
    layer_flops,
    layer_tensors,
    norm_tensors,
)
from memory.placement import Chain
from memory.segments import Segment

SHAPES = ("equal", "unequal")
# torch's FLOP counter counts 2 matmuls of b·a·s²·d in a fused attention's forward and 5 in
# its backward where it has a formula for the kernel (memory.theory.counted_flops)
ATTENTION_FORWARD, ATTENTION_BACKWARD = 4, 10


def mlp_widths(cfg: ModelConfig, shape: str) -> tuple[int, ...]:
    """Each layer's MLP width for a shape of SHAPES."""
    h, n = cfg.hidden, cfg.layers
    if shape == "equal":
        return (4 * h,) * n
    if shape == "unequal":
        return (16 * h, *((2 * h, 6 * h)[i % 2] for i in range(n - 1)))
    raise ConfigError(f"shape {shape!r} is unknown; allowed: {', '.join(SHAPES)}")


def layer_archs(cfg: ModelConfig, widths: tuple[int, ...]) -> list[Architecture]:
    """Each layer's architecture: the lab's, with its own MLP width."""
    if cfg.arch != "gpt":
        raise ConfigError("unequal layers: the lab's gpt layers only (arch=gpt)")
    if len(widths) != cfg.layers:
        raise ConfigError(f"widths: one per layer ({cfg.layers})")
    base = of_config(cfg)
    return [base.with_(mlp_width=w) for w in widths]


def parameter_bytes(cfg: ModelConfig, widths: tuple[int, ...]) -> int:
    archs = layer_archs(cfg, widths)
    return (sum(a.block_params() for a in archs) + archs[0].embedding_params()) * cfg.dtype_bytes


def chain(
    cfg: ModelConfig, widths: tuple[int, ...], device: str = "cpu", attention_counted: bool = False
) -> Chain:
    """The model's layers as a placement chain: bytes as one step holds them above the
    parameters (the terms of memory.theory.predicted_peak_moments, per layer), rebuild
    costs as torch's FLOP counter counts them (`attention_counted`: whether the installed
    counter has a formula for the fused attention kernel on this device)."""
    archs = layer_archs(cfg, widths)
    b, s, e = cfg.batch, cfg.seq_len, cfg.dtype_bytes
    sbh = b * s * cfg.hidden
    n, arch = cfg.layers, archs[0]
    mask = (e if device == "cpu" else 1) if cfg.dropout > 0 else 0  # the embedding's dropout
    full = [
        sum(t.bytes for t in layer_tensors(a, b, s, e, fused=True, device=device)) for a in archs
    ]
    grads = [a.block_params() * e for a in archs]
    head_grad = (arch.embedding_params() - (arch.vocab + arch.positions) * arch.hidden) * e
    after = []
    for i, a in enumerate(archs):
        # the MLP's backward: its GELU output released; the residual's gradient and the
        # GELU output's and input's in flight, the output projection's weight gradient,
        # and the loss scalar and its unit gradient
        m = b * s * a.mlp_width * e
        out_grad = (a.mlp_width * a.hidden + a.hidden) * e
        after.append(head_grad + sum(grads[i + 1 :]) + out_grad + sbh * e + m + 2 * e)
    logits = b * s * cfg.vocab * e
    final_norm = sum(t.bytes for t in norm_tensors(arch, "ln_f", b, s, e, device))
    # the loss's backward: the log-softmax, its gradient and the logits' gradient (and two
    # scalars); the head's: the logits' gradient, the head's weight gradient, one s·b·h
    top = final_norm + max(3 * logits + 2 * e, logits + head_grad + sbh * e)
    floor = parameter_bytes(cfg, widths) + sbh * e + 2 * e
    unit = b * arch.heads * s * s * arch.head_dim if attention_counted else 0
    cost = [
        layer_flops(a, b, s) - attention_flops(a, b, s) + ATTENTION_FORWARD * unit for a in archs
    ]
    skip = [early_stop_skips(a, b, s) for a in archs]
    return Chain(full, [sbh * e] * n, cost, skip, after, top=top, base=sbh * mask, floor=floor)


def counted_flops(
    cfg: ModelConfig, widths: tuple[int, ...], plan: list[Segment], attention_counted: bool = False
) -> dict[str, float]:
    """What torch's FlopCounterMode counts around one step with this placement: the
    linear layers and the head forward, twice that backward, the attention where counted,
    and the recomputation (the chain's rebuild costs, early stop included)."""
    archs = layer_archs(cfg, widths)
    b, s = cfg.batch, cfg.seq_len
    unit = b * archs[0].heads * s * s * archs[0].head_dim if attention_counted else 0
    linears = sum(layer_flops(a, b, s) - attention_flops(a, b, s) for a in archs)
    base = (
        3 * (linears + head_flops(archs[0], b, s))
        + cfg.layers * (ATTENTION_FORWARD + ATTENTION_BACKWARD) * unit
    )
    recompute = chain(cfg, widths, attention_counted=attention_counted).recompute(plan)
    return {"base": base, "recompute": recompute, "total": base + recompute}
