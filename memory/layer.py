"""One decoder layer as a list of tensors: what it keeps for backward, op by op, as PyTorch
runs it, and its forward FLOPs. Pure arithmetic, no torch (a test measures the lab's GPT
and Llama blocks and finds these bytes exactly).

Units: bytes and FLOPs. `device` is "cuda" for a plan (1-byte dropout masks, LayerNorm
statistics in fp32, attention kernels of a GPU) and "cpu" where the tests measure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from memory.architectures import Architecture


@dataclass(frozen=True)
class Held:
    """A tensor a layer keeps for backward: bytes, kind, and the forward FLOPs that
    recomputing it costs (its producing op, inputs assumed at hand)."""

    name: str
    bytes: int
    kind: str  # input, norm, stats, attention, scores, matmul, activation, dropout, lora
    flops: float = 0.0


def attention_flops(arch: Architecture, batch: int, seq: int) -> float:
    """Q·Kᵀ and the weighted sum of V, causal (half the s² pairs): 2·b·s²·a·d."""
    return 2.0 * batch * seq * seq * arch.heads * arch.head_dim


def linear_flops(arch: Architecture, batch: int, seq: int, name: str) -> float:
    i, o = arch.linears()[name]
    return 2.0 * batch * seq * i * o


def norm_tensors(arch: Architecture, tag: str, batch: int, seq: int, act_bytes: int,
                 device: str = "cuda", first: bool = True, flops: float = 0.0
                 ) -> tuple[Held, ...]:
    """What one norm keeps for backward. Its input is the layer's input (first) or the
    residual after attention ("x2", made by the output projection: `flops` to remake).
    LayerNorm: its input, output and statistics (mean, rstd; fp32 on CUDA). RMSNorm as in
    Hugging Face (computed in fp32): its fp32 input (in fp32 that is the input itself, in
    16-bit a copy), 1/rms, the normalised value (cast back to 16-bit) and the output."""
    e, bs = act_bytes, batch * seq
    sbh = bs * arch.hidden
    source = "input" if first else "x2"
    if arch.norm == "layernorm":
        stats = 4 if device == "cuda" else e
        return (Held(source, sbh * e, "input" if first else "matmul", flops),
                Held(f"{tag}.out", sbh * e, "norm"),
                Held(f"{tag}.stats", 2 * bs * stats, "stats"))
    whole = e == 4  # fp32: the norm's fp32 input is the tensor itself
    return (Held(source if whole else f"{tag}.in32", sbh * 4,
                 ("input" if first else "matmul") if whole else "norm",
                 flops if whole else 0.0),
            Held(f"{tag}.rstd", bs * 4, "stats"),
            Held(f"{tag}.normed", sbh * e, "norm"),
            Held(f"{tag}.out", sbh * e, "norm"))


@lru_cache(maxsize=4096)
def layer_tensors(arch: Architecture, batch: int, seq: int, act_bytes: int, *,
                  fused: bool = True, device: str = "cuda", lora_rank: int = 0,
                  lora_targets: tuple[str, ...] = ()) -> tuple[Held, ...]:
    """Every tensor one layer keeps for backward when it runs plainly (no checkpoint).

    GPT kind (LayerNorm, fused QKV, GELU): the layer's input and the residual after
    attention (the norms' inputs), each norm's output and statistics (mean, rstd), the QKV
    buffer, the attention output, the MLP's pre- and post-activation, dropout masks.
    Llama kind (RMSNorm as in Hugging Face: computed in fp32): each norm's fp32 input (the
    layer input itself in fp32), its 1/rms, its normalised value and output; the rotated q
    and k and v; the attention output; gate, SiLU(gate), up and their product.
    A fused kernel (flash / memory-efficient / CPU flash) keeps a log-sum-exp per head and
    token instead of the s×s scores; the math kernel keeps scaled copies of q, k, v (k and v
    repeated to every head) and the softmax output, in fp32 on the CPU for 16-bit inputs."""
    b, s, a = batch, seq, arch.heads
    d, kv, m = arch.head_dim, arch.kv_heads, arch.mlp_width
    e, bs, sbh = act_bytes, batch * seq, batch * seq * arch.hidden
    cuda = device == "cuda"
    mask = 1 if cuda else e  # dropout masks: bool on CUDA, the input's dtype on the CPU
    dropout = arch.dropout
    lin = {name: linear_flops(arch, b, s, name) for name in arch.linears()}
    out: list[Held] = []

    def norm(tag: str, first: bool) -> None:
        out.extend(norm_tensors(arch, tag, b, s, e, device, first, 0.0 if first else lin["o"]))

    norm("ln1", True)
    qkv_flops = lin["q"] + lin["k"] + lin["v"]
    scores = attention_flops(arch, b, s) / 2
    if fused and arch.kind == "llama":  # q and k rotated (new tensors), v as projected
        out += [Held("q.rot", a * d * bs * e, "matmul", lin["q"]),
                Held("k.rot", kv * d * bs * e, "matmul", lin["k"]),
                Held("v", kv * d * bs * e, "matmul", lin["v"])]
    if fused:
        if arch.kind != "llama":
            out.append(Held("qkv", (a + 2 * kv) * d * bs * e, "matmul", qkv_flops))
        out.append(Held("attn.out", a * d * bs * e, "attention", attention_flops(arch, b, s)))
        lse_s = math.ceil(s / 32) * 32 if cuda and e == 4 else s  # fp32 kernel pads to 32
        out.append(Held("attn.lse", 4 * a * b * lse_s, "attention"))
    else:
        ea = 4 if not cuda and e < 4 else e  # the CPU's math kernel upcasts 16-bit
        if arch.norm == "layernorm" and b == 1 and ea == e:
            # one sequence: v stays a view of the fused QKV buffer, which it keeps alive
            out.append(Held("qk.scaled", 2 * a * d * bs * ea, "matmul", qkv_flops))
            out.append(Held("qkv", (a + 2 * kv) * d * bs * e, "matmul", qkv_flops))
        else:
            out.append(Held("qkv.scaled", 3 * a * d * bs * ea, "matmul", qkv_flops))
        out.append(Held("attn.probs", a * s * s * b * ea, "scores", scores))
        if dropout:
            out.append(Held("attn.mask", a * s * s * b * mask, "scores"))
            out.append(Held("attn.dropped", a * s * s * b * ea, "scores"))
        out.append(Held("attn.out", a * d * bs * e, "attention", scores))
    if dropout:
        out.append(Held("drop1.mask", sbh * mask, "dropout"))
    norm("ln2", False)
    up_flops = lin["gate"] if arch.mlp == "swiglu" else lin["fc"]
    if arch.mlp == "swiglu":
        out += [Held("gate", bs * m * e, "matmul", up_flops),
                Held("silu", bs * m * e, "activation"),
                Held("up", bs * m * e, "matmul", lin["up"]),
                Held("gated", bs * m * e, "activation")]
    else:
        out += [Held("fc", bs * m * e, "matmul", up_flops),
                Held("gelu", bs * m * e, "activation")]
    if dropout:
        out.append(Held("drop2.mask", sbh * mask, "dropout"))
    for target in lora_targets:
        if target in arch.linears() and lora_rank:
            out.append(Held(f"lora.{target}", bs * lora_rank * e, "lora"))
    return tuple(out)


def cached_only_tensors(arch: Architecture, batch: int, seq: int, act_bytes: int
                        ) -> tuple[Held, ...]:
    """The tensors a layer makes (fused attention) that a plain layer frees in forward but
    a selective-checkpointing policy that caches every op's output keeps (the names
    memory.strategies' policy records use; with layer_tensors, every output of the layer).

    GPT kind: the attention projection's and the MLP's outputs ("proj", "out") and the
    dropouts' outputs. Llama kind: the q, k, o and down projections' outputs; in 16-bit
    the layer input, the residual after attention and each norm's fp32 normalised value
    (which a plain layer keeps only as copies); each norm's x², its mean and mean + eps;
    the rotary temporaries of q and k (x·cos, the negated half, the rotated half, its
    product with sin)."""
    e, bs, d = act_bytes, batch * seq, arch.head_dim
    sbh = bs * arch.hidden
    if arch.kind != "llama":
        out = [Held("proj", sbh * e, "matmul"), Held("out", sbh * e, "matmul")]
        if arch.dropout:
            out += [Held("drop1.out", sbh * e, "dropout"), Held("drop2.out", sbh * e, "dropout")]
        return tuple(out)
    out = [Held("q", arch.heads * d * bs * e, "matmul"),
           Held("k", arch.kv_heads * d * bs * e, "matmul"),
           Held("o", sbh * e, "matmul"), Held("down", sbh * e, "matmul")]
    if e < 4:
        out += [Held("input", sbh * e, "input"), Held("x2", sbh * e, "matmul")]
    for tag in ("ln1", "ln2"):
        out += [Held(f"{tag}.pow", sbh * 4, "norm"), Held(f"{tag}.mean", bs * 4, "stats"),
                Held(f"{tag}.eps", bs * 4, "stats")]
        if e < 4:
            out.append(Held(f"{tag}.scaled", sbh * 4, "norm"))
    for name, heads in (("q", arch.heads), ("k", arch.kv_heads)):
        full = heads * d * bs * e
        out += [Held(f"rope.{name}.cos", full, "activation"),
                Held(f"rope.{name}.neg", full // 2, "activation"),
                Held(f"rope.{name}.cat", full, "activation"),
                Held(f"rope.{name}.sin", full, "activation")]
    return tuple(out)


def layer_bytes(tensors: tuple[Held, ...]) -> int:
    return sum(t.bytes for t in tensors)


def layer_flops(arch: Architecture, batch: int, seq: int) -> float:
    """Forward FLOPs of one layer: its linear layers and the attention."""
    return (sum(linear_flops(arch, batch, seq, n) for n in arch.linears())
            + attention_flops(arch, batch, seq))


def rerun_flops(arch: Architecture, batch: int, seq: int, targets: tuple[str, ...] = ()
                ) -> float:
    """Forward FLOPs torch's non-reentrant checkpoint reruns for a segment's last layer:
    all of it but the MLP's last linear ("proj" of a GPT layer, "down" of a Llama layer).
    Recomputation stops once every tensor backward needs is rebuilt (early stop, the
    default: torch 2.13, torch/utils/checkpoint.py, set_checkpoint_early_stop), and
    autograd saves that linear's input before it runs, so its matmul is never redone.
    With a LoRA adapter on that linear (`targets`), PEFT runs the frozen base first and the
    adapter after it (peft 0.21.2, peft/tuners/lora/layer.py, Linear.forward: base_layer,
    then lora_B(lora_A(x))): the adapter's input is rebuilt only after the base matmul, so
    the base is rerun (the adapter's last small matmul is not; left out here)."""
    last = "down" if arch.mlp == "swiglu" else "proj"
    skipped = 0.0 if last in targets else linear_flops(arch, batch, seq, last)
    return layer_flops(arch, batch, seq) - skipped


def head_flops(arch: Architecture, batch: int, seq: int) -> float:
    """Forward FLOPs of the LM head: the b·s tokens times the h×V output matrix, 2·b·s·h·V."""
    return 2.0 * batch * seq * arch.hidden * arch.vocab


def forward_flops(arch: Architecture, batch: int, seq: int) -> float:
    """Matmul FLOPs of one forward pass: every layer and the LM head."""
    return arch.layers * layer_flops(arch, batch, seq) + head_flops(arch, batch, seq)
