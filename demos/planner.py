"""Plan a training run: from a model, a batch and a GPU to the checkpointing setting that fits.

Pure arithmetic, no torch: every figure is a formula, and the per-layer activation
formula lists the tensors a layer keeps for backward, op by op, as PyTorch runs it (a test
measures demos.model.Block and demos.llama.LlamaBlock and finds these bytes exactly).
Results are ids and numbers; the page words them.

Units: bytes and FLOPs. `device` is "cuda" for a plan (1-byte dropout masks, LayerNorm
statistics in fp32, attention kernels of a GPU) and "cpu" where the tests measure.

Memory per GPU = weights + gradients + optimizer state (Hugging Face's bytes per parameter,
lessons.memory_calculator; divided by the shards) + activations (the checkpoints kept and
the layer being rebuilt) + the logits and loss peak + a workspace allowance. The named
approximations (APPROXIMATIONS) are returned with their sizes.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field, replace
from functools import lru_cache

from demos.architectures import PRESETS, Architecture
from i18n import DEFAULT, N_, gettext, ngettext


def _tables():
    """lessons.memory_calculator's precisions and optimizers (bytes per parameter),
    imported when first needed: lessons.checkpoint_math imports demos.theory, which
    imports this module's layer formula."""
    from lessons.memory_calculator import OPTIMIZERS, PRECISIONS

    return PRECISIONS, OPTIMIZERS


GiB = 2**30
STRATEGIES = ("none", "selective", "some-layers", "two-layer", "every-layer", "budget")
PRECISION_KEYS = ("fp32", "mixed", "bf16")
OPTIMIZER_KEYS = ("adamw", "adamw-8bit", "sgd-momentum")
TUNINGS = ("full", "lora", "qlora")
LORA_TARGETS = {"attention": ("q", "k", "v", "o"),
                "all-linear": ("q", "k", "v", "o", "gate", "up", "down", "fc", "proj")}
MiB = 2**20


@dataclass(frozen=True)
class Gpu:
    """A GPU preset: its name and the total memory nvidia-smi reports (MiB), which is less
    than the "24 GB" of the data sheet (decimal GB, and part of it reserved)."""

    name: str
    total_mib: int

    @property
    def bytes(self) -> int:
        return self.total_mib * MiB


# nvidia-smi's memory.total per card: Modal's table of its GPUs
# (https://github.com/modal-labs/modal-client/pull/2797: H100 81559, A100 80GB 81920,
# A100 40GB 40960, A10 23028, L40S 46068, L4 23034, T4 15360 MiB) and nvidia-smi outputs
# of H200 machines (143771 MiB).
GPUS: dict[str, Gpu] = {
    "t4": Gpu("T4 16 GB", 15_360), "a10": Gpu("A10 24 GB", 23_028),
    "l4": Gpu("L4 24 GB", 23_034), "a100-40": Gpu("A100 40 GB", 40_960),
    "l40s": Gpu("L40S 48 GB", 46_068), "a100-80": Gpu("A100 80 GB", 81_920),
    "h100": Gpu("H100 80 GB", 81_559), "h200": Gpu("H200 141 GB", 143_771),
}

# Assumptions, each named on the page with its size.
WORKSPACE_BYTES = 1 * GiB  # CUDA context, cuBLAS and attention workspaces
FRAGMENTATION = 0.05  # of everything allocated: the caching allocator's unusable gaps
CHUNK_TOKENS = 1024  # tokens per chunk of a chunked (fused linear + cross-entropy) loss
QLORA_BITS = 4 + 0.127  # NF4 plus double-quantized block constants (QLoRA paper, 3.1)
FSDP_PREFETCH_LAYERS = 2  # whole layers gathered at once under sharding (one prefetched)
LOSS_FP32_TENSORS = 3  # log-softmax, its gradient, the logits' gradient (measured in fp32)


# ---------------------------------------------------------------- one layer's tensors


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
    demos.strategies' policy records use; with layer_tensors, every output of the layer).

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


# ---------------------------------------------------------------- inputs


@dataclass(frozen=True)
class PlannerInputs:
    arch: Architecture
    seq: int = 4096
    batch: int = 1
    accumulation: int = 8
    precision: str = "mixed"
    optimizer: str = "adamw"
    tuning: str = "full"
    lora_rank: int = 16
    lora_targets: str = "all-linear"
    shards: int = 1
    fused: bool = True
    chunked_loss: bool = False
    strategy: str = "every-layer"
    some_layers: int = 16  # layers checkpointed by "some-layers"
    budget: float = 0.5  # the compiler's activation memory budget, 0..1
    gpu_bytes: int = 80 * GiB
    offload: bool = False  # optimizer state (and gradients) in host memory
    device: str = "cuda"

    def with_(self, **changes: object) -> PlannerInputs:
        return replace(self, **changes)

    @property
    def act_bytes(self) -> int:
        return _tables()[0][self.precision].activation_bytes

    @property
    def targets(self) -> tuple[str, ...]:
        return LORA_TARGETS[self.lora_targets] if self.tuning != "full" else ()

    def tensors(self, batch: int | None = None, seq: int | None = None) -> tuple[Held, ...]:
        return layer_tensors(self.arch, self.batch if batch is None else batch,
                             self.seq if seq is None else seq, self.act_bytes,
                             fused=self.fused, device=self.device,
                             lora_rank=self.lora_rank if self.tuning != "full" else 0,
                             lora_targets=self.targets)


# ---------------------------------------------------------------- parameters and state


def adapter_params(p: PlannerInputs) -> int:
    """LoRA: r·(in + out) per adapted linear layer."""
    lin = p.arch.linears()
    return p.arch.layers * sum(p.lora_rank * (lin[t][0] + lin[t][1])
                               for t in p.targets if t in lin)


def state_bytes(p: PlannerInputs) -> dict[str, float]:
    """Weights, gradients and optimizer state per GPU, and the sharding gather."""
    precisions, optimizers = _tables()
    prec, opt = precisions[p.precision], optimizers[p.optimizer]
    total = p.arch.params()
    compute = 4 if p.precision == "fp32" else 2
    if p.tuning == "full":
        trainable, frozen = total, 0.0
    else:
        trainable = adapter_params(p)
        linear = p.arch.layers * sum(i * o for i, o in p.arch.linears().values())
        if p.tuning == "qlora":
            frozen = linear * QLORA_BITS / 8 + (total - linear) * 2
        else:
            frozen = total * compute
    n = p.shards
    weights = (frozen + trainable * prec.weight_bytes) / n
    gathered = 0.0
    if n > 1:  # FSDP / ZeRO-3 gathers whole layers in the compute dtype while it uses them
        gathered = FSDP_PREFETCH_LAYERS * p.arch.block_params() * compute * (n - 1) / n
    grads = trainable * prec.grad_bytes / n
    optimizer = trainable * opt.state_bytes / n
    if p.offload:
        optimizer = 0.0
    return {"weights": weights + gathered, "gradients": grads, "optimizer": optimizer,
            "gathered": gathered, "trainable": float(trainable), "params": float(total)}


# ---------------------------------------------------------------- activations per strategy


@dataclass(frozen=True)
class Activations:
    kept: int  # held for backward at the end of forward (checkpoints, kept layers)
    rebuilt: int  # the layers being recomputed at once
    recompute_flops: float  # per micro-batch
    checkpointed_layers: int = 0


def _budget_kept(tensors: tuple[Held, ...], budget: float, floor: int) -> tuple[int, float]:
    """torch.compile's activation memory budget, for a layer compiled as its own graph (an
    approximation). The partitioner (torch/_functorch/partitioners.py, choose_saved_values
    _set) saves only the graph's inputs at 0 (here the layer input, `floor`) and its default
    min-cut choice at 1 (approximated by what the plain layer keeps, `tensors`: the min-cut
    keeps at most that and may recompute some cheap pointwise ops), and between the two
    saves about floor + budget·(default − floor), recomputing first the tensors that are
    cheapest per byte. (kept bytes, recompute FLOPs)."""
    total = layer_bytes(tensors)
    limit = floor + budget * max(0, total - floor)
    kept, flops = total, 0.0
    for t in sorted((t for t in tensors if t.kind != "input"),
                    key=lambda t: (t.flops / max(t.bytes, 1), -t.bytes)):
        if kept <= limit:
            break
        kept -= t.bytes
        flops += t.flops
    return max(kept, floor), flops


def _sizes(p: PlannerInputs, batch: int | None, seq: int | None) -> tuple[int, int]:
    return (p.batch if batch is None else batch), (p.seq if seq is None else seq)


def activations(p: PlannerInputs, strategy: str, batch: int | None = None,
                seq: int | None = None) -> Activations:
    b, s = _sizes(p, batch, seq)
    tensors = p.tensors(b, s)
    full, n = layer_bytes(tensors), p.arch.layers
    ckpt = b * s * p.arch.hidden * p.act_bytes  # a checkpoint keeps the layer's input
    # a rebuilt segment's first layer keeps its input: the checkpoint, counted already
    shared = sum(t.bytes for t in tensors if t.kind == "input")
    # a checkpointed segment reruns its layers, the last one without its final MLP linear
    # (torch's early stop: rerun_flops)
    one, last = layer_flops(p.arch, b, s), rerun_flops(p.arch, b, s, p.targets)
    if strategy == "none":
        return Activations(n * full, 0, 0.0)
    if strategy == "every-layer":
        return Activations(n * ckpt, full - shared, n * last, n)
    if strategy == "two-layer":
        pairs = math.ceil(n / 2)
        return Activations(pairs * ckpt, min(2, n) * full - shared,
                           (n - pairs) * one + pairs * last, n)
    if strategy == "some-layers":
        k = max(0, min(n, p.some_layers))
        if k == n:
            return activations(p, "every-layer", b, s)
        # the first k layers checkpointed; their rebuild comes after the kept ones are freed
        return Activations(k * ckpt + (n - k) * full, 0, k * last, k)
    if strategy == "selective":  # recompute the attention scores only (Korthikanti et al.)
        redo = [t for t in tensors if t.kind == "scores"]
        dropped = sum(t.bytes for t in redo)
        return Activations(n * (full - dropped), dropped,
                           n * attention_flops(p.arch, b, s) / 2 if dropped else 0.0,
                           n if dropped else 0)
    if strategy == "budget":
        kept, flops = _budget_kept(tensors, p.budget, ckpt)
        return Activations(n * kept, full - kept, n * flops, n if flops else 0)
    raise ValueError(f"unknown strategy {strategy!r}")


def logits_peak_bytes(p: PlannerInputs, batch: int | None = None, seq: int | None = None
                      ) -> float:
    """Around the loss: three fp32 b·s·V tensors (log-softmax, its gradient, the logits'
    gradient; the engine measures this in fp32) plus the 16-bit logits; a chunked loss
    holds them for CHUNK_TOKENS tokens at a time."""
    b, s = _sizes(p, batch, seq)
    tokens = b * s
    if p.chunked_loss:
        tokens = min(tokens, CHUNK_TOKENS)
    e = p.act_bytes
    return tokens * p.arch.vocab * (LOSS_FP32_TENSORS * 4 + (e if e < 4 else 0))


def step_flops(p: PlannerInputs, batch: int | None = None, seq: int | None = None) -> float:
    """Forward + backward of one micro-batch without checkpointing. Backward is two
    forwards for full fine-tuning (the gradients of the inputs and of the weights); with
    adapters one (the frozen base computes no weight gradients; the adapters' own are
    small: an approximation). So one more forward is about +1/3 of a full fine-tune's step
    and about +1/2 of an adapter's, less the LM head, which is never rerun, and less what
    early stop skips (rerun_flops)."""
    b, s = _sizes(p, batch, seq)
    return forward_flops(p.arch, b, s) * (3.0 if p.tuning == "full" else 2.0)


# ---------------------------------------------------------------- the memory of one step


COMPONENTS = ("weights", "gradients", "optimizer", "activations_kept", "activations_rebuilt",
              "logits", "workspace")


@dataclass(frozen=True)
class Breakdown:
    weights: float
    gradients: float
    optimizer: float
    activations_kept: float
    activations_rebuilt: float
    logits: float
    workspace: float

    def parts(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in COMPONENTS}

    @property
    def total(self) -> float:
        return sum(self.parts().values())


def breakdown(p: PlannerInputs, strategy: str | None = None, batch: int | None = None,
              seq: int | None = None) -> Breakdown:
    """Memory per GPU at the step's peak. The layer being rebuilt and the loss peak are
    added as if they came at once (they come one after the other: this overstates by the
    smaller of the two, so a plan that fits here fits)."""
    state = state_bytes(p)
    act = activations(p, strategy or p.strategy, batch, seq)
    logits = logits_peak_bytes(p, batch, seq)
    subtotal = (state["weights"] + state["gradients"] + state["optimizer"] + act.kept
                + act.rebuilt + logits)
    return Breakdown(state["weights"], state["gradients"], state["optimizer"], act.kept,
                     act.rebuilt, logits, WORKSPACE_BYTES + FRAGMENTATION * subtotal)


def peak_bytes(p: PlannerInputs, strategy: str | None = None, batch: int | None = None,
               seq: int | None = None) -> float:
    return breakdown(p, strategy, batch, seq).total


def fits(p: PlannerInputs, strategy: str | None = None, batch: int | None = None,
         seq: int | None = None) -> bool:
    return peak_bytes(p, strategy, batch, seq) <= p.gpu_bytes


def _largest(ok, hi: int) -> int:
    """The largest n in 1..hi with ok(n) (ok is monotone: true, then false); 0 if none."""
    if not ok(1):
        return 0
    lo = 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo


MAX_BATCH = 4096
MAX_SEQ = 1 << 20


def largest_batch(p: PlannerInputs, strategy: str) -> int:
    return _largest(lambda b: fits(p, strategy, batch=b), MAX_BATCH)


def longest_seq(p: PlannerInputs, strategy: str) -> int:
    return _largest(lambda s: fits(p, strategy, seq=s), MAX_SEQ)


# ---------------------------------------------------------------- every strategy, and advice


@dataclass(frozen=True)
class StrategyRow:
    strategy: str
    peak: float
    fits: bool
    spare: float  # GPU bytes minus peak (negative: short by)
    recompute_share: float  # recomputed FLOPs as a share of the step without checkpointing
    largest_batch: int
    longest_seq: int
    saves: bool  # keeps fewer bytes than "none"
    breakdown: Breakdown


def strategy_row(p: PlannerInputs, strategy: str) -> StrategyRow:
    bd = breakdown(p, strategy)
    act = activations(p, strategy)
    none = activations(p, "none")
    return StrategyRow(strategy, bd.total, bd.total <= p.gpu_bytes, p.gpu_bytes - bd.total,
                       act.recompute_flops / step_flops(p), largest_batch(p, strategy),
                       longest_seq(p, strategy),
                       act.kept + act.rebuilt < none.kept, bd)


LESSONS = {  # lesson slug (lessons.catalog) that explains each advice
    "none": "cost-and-correctness", "selective": "language-models", "some-layers": "how-many",
    "two-layer": "how-many", "every-layer": "how-it-works", "budget": "cost-and-correctness",
    "chunked-loss": "large-vocabularies", "adamw-8bit": "why-memory", "lora": "in-practice",
    "qlora": "in-practice", "more-shards": "in-practice", "smaller-batch": "in-practice",
    "offload": "in-practice",
}


@dataclass(frozen=True)
class Advice:
    """One step of the recommendation: what to set, why (a reason id), the lesson that
    explains it, and the peak once this and the steps before it are applied."""

    action: str  # a strategy id or a remedy id
    reason: str
    lesson: str
    peak: float
    fits: bool
    value: float | int | None = None  # k layers, shards, micro-batch ...
    with_strategy: str | None = None  # a remedy's peak is taken with this checkpointing


@dataclass(frozen=True)
class Recommendation:
    strategy: str
    fits: bool
    steps: tuple[Advice, ...]
    inputs: PlannerInputs  # the settings once every step is applied


def minimal_some_layers(p: PlannerInputs) -> int | None:
    """The fewest checkpointed layers that fit, None if even all of them do not."""
    n = p.arch.layers
    ok = [k for k in range(1, n) if fits(p.with_(some_layers=k), "some-layers")]
    return ok[0] if ok else None


def _checkpointing_choice(p: PlannerInputs) -> Advice | None:
    """The cheapest checkpointing setting (least recomputation) that fits, or None."""
    if fits(p, "none"):
        return Advice("none", "fits-without-checkpointing", LESSONS["none"],
                      peak_bytes(p, "none"), True)
    options: list[tuple[float, float, Advice]] = []
    sel = activations(p, "selective")
    if sel.recompute_flops and fits(p, "selective"):
        options.append((sel.recompute_flops, peak_bytes(p, "selective"),
                        Advice("selective", "scores-are-cheap-to-recompute",
                               LESSONS["selective"], peak_bytes(p, "selective"), True)))
    k = minimal_some_layers(p)
    if k is not None:
        q = p.with_(some_layers=k)
        options.append((activations(q, "some-layers").recompute_flops,
                        peak_bytes(q, "some-layers"),
                        Advice("some-layers", "only-as-many-layers-as-needed",
                               LESSONS["some-layers"], peak_bytes(q, "some-layers"), True, k)))
    for strategy, reason in (("every-layer", "every-layer-fits"),
                             ("two-layer", "two-layer-keeps-less")):
        if fits(p, strategy):
            options.append((activations(p, strategy).recompute_flops, peak_bytes(p, strategy),
                            Advice(strategy, reason, LESSONS[strategy],
                                   peak_bytes(p, strategy), True)))
    if not options:
        return None
    return min(options, key=lambda o: (o[0], o[1]))[2]


def _least_memory(p: PlannerInputs) -> str:
    return min(("every-layer", "two-layer"), key=lambda s: peak_bytes(p, s))


MIN_GAIN = 0.03  # a remedy is advised only if it cuts the peak by at least this share


def recommend(p: PlannerInputs, max_shards: int = 64) -> Recommendation:
    """The course's procedure: the cheapest checkpointing that fits; when none does, the
    other tools in order (each kept if it helps), then checkpointing again on top."""
    choice = _checkpointing_choice(p)
    if choice is not None:
        return Recommendation(choice.action, True, (choice,), _apply(p, choice))
    steps: list[Advice] = []
    q = p

    def step(action: str, reason: str, changed: PlannerInputs, value=None) -> None:
        nonlocal q
        best = _least_memory(changed)
        if peak_bytes(changed, best) < (1 - MIN_GAIN) * peak_bytes(q, _least_memory(q)):
            q = changed
            steps.append(Advice(action, reason, LESSONS[action], peak_bytes(q, best),
                                fits(q, best), value, best))

    remedies = []
    if not p.chunked_loss:
        remedies.append(("chunked-loss", "loss-in-chunks", lambda r: r.with_(chunked_loss=True)))
    if p.optimizer == "adamw":
        remedies.append(("adamw-8bit", "optimizer-state-shrinks",
                         lambda r: r.with_(optimizer="adamw-8bit")))
    if p.tuning == "full":
        remedies.append(("lora", "train-adapters-only", lambda r: r.with_(tuning="lora")))
    if p.tuning != "qlora":
        remedies.append(("qlora", "four-bit-base", lambda r: r.with_(tuning="qlora")))
    for action, reason, change in remedies:
        if _fits_any(q):
            break
        step(action, reason, change(q))
    if not _fits_any(q):
        shards = next((n for n in _powers(q.shards, max_shards)
                       if _fits_any(q.with_(shards=n))), None)
        if shards is not None:
            step("more-shards", "shard-the-state", q.with_(shards=shards), shards)
    if not _fits_any(q) and q.batch > 1:
        step("smaller-batch", "same-tokens-per-step-with-accumulation",
             q.with_(batch=1, accumulation=q.accumulation * q.batch), 1)
    if not _fits_any(q) and not q.offload:
        step("offload", "state-in-host-memory", q.with_(offload=True))
    final = _checkpointing_choice(q)
    if final is not None:
        steps.append(final)
        return Recommendation(final.action, True, tuple(steps), _apply(q, final))
    best = _least_memory(q)
    steps.append(Advice(best, "nothing-fits", LESSONS[best], peak_bytes(q, best), False))
    return Recommendation(best, False, tuple(steps), q.with_(strategy=best))


def _apply(p: PlannerInputs, choice: Advice) -> PlannerInputs:
    if choice.action == "some-layers":
        return p.with_(strategy="some-layers", some_layers=int(choice.value or 0))
    return p.with_(strategy=choice.action)


def _fits_any(p: PlannerInputs) -> bool:
    return fits(p, _least_memory(p))


def _powers(start: int, stop: int) -> list[int]:
    n, out = max(2, start * 2), []
    while n <= stop:
        out.append(n)
        n *= 2
    return out


# ---------------------------------------------------------------- the whole plan


@dataclass(frozen=True)
class Approximation:
    id: str
    bytes: float | None = None  # its size in this plan, where it has one
    share: float | None = None  # or its size as a fraction


@dataclass(frozen=True)
class Plan:
    inputs: PlannerInputs
    breakdown: Breakdown
    fits: bool
    spare: float
    rows: tuple[StrategyRow, ...]
    recommendation: Recommendation
    approximations: tuple[Approximation, ...]
    params: int
    trainable: int
    tokens_per_step: int
    layer_bytes: int  # one plain layer's activations at this batch and sequence
    checkpoint_bytes: int  # one layer's input
    extra: dict = field(default_factory=dict)


def approximations(p: PlannerInputs, bd: Breakdown) -> tuple[Approximation, ...]:
    state = state_bytes(p)
    kernel_parts = sum(t.bytes for t in p.tensors() if t.kind == "stats" or t.name == "attn.lse")
    out = [Approximation("workspace", WORKSPACE_BYTES),
           Approximation("gpu-kernels", kernel_parts * p.arch.layers),
           Approximation("fragmentation", bd.workspace - WORKSPACE_BYTES, FRAGMENTATION),
           Approximation("peaks-added", min(bd.activations_rebuilt, bd.logits)),
           Approximation("gpu-usable", p.gpu_bytes),
           Approximation("logits-fp32", bd.logits)]
    if p.tuning != "full":
        lora = sum(t.bytes for t in p.tensors() if t.kind == "lora") * p.arch.layers
        out.append(Approximation("lora-activations", lora))
        out.append(Approximation("adapter-backward", share=0.5))
    if p.tuning == "qlora":
        out.append(Approximation("qlora-bits", share=QLORA_BITS))
    if p.shards > 1:
        out.append(Approximation("fsdp-gather", state["gathered"]))
    if p.strategy == "budget":
        out.append(Approximation("compiler-budget", share=p.budget))
    if p.chunked_loss:
        out.append(Approximation("chunk-size", share=CHUNK_TOKENS))
    return tuple(out)


def plan(p: PlannerInputs) -> Plan:
    bd = breakdown(p)
    rows = tuple(strategy_row(p, s) for s in STRATEGIES)
    state = state_bytes(p)
    return Plan(p, bd, bd.total <= p.gpu_bytes, p.gpu_bytes - bd.total, rows, recommend(p),
                approximations(p, bd), int(state["params"]), int(state["trainable"]),
                p.batch * p.seq * p.accumulation * p.shards, layer_bytes(p.tensors()),
                p.batch * p.seq * p.arch.hidden * p.act_bytes)


# ---------------------------------------------------------------- published anchors


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
      compute of that and of checkpointing every layer."""
    arch = PRESETS["llama-3.1-8b"]
    p = PlannerInputs(arch, seq=4096, batch=1, precision="bf16", tuning="full")
    full = PlannerInputs(arch, seq=4096, batch=1, precision="mixed", tuning="full")
    state = state_bytes(full)
    lora = PlannerInputs(arch, seq=4096, batch=1, tuning="lora",
                         gpu_bytes=GPUS["a100-40"].bytes)
    k = minimal_some_layers(lora) or 0
    return {
        "layers": arch.layers, "layer_bytes": layer_bytes(p.tensors()),
        "none_bytes": activations(p, "none").kept,
        "every_bytes": activations(p, "every-layer").kept,
        "state_bytes": state["weights"] + state["gradients"] + state["optimizer"],
        "lora_fits_none": fits(lora, "none"), "lora_fits_every": fits(lora, "every-layer"),
        "lora_some_layers": k,
        "lora_some_extra": strategy_row(lora.with_(some_layers=k), "some-layers").recompute_share,
        "lora_every_extra": strategy_row(lora, "every-layer").recompute_share,
        "lora_recommended": recommend(lora).strategy,
    }


# ---------------------------------------------------------------- code for a setting

# The Hugging Face names the snippets use, as transformers 4.57.1 spells them
# (https://huggingface.co/docs/transformers/v4.57.1/en/main_classes/trainer); transformers
# is not installed here, so a test checks the snippets against this table.
HF_VERSION = "4.57.1"
HF_NAMES: dict[str, frozenset[str]] = {
    "TrainingArguments": frozenset({
        "output_dir", "per_device_train_batch_size", "gradient_accumulation_steps", "bf16",
        "optim", "gradient_checkpointing", "gradient_checkpointing_kwargs", "use_liger_kernel",
        "fsdp"}),
    "optim": frozenset({"adamw_torch", "adamw_bnb_8bit", "sgd"}),
    "gradient_checkpointing_enable": frozenset({"gradient_checkpointing_kwargs"}),
    "BitsAndBytesConfig": frozenset({"load_in_4bit", "bnb_4bit_quant_type",
                                     "bnb_4bit_use_double_quant", "bnb_4bit_compute_dtype"}),
    "fsdp": frozenset({"full_shard", "offload"}),
}
_HF_OPTIM = {"adamw": "adamw_torch", "adamw-8bit": "adamw_bnb_8bit", "sgd-momentum": "sgd"}


COMMENT_WIDTH = 88  # the longest line a wrapped comment or docstring of a snippet makes


def _comment(text: str, indent: str = "") -> list[str]:
    """`text` (already in the snippet's language) as comment lines, wrapped."""
    return textwrap.wrap(text, COMMENT_WIDTH, initial_indent=f"{indent}# ",
                         subsequent_indent=f"{indent}# ", break_long_words=False,
                         break_on_hyphens=False)


def _docstring(text: str, indent: str) -> str:
    """`text` as a docstring at `indent`, wrapped (a translation never closes it early)."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    lines = textwrap.wrap(text, COMMENT_WIDTH - 3, initial_indent=f'{indent}"""',
                          subsequent_indent=indent, break_long_words=False,
                          break_on_hyphens=False)
    return "\n".join(lines) + '"""'


def hf_code(p: PlannerInputs, code: str = DEFAULT) -> str:
    """Hugging Face Trainer settings for `p` (its strategy, batch, precision, optimizer...),
    commented in language `code`; the code itself is the same in every language."""
    every = p.strategy == "every-layer"
    lines = ["from transformers import TrainingArguments", ""]
    if p.tuning == "qlora":
        lines[:1] = ["import torch", "from transformers import BitsAndBytesConfig, "
                     "TrainingArguments"]
        lines += [*_comment(gettext(code, "For from_pretrained(..., "
                                          "quantization_config=quantization):")),
                  "quantization = BitsAndBytesConfig(",
                  "    load_in_4bit=True,", '    bnb_4bit_quant_type="nf4",',
                  "    bnb_4bit_use_double_quant=True,",
                  "    bnb_4bit_compute_dtype=torch.bfloat16,",
                  ")", ""]
    lines += ["args = TrainingArguments(", '    output_dir="out",',
              f"    per_device_train_batch_size={p.batch},",
              f"    gradient_accumulation_steps={p.accumulation},"]
    if p.precision != "fp32":
        lines.append("    bf16=True,")
    lines.append(f'    optim="{_HF_OPTIM[p.optimizer]}",')
    lines.append(f"    gradient_checkpointing={every},")
    if every:
        lines.append('    gradient_checkpointing_kwargs={"use_reentrant": False},')
    if p.chunked_loss:
        lines.append("    use_liger_kernel=True,  # "
                     + gettext(code, "fused linear + cross-entropy, in chunks"))
    if p.shards > 1:
        lines.append(f'    fsdp="full_shard{" offload" if p.offload else ""}",')
    lines.append(")")
    if every:
        lines += ["", *_comment(gettext(code, "or, on the model itself:")),
                  'model.gradient_checkpointing_enable(gradient_checkpointing_kwargs='
                  '{"use_reentrant": False})']
    elif p.strategy != "none":
        lines += ["", *_comment(gettext(code, "The Trainer's switch checkpoints every layer; "
                                              "for this setting wrap the decoder layers with "
                                              "the PyTorch code instead."))]
    return "\n".join(lines)


_TORCH_HEAD = '''{imports}import torch
from torch import nn
from torch.utils.checkpoint import {names}


class Checkpointed(nn.Module):
{doc}

    def __init__(self, layers: nn.ModuleList) -> None:
        super().__init__()
        self.layers = layers
'''
_TORCH_DOC = {  # the class's docstring per strategy ("some-layers": a plural, in torch_code)
    "every-layer": N_("Runs `layers` (an nn.ModuleList of decoder layers), checkpointing "
                      "every layer."),
    "two-layer": N_("Runs `layers` (an nn.ModuleList of decoder layers) in checkpointed "
                    "segments of two layers."),
    "selective": N_("Runs `layers` (an nn.ModuleList of decoder layers), keeping the matmul "
                    "and fused-attention outputs and recomputing the rest."),
    "none": N_("Runs `layers` (an nn.ModuleList of decoder layers) plainly, without "
               "checkpointing."),
}
_TORCH_BODY = {
    "every-layer": '''
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False)
        return x
''',
    "some-layers": '''
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = checkpoint(layer, x, use_reentrant=False) if i < {k} else layer(x)
        return x
''',
    "two-layer": '''
    def _pair(self, start: int, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[start:start + 2]:
            x = layer(x)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for start in range(0, len(self.layers), 2):
            x = checkpoint(self._pair, start, x, use_reentrant=False)
        return x
''',
    "selective": '''
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False, context_fn=CONTEXT)
        return x


aten = torch.ops.aten
SAVE = {  # {save}
    aten.mm.default, aten.addmm.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_cudnn_attention.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
}


def policy(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if op in SAVE else CheckpointPolicy.PREFER_RECOMPUTE


CONTEXT = partial(create_selective_checkpoint_contexts, policy)
''',
    "none": '''
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x
''',
}
_BUDGET = '''import torch
import torch._functorch.config

{comment}
torch._functorch.config.activation_memory_budget = {budget}
for layer in layers:  # {each}
    layer.compile()
'''


def torch_code(p: PlannerInputs, code: str = DEFAULT) -> str:
    """Plain PyTorch for the strategy of `p`, commented in language `code`; the code
    itself is the same in every language."""
    if p.strategy == "budget":
        budget = f"{p.budget:g}"
        comment = gettext(
            code, "torch.compile's partitioner saves, for each compiled graph, between only "
            "the graph's inputs (0: recompute the rest in backward) and its default choice "
            "(1: the min-cut, which already recomputes cheap pointwise ops); {budget} "
            "interpolates between those two sizes.", budget=budget)
        each = gettext(code, "each decoder layer its own graph (an nn.ModuleList of layers)")
        return _BUDGET.format(comment="\n".join(_comment(comment)), budget=budget, each=each)
    k = max(0, min(p.arch.layers, p.some_layers))
    doc = (ngettext(code, "Runs `layers` (an nn.ModuleList of decoder layers), checkpointing "
                          "the first {count} layer.",
                    "Runs `layers` (an nn.ModuleList of decoder layers), checkpointing the "
                    "first {count} layers.", k)
           if p.strategy == "some-layers" else gettext(code, _TORCH_DOC[p.strategy]))
    selective = p.strategy == "selective"
    head = (_TORCH_HEAD.replace("{doc}", _docstring(doc, "    "))
            .replace("{imports}", "from functools import partial\n\n" if selective else "")
            .replace("{names}", "(\n    CheckpointPolicy,\n    checkpoint,\n"
                     "    create_selective_checkpoint_contexts,\n)" if selective else "checkpoint"))
    save = gettext(code, "the linear layers' matmuls and the fused attention kernels")
    return head + _TORCH_BODY[p.strategy].replace("{k}", str(k)).replace("{save}", save)
