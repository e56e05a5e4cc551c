"""One decoder layer as a list of tensors: what it keeps for backward, op by op, as PyTorch
runs it, and its forward FLOPs. Pure arithmetic, no torch (a test measures the lab's GPT
and Llama blocks and finds these bytes exactly; tests/real_libraries measures tiny
transformers models of every preset family, with transformers' checkpointing switch and
PEFT LoRA, and finds them too).

Units: bytes and FLOPs. `device` is "cuda" for a plan (1-byte dropout masks, LayerNorm
statistics in fp32, attention kernels of a GPU) and "cpu" where the tests measure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from memory.architectures import Architecture

PYTHON_GELUS = ("gelu_new",)  # activations transformers writes op by op in Python
ATTENTIONS = ("sdpa", "eager")  # transformers' attn_implementation


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


# Where the Hugging Face terms come from (installed: transformers 5.24.0, peft 0.21.2,
# torch 2.13); each is measured by tests/real_libraries on tiny models of every preset family.
# * Python GELU: transformers/activations.py, NewGELUActivation.forward ("gelu_new", GPT-2's
#   default) computes 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) op by op, so autograd
#   keeps x (for pow), tanh's output, 1 + tanh and 0.5·x: three 4h-wide tensors more than
#   a fused GELU. "gelu_pytorch_tanh" (GELUTanh) calls the fused F.gelu(approximate="tanh").
# * Eager attention: transformers/models/llama/modeling_llama.py (and qwen2),
#   eager_attention_forward: repeat_kv copies k and v to every query head, then
#   softmax(..., dtype=torch.float32).to(query.dtype): the fp32 probabilities (kept by
#   softmax's backward) and their 16-bit cast (kept by the matmul with v): twice.
#   transformers/models/gpt2/modeling_gpt2.py eager_attention_forward softmaxes in the
#   input dtype: one copy.
# * repeat_kv with a padding mask: transformers/integrations/sdpa_attention.py,
#   use_gqa_in_sdpa: SDPA gets k and v per KV head only when attention_mask is None; with a
#   padding mask they are repeated to every query head first, and SDPA keeps the copies
#   (with one KV head the repeat is a view). Measured with torch 2.13: SDPA given the boolean
#   mask keeps an additive b·s·s copy of it in q's dtype, in every layer.
# * LoRA: peft/tuners/lora/layer.py, Linear.forward: each adapter casts the layer's input to
#   its own weight dtype (x = self._cast_input_dtype(x, lora_A.weight.dtype)), and PEFT makes
#   adapters fp32 by default (autocast_adapter_dtype=True, peft/tuners/tuners_utils.py), so
#   in 16-bit every adapted linear keeps an fp32 copy of its input and lora_B keeps lora_A's
#   fp32 output. The frozen base linears (and norms' frozen weights) need no weight gradient,
#   and autograd saves an input that only one gradient formula uses only when that gradient
#   will be computed (torch 2.13, torchgen/packaged/autograd/gen_variable_type.py, guard_for:
#   grad_fn->should_compute_output), so a frozen linear keeps nothing of its own. Without
#   checkpointing the first layer's input needs no gradient (the embedding is frozen), so
#   its first norm keeps nothing; transformers' checkpointing switch calls
#   enable_input_require_grads (transformers/modeling_utils.py), which ends that.
# * Mixed precision (torch 2.13 autocast, measured on the CPU with bf16 by
#   tests/real_libraries): linear (and matmul, addmm, SDPA) run in 16-bit, so autocast
#   casts their inputs and weights first (torch/include/ATen/autocast_mode.h,
#   AT_FORALL_LOWER_PRECISION_FP, the GPU's lists; the CPU's are compiled in, and measured
#   the same for these ops). An activation's cast is a new tensor per call, kept
#   by the linear for its weight gradient; a weight's cast is cached for the autocast
#   region and kept for the input gradient. With fp32 weights the embedding's output is
#   fp32 and `residual + 16-bit output` promotes to fp32, so the residual stream, the
#   norms and their outputs stay fp32 (transformers' RMSNorm computes in the input's
#   dtype; LayerNorm is on autocast's fp32 list); the projections, attention and MLP
#   produce 16-bit tensors. Eager attention's softmax(dtype=float32) is cast back to the
#   16-bit copy the matmul with v makes. With fp32 weights the causal mask is fp32 and
#   GPT-2's eager attention adds it to the scores before its softmax (in the input's dtype,
#   transformers/models/gpt2/modeling_gpt2.py, eager_attention_forward), so it keeps fp32
#   probabilities and casts them back (attn_weights.type(value.dtype)) for the matmul with
#   v. Rotary embeddings run in fp32 (cos and sin are fp32): autocast's cast of k for SDPA
#   is a new tensor, so with a padding mask and one KV head the repeated view becomes a
#   copy for every head. On a GPU autocast also runs softmax in fp32
#   (torch/include/ATen/autocast_mode.h, AT_FORALL_FP32_SET_OPT_DTYPE: the lists for
#   CUDA; the CPU's own list, measured here, leaves softmax in its input's dtype), so
#   GPT-2's eager probabilities are fp32 there with a 16-bit base too. Under LoRA PEFT
#   casts each adapter's input to fp32 and autocast casts it back: a 16-bit copy per
#   adapter.
# * QLoRA (bitsandbytes 0.50.2, as the planner's code loads it; measured on the CPU):
#   peft's prepare_model_for_kbit_training (peft/utils/other.py) casts every parameter that
#   is not 4-bit (embeddings, norms, the head) to fp32, so the residual stream and the
#   norms are fp32. Linear4bit.forward (bitsandbytes/nn/modules.py) casts its input to the
#   compute dtype and its output back to the input's dtype, and MatMul4Bit
#   (bitsandbytes/autograd/_functions.py) keeps only the 4-bit weight for backward: a
#   frozen 4-bit linear keeps nothing of its own and returns fp32 for an fp32 input. Without
#   autocast the layer runs in fp32 as LoRA in fp32 does; under autocast (the Trainer's
#   bf16=True) the attention's inputs are autocast's 16-bit casts (with a padding mask and
#   SDPA the repeated k and v become copies for every head: both are fp32 before the cast),
#   GPT-2's eager softmax stays fp32 through dropout, and the MLP (the 4-bit linears'
#   outputs and what follows them) stays fp32.


@lru_cache(maxsize=4096)
def layer_tensors(arch: Architecture, batch: int, seq: int, act_bytes: int, *,
                  fused: bool = True, device: str = "cuda", lora_rank: int = 0,
                  lora_targets: tuple[str, ...] = (), attention: str = "sdpa",
                  padding: bool = False, input_grad: bool = True, lora_bytes: int = 4,
                  autocast: bool = False, quantized: bool = False) -> tuple[Held, ...]:
    """Every tensor one layer keeps for backward when it runs plainly (no checkpoint).

    GPT kind (LayerNorm, fused QKV, GELU): the layer's input and the residual after
    attention (the norms' inputs), each norm's output and statistics (mean, rstd), the QKV
    buffer, the attention output, the MLP's pre- and post-activation, dropout masks.
    Llama kind (RMSNorm as in Hugging Face: computed in fp32): each norm's fp32 input (the
    layer input itself in fp32), its 1/rms, its normalised value and output; the rotated q
    and k and v; the attention output; gate, SiLU(gate), up and their product.
    A fused kernel (flash / memory-efficient / CPU flash) keeps a log-sum-exp per head and
    token instead of the s×s scores; the math kernel keeps scaled copies of q, k, v (k and v
    repeated to every head) and the softmax output, in fp32 on the CPU for 16-bit inputs.

    What the Hugging Face libraries add (sources above): `attention="eager"` is
    transformers' eager attention; a Python GELU (arch.activation "gelu_new") keeps three
    more MLP-wide tensors; `padding` (a padding mask with SDPA) repeats k and v to every
    head; LoRA (`lora_rank`, `lora_targets`) freezes the base: norms and linears keep only
    what the input gradients need, each adapter keeps its input (an fp32 copy,
    `lora_bytes` per number, when the layer runs in 16-bit) and its rank-r output;
    `input_grad=False` is a first layer whose input needs no gradient. `quantized`: QLoRA,
    the frozen base in 4-bit after peft's prepare_model_for_kbit_training (with `autocast`
    the terms above; without it, the layer keeps what fp32 LoRA keeps).

    `autocast`: mixed precision, the step under torch.autocast with 16-bit compute
    (`act_bytes` 2; sources above). Full fine-tuning keeps fp32 weights: the residual
    stream (the layer's input, the residual after attention) stays fp32, each norm keeps
    what it keeps in fp32 but not its output, and each linear reading a norm's output keeps
    its own 16-bit cast of it. Under LoRA the base is 16-bit and each adapter keeps its own
    16-bit cast of its input. The 16-bit weight copies autocast makes and keeps for
    backward are not listed: the planner counts them with the weights (mixed precision's
    6 bytes per parameter)."""
    b, s, a = batch, seq, arch.heads
    d, kv, m = arch.head_dim, arch.kv_heads, arch.mlp_width
    e, bs, sbh = act_bytes, batch * seq, batch * seq * arch.hidden
    cuda = device == "cuda"
    mask = 1 if cuda else e  # dropout masks: bool on CUDA, the input's dtype on the CPU
    dropout = arch.dropout
    lin = {name: linear_flops(arch, b, s, name) for name in arch.linears()}
    adapted = {t for t in lora_targets if t in lin} if lora_rank else set()
    frozen = bool(adapted)
    eager = attention == "eager"
    wide = autocast and not frozen  # fp32 weights under autocast: an fp32 residual stream
    # QLoRA under autocast: fp32 residual stream and norms, the 4-bit linears' outputs in
    # their input's dtype (fp32 but for the output projection, which reads the attention)
    qwide = quantized and autocast and frozen
    me = 4 if qwide else e  # bytes per number of the MLP's tensors
    out: list[Held] = []

    def norm(tag: str, first: bool) -> None:
        held = norm_tensors(arch, tag, b, s, 4 if wide or qwide else e, device, first,
                            0.0 if first else lin["o"])
        if wide:  # its fp32 output is read only through the linears' 16-bit casts
            held = tuple(t for t in held if t.name != f"{tag}.out")
        if frozen:  # a frozen norm keeps what its input's gradient needs: no output
            if first and not input_grad:
                return
            held = tuple(t for t in held if t.kind in ("input", "stats", "matmul")
                         or t.name.endswith(".in32"))
        out.extend(held)

    def weight_input(held: Held, users: tuple[str, ...], per: int = e) -> None:
        """A linear's input, kept for its weight gradient: always when the base trains;
        under LoRA by each adapter of `users` (the tensor itself when it is already fp32,
        else one fp32 copy per adapter) and never by the frozen base."""
        if wide and held.kind == "norm":  # autocast casts it for each linear
            out.extend(Held(f"{u}.in16", held.bytes, "norm") for u in users)
            return
        users = tuple(u for u in users if u in adapted)
        if not frozen or (users and e == lora_bytes and not autocast):
            if all(t.name != held.name for t in out):
                out.append(held)
            return
        width = held.bytes // per
        out.extend(Held(f"lora.{u}.in", width * lora_bytes, "lora") for u in users)

    norm("ln1", True)
    qkv_flops = lin["q"] + lin["k"] + lin["v"]
    scores = attention_flops(arch, b, s) / 2
    if arch.kind != "llama" and adapted & {"q", "k", "v"}:
        adapted.add("qkv")  # GPT-2's c_attn: one linear, one adapter for q, k and v
    weight_input(Held("ln1.out", sbh * e, "norm"),
                 ("qkv",) if "qkv" in adapted or (wide and arch.kind != "llama")
                 else ("q", "k", "v"))
    # the attention's own tensors; attn.out is the output projection's input
    # repeat_kv before SDPA with a mask: copies, unless one KV head (then a view)
    kv_kept = a if padding and not eager and 1 < kv < a else kv
    if eager and arch.kind == "llama":
        out += [Held("q.rot", a * d * bs * e, "matmul", lin["q"]),
                Held("k.rep", a * d * bs * e, "matmul", lin["k"]),
                Held("v.rep", a * d * bs * e, "matmul", lin["v"]),
                Held("attn.probs32", a * s * s * b * 4, "scores", scores)]
        if e < 4:
            out.append(Held("attn.probs", a * s * s * b * e, "scores"))
        attn_out_kept = False
    elif eager:  # GPT-2's softmax in its input's dtype: fp32 after the fp32 causal mask
        # (and under CUDA's autocast, whose fp32 list has softmax)
        probs32 = wide or qwide or (autocast and cuda)
        out += [Held("qkv", (a + 2 * kv) * d * bs * e, "matmul", qkv_flops),
                Held("attn.probs", a * s * s * b * (4 if probs32 else e), "scores", scores)]
        if dropout:  # under QLoRA v is fp32: no cast before dropout, an fp32 mask
            out.append(Held("attn.mask", a * s * s * b * (4 if qwide and not cuda else mask),
                            "scores"))
            out.append(Held("attn.dropped", a * s * s * b * e, "scores"))
        elif probs32:  # the 16-bit copy the matmul with v keeps
            out.append(Held("attn.probs16", a * s * s * b * e, "scores"))
        attn_out_kept = False
    elif fused:
        if arch.kind == "llama":  # q and k rotated (new tensors), v as projected
            # fp32 weights under autocast: k is rotated in fp32 and autocast's cast for
            # SDPA makes the repeated view a copy for every head
            # (under QLoRA v is fp32 too: the 4-bit linear's output in its input's dtype)
            k_kept = a if padding and (wide or qwide) else kv_kept
            v_kept = a if padding and qwide else kv_kept
            out += [Held("q.rot", a * d * bs * e, "matmul", lin["q"]),
                    Held("k.rot", k_kept * d * bs * e, "matmul", lin["k"]),
                    Held("v", v_kept * d * bs * e, "matmul", lin["v"])]
        else:
            out.append(Held("qkv", (a + 2 * kv) * d * bs * e, "matmul", qkv_flops))
        attn_out_kept = True  # the kernel keeps its output: the projection's input
    else:
        ea = 4 if not cuda and e < 4 else e  # the CPU's math kernel upcasts 16-bit
        if arch.norm == "layernorm" and b == 1 and ea == e:
            # one sequence: v stays a view of the fused QKV buffer, which it keeps alive
            out.append(Held("qk.scaled", 2 * a * d * bs * ea, "matmul", qkv_flops))
            out.append(Held("qkv", (a + 2 * kv) * d * bs * e, "matmul", qkv_flops))
        else:
            out.append(Held("qkv.scaled", 3 * a * d * bs * ea, "matmul", qkv_flops))
        out.append(Held("attn.probs", a * s * s * b * ea, "scores", scores))
        if dropout:  # the math kernel's mask: in its (upcast) dtype on the CPU
            out.append(Held("attn.mask", a * s * s * b * (1 if cuda else ea), "scores"))
            out.append(Held("attn.dropped", a * s * s * b * ea, "scores"))
        attn_out_kept = False
    attn_out = Held("attn.out", a * d * bs * e, "attention",
                    attention_flops(arch, b, s) if fused and not eager else scores)
    if attn_out_kept:
        out.append(attn_out)
    weight_input(attn_out, ("o",))
    if fused and not eager:
        lse_s = math.ceil(s / 32) * 32 if cuda and e == 4 else s  # fp32 kernel pads to 32
        out.append(Held("attn.lse", 4 * a * b * lse_s, "attention"))
        if padding:  # SDPA makes the boolean mask additive, in q's dtype, and keeps it
            out.append(Held("attn.bias", b * s * s * e, "attention"))
    if dropout:
        out.append(Held("drop1.mask", sbh * mask, "dropout"))
    norm("ln2", False)
    up_flops = lin["gate"] if arch.mlp == "swiglu" else lin["fc"]
    if arch.mlp == "swiglu":
        weight_input(Held("ln2.out", sbh * e, "norm"), ("gate", "up"))
        out += [Held("gate", bs * m * me, "matmul", up_flops),
                Held("silu", bs * m * me, "activation"),
                Held("up", bs * m * me, "matmul", lin["up"])]
        weight_input(Held("gated", bs * m * me, "activation"), ("down",), me)
    else:
        weight_input(Held("ln2.out", sbh * e, "norm"), ("fc",))
        out.append(Held("fc", bs * m * me, "matmul", up_flops))
        if arch.activation in PYTHON_GELUS:
            out += [Held("gelu.tanh", bs * m * me, "activation"),
                    Held("gelu.1+tanh", bs * m * me, "activation"),
                    Held("gelu.half", bs * m * me, "activation")]
        weight_input(Held("gelu", bs * m * me, "activation"), ("proj",), me)
    if dropout:
        out.append(Held("drop2.mask", sbh * (1 if cuda else me), "dropout"))
    for target in lora_targets:
        if target in adapted and not (target in ("q", "k", "v") and "qkv" in adapted):
            out.append(Held(f"lora.{target}", bs * lora_rank * lora_bytes, "lora"))
        elif target == "q" and "qkv" in adapted:
            out.append(Held("lora.qkv", bs * lora_rank * lora_bytes, "lora"))
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


@lru_cache(maxsize=4096)  # the planner's searches ask for the same layer many times
def layer_flops(arch: Architecture, batch: int, seq: int) -> float:
    """Forward FLOPs of one layer: its linear layers and the attention."""
    return (sum(linear_flops(arch, batch, seq, n) for n in arch.linears())
            + attention_flops(arch, batch, seq))


def last_matmul(arch: Architecture) -> str:
    """The last linear layer of a layer's MLP: "proj" of a GPT layer, "down" of a Llama one."""
    return "down" if arch.mlp == "swiglu" else "proj"


def early_stop_skips(arch: Architecture, batch: int, seq: int, targets: tuple[str, ...] = ()
                     ) -> float:
    """Forward FLOPs torch's non-reentrant checkpoint does NOT rerun at the end of a
    segment's last layer: the work after the last op that saves something for backward.

    The rule as torch applies it (torch 2.13 and 2.15, torch/utils/checkpoint.py,
    _checkpoint_hook): the recomputation's pack hook counts the tensors saved again and,
    with early stop on (the default; set_checkpoint_early_stop(False) turns it off), raises
    _StopRecomputationError as the last tensor the forward saved is saved again. Autograd
    saves an op's inputs before the op runs and its outputs after, so what stops the rerun
    is the last saving op: ops after it are never rerun; an op whose inputs are the last
    saves is not run either; an op that saves an output has run.
    * No residual dropout after the MLP (Llama, a GPT layer at dropout 0): the MLP's last
      linear saves its input and weight last, before its matmul runs: that matmul is skipped.
    * A residual dropout after the MLP (GPT-2's resid_pdrop, default 0.1) saves its mask
      after it has run, so the last linear before it reruns: nothing is skipped.
    * A LoRA adapter on that linear (`targets`): PEFT runs the frozen base first and the
      adapter after it (peft 0.21.2, peft/tuners/lora/layer.py, Linear.forward:
      base_layer, then lora_B(lora_A(x))), so the base reruns (the adapter's last small
      matmul does not; left out here)."""
    last = last_matmul(arch)
    if arch.dropout or last in targets:
        return 0.0
    return linear_flops(arch, batch, seq, last)


def rerun_flops(arch: Architecture, batch: int, seq: int, targets: tuple[str, ...] = ()
                ) -> float:
    """Forward FLOPs torch's non-reentrant checkpoint reruns for a segment's last layer:
    all of it but what early stop skips (early_stop_skips: the MLP's last linear, unless a
    dropout after it or a LoRA adapter on it saves something later)."""
    return layer_flops(arch, batch, seq) - early_stop_skips(arch, batch, seq, targets)


def head_flops(arch: Architecture, batch: int, seq: int) -> float:
    """Forward FLOPs of the LM head: the b·s tokens times the h×V output matrix, 2·b·s·h·V."""
    return 2.0 * batch * seq * arch.hidden * arch.vocab


def forward_flops(arch: Architecture, batch: int, seq: int) -> float:
    """Matmul FLOPs of one forward pass: every layer and the LM head."""
    return arch.layers * layer_flops(arch, batch, seq) + head_flops(arch, batch, seq)
