"""The published anchors and the course's worked examples, computed from the formulas so
the lessons and quiz items follow them: Korthikanti et al.'s 34·s·b·h per layer, the
source pages' 2B-class example, the parts of a layer's constant, the Llama 3.1 8B plans.
"""

from __future__ import annotations

from memory.architectures import PRESETS, Architecture
from memory.footprint import (
    PlannerInputs,
    activations,
    fits,
    minimal_some_layers,
    state_bytes,
    strategy_row,
)
from memory.hardware import GPUS
from memory.layer import layer_bytes, layer_tensors


def korthikanti_bytes(arch: Architecture, batch: int, seq: int, fused: bool) -> int:
    """This formula's 16-bit GPU layer without the b·s-sized statistics (norm statistics,
    log-sum-exp), which Korthikanti et al. leave out: 34·s·b·h with a fused kernel and
    s·b·h·(34 + 5·a·s/h) without, for a GPT layer with dropout."""
    tensors = layer_tensors(arch, batch, seq, 2, fused=fused, device="cuda")
    return sum(t.bytes for t in tensors if t.kind != "stats" and t.name != "attn.lse")


PARTS = {"norms": ("input", "x2", "ln1.", "ln2."), "mlp": ("fc", "gelu", "gate", "silu", "up",
                                                       "gated", "drop2.")}


def constant_parts(arch: Architecture, act_bytes: int = 2) -> dict[str, float]:
    """One plain layer's bytes per s·b·h by part (norms, attention, MLP), on a GPU with a
    fused attention kernel, without the b·s-sized statistics that Korthikanti et al. leave
    out (as korthikanti_bytes): a norm's tensors (its input, for RMSNorm its fp32 copy, the
    normalised value and its output, which feeds the next projections), the attention's
    (q, k, v or the fused QKV buffer, the attention output, its dropout mask) and the MLP's.
    16 + 5 + 28 = 49 for Llama 3.1 8B in 16-bit; 8 + 9 + 17 = 34 for a GPT layer."""
    batch, seq = 1, 1024
    sbh = batch * seq * arch.hidden
    out = {"norms": 0.0, "attention": 0.0, "mlp": 0.0}
    for t in layer_tensors(arch, batch, seq, act_bytes, fused=True, device="cuda"):
        if t.kind == "stats" or t.name == "attn.lse":
            continue
        part = next((p for p, names in PARTS.items()
                     if t.name in names or t.name.startswith(tuple(n for n in names
                                                                   if n.endswith(".")))),
                    "attention")
        out[part] += t.bytes / sbh
    return out


def course_examples() -> dict[str, float]:
    """The plans lesson 7's quiz items reason about (bytes, shares, counts), computed here so
    the items follow the formulas. Llama 3.1 8B at s = 4,096, b = 1, fused attention:
    * bf16: one layer's activations, all 32 layers', every layer's checkpoints;
    * full fine-tuning in bf16 mixed with AdamW: weights + gradients + optimizer state;
    * LoRA on an A100 40 GB: the fewest checkpointed layers that fit, and the extra
      compute of that and of checkpointing every layer;
    * LoRA on every linear layer (r = 16): one layer's activations in pure bf16 and under
      autocast."""
    arch = PRESETS["llama-3.1-8b"]
    p = PlannerInputs(arch, seq=4096, batch=1, precision="bf16", tuning="full")
    full = PlannerInputs(arch, seq=4096, batch=1, precision="mixed", tuning="full")
    state = state_bytes(full)
    lora = PlannerInputs(arch, seq=4096, batch=1, tuning="lora",
                         gpu_bytes=GPUS["a100-40"].bytes)
    k = minimal_some_layers(lora) or 0
    # LoRA in pure bf16 against the same base under autocast (the Trainer's bf16=True):
    # what one plain layer keeps (PEFT's adapters are fp32, so without autocast each keeps
    # an fp32 copy of its input, under autocast a 16-bit one)
    lora_bf16 = PlannerInputs(arch, seq=4096, batch=1, precision="bf16", tuning="lora")
    return {
        "lora_bf16_layer_bytes": layer_bytes(lora_bf16.tensors()),
        "lora_autocast_layer_bytes": layer_bytes(lora_bf16.with_(precision="mixed").tensors()),
        "layers": arch.layers, "layer_bytes": layer_bytes(p.tensors()),
        "none_bytes": activations(p, "none").kept,
        "every_bytes": activations(p, "every-layer").kept,
        "state_bytes": state["weights"] + state["gradients"] + state["optimizer"],
        "lora_fits_none": fits(lora, "none"), "lora_fits_every": fits(lora, "every-layer"),
        "lora_some_layers": k,
        "lora_some_extra": strategy_row(lora.with_(some_layers=k), "some-layers").recompute_share,
        "lora_every_extra": strategy_row(lora, "every-layer").recompute_share,
    }


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
