"""The memory of one training step on one GPU: from a model, a batch, a precision, an
optimizer and a checkpointing choice to bytes per GPU, and what fits.

Memory per GPU = weights + gradients + optimizer state (Hugging Face's bytes per parameter,
memory.precisions; divided by the shards) + activations (the checkpoints kept and the layer
being rebuilt) + the logits and loss peak + a workspace allowance. The named approximations
(planner.recommend.approximations) are returned with their sizes.

Pure arithmetic, no torch; results are ids and numbers, the pages word them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from memory.architectures import Architecture
from memory.class_layers import ClassFit, LayerSource
from memory.hardware import FRAGMENTATION, WORKSPACE_BYTES, GiB
from memory.layer import (
    Held,
    attention_flops,
    forward_flops,
    layer_bytes,
    layer_flops,
    layer_tensors,
    rerun_flops,
)
from memory.precisions import OPTIMIZERS, PRECISIONS, optimizer_state_bytes

STRATEGIES = ("none", "selective", "some-layers", "two-layer", "every-layer", "budget")
PRECISION_KEYS = ("fp32", "mixed", "bf16")
OPTIMIZER_KEYS = ("adamw", "adamw-8bit", "sgd-momentum")
TUNINGS = ("full", "lora", "qlora")
LORA_TARGETS = {"attention": ("q", "k", "v", "o"),
                "all-linear": ("q", "k", "v", "o", "gate", "up", "down", "fc", "proj")}

# Assumptions, each named on the page with its size.
CHUNK_TOKENS = 1024  # tokens per chunk of a chunked (fused linear + cross-entropy) loss
QLORA_BITS = 4 + 0.127  # NF4 plus double-quantized block constants (QLoRA paper, 3.1)
# a measured class's variant key for QLoRA: its precision with this before it
# (model_classes.variant reads it: "4bit-mixed" is mixed precision over a 4-bit base)
QUANTIZED = "4bit-"
FSDP_PREFETCH_LAYERS = 2  # whole layers gathered at once under sharding (one prefetched)
# log-softmax, its gradient, the logits' gradient: fp32 in every precision, as transformers
# computes the loss (transformers 5.24.0, loss/loss_utils.py, ForCausalLMLoss: logits.float()
# before cross-entropy; the fp32 copy itself is freed before backward, so it adds no 4th)
LOSS_FP32_TENSORS = 3
ADAPTER_BYTES = 4  # per LoRA adapter parameter: PEFT keeps adapters in fp32 (state_bytes)
DEFAULT_HEADROOM = 0.05  # keep 5% of the GPU free (PlannerInputs.headroom)


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
    # transformers' attn_implementation: "" follows `fused` (a fused SDPA kernel, or without
    # it transformers' eager attention, the planner's "math" choice); "sdpa" with fused=False
    # is SDPA's math kernel (what torch runs on a CPU when the attention has dropout)
    attention: str = ""
    padding: bool = False  # batches carry a padding mask (attention_mask with zeros)
    # the share of the GPU's memory a plan keeps free: what fits, the table's rows and the
    # recommendation all count against usable_bytes (a practitioner's margin for what the
    # model leaves out, and for a longer batch than the one planned)
    headroom: float = DEFAULT_HEADROOM
    # where the layers' bytes come from: the real transformers class, measured
    # (planner.class_memory), or None: the course's formula (memory.layer)
    source: LayerSource | None = None

    def with_(self, **changes: object) -> PlannerInputs:
        """These settings with `changes` (dataclasses.replace's result, without its
        __init__ call: the planner's searches make many thousand of them)."""
        if not changes.keys() <= _INPUT_FIELDS:
            return replace(self, **changes)  # its TypeError names the unknown field
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new

    @property
    def usable_bytes(self) -> float:
        """The GPU's memory less the headroom kept free: a plan fits when its peak is
        within it."""
        return self.gpu_bytes * (1 - self.headroom)

    @property
    def act_bytes(self) -> int:
        return PRECISIONS[self.precision].activation_bytes

    @property
    def targets(self) -> tuple[str, ...]:
        return LORA_TARGETS[self.lora_targets] if self.tuning != "full" else ()

    @property
    def kernel(self) -> str:
        """The attention as transformers runs it: sdpa | eager."""
        return self.attention or ("sdpa" if self.fused else "eager")

    @property
    def lora_bytes(self) -> int:
        """Bytes per number of what a LoRA adapter keeps: PEFT's adapters are fp32 and cast
        their input to fp32; under autocast ("mixed") their matmuls run in 16-bit."""
        return 2 if self.autocast else 4

    @property
    def autocast(self) -> bool:
        """The step runs under torch.autocast (16-bit compute): mixed precision, and QLoRA
        in 16-bit (the Trainer's bf16=True, as the planner's code sets it)."""
        return self.precision == "mixed" or (self.tuning == "qlora"
                                             and self.precision == "bf16")

    @property
    def residual_bytes(self) -> int:
        """Bytes per number of the residual stream, a checkpoint's input: fp32 under
        autocast with fp32 weights (full fine-tuning in mixed precision: the embedding's
        output is fp32 and each residual addition promotes to it), else the activations'."""
        if self.tuning == "qlora":  # prepare_model_for_kbit_training: fp32 embeddings
            return 4
        return 4 if self.autocast and self.tuning == "full" else self.act_bytes

    @property
    def variant(self) -> tuple:
        """What the measured class is fitted for: precision, kernel, LoRA rank and targets,
        device. QLoRA: the precision with "4bit-" before it (model_classes.variant.QUANTIZED:
        the class with bitsandbytes' 4-bit linear layers and peft's fp32 casts)."""
        lora = self.tuning != "full"
        precision = "mixed" if self.autocast else self.precision
        if self.tuning == "qlora":
            precision = QUANTIZED + precision
        return (precision, self.kernel, self.lora_rank if lora else 0,
                self.lora_targets if lora else "all-linear", self.device)

    def fit(self) -> ClassFit | None:
        """The measured class's terms for these settings; None: the course's formula. A
        pasted config's QLoRA is measured on its class with bitsandbytes' 4-bit linear
        layers (model_classes.quantized.quantized_base: peft's prepare_model_for_kbit_training
        makes the norms and embeddings fp32, so the residual stream is fp32, and a 4-bit
        linear returns its input's dtype). QLoRA on a preset or a custom model takes the
        course's formula, which prices the same terms and is held to real 4-bit layers
        (tests/real_libraries); the presets' shipped measurements hold no 4-bit variants."""
        if self.source is None or (self.tuning == "qlora" and self.arch.key != "config"):
            return None
        return self.source.fit(self.variant)

    def _slot(self, fit: ClassFit, batch: int, seq: int) -> str:
        """The largest layer type's slot (the one a rebuild holds at most)."""
        types = dict.fromkeys(self.source.layer_types if self.source else ())
        return max(types, key=lambda t: fit.slot_bytes(t, batch, seq))

    def each_layer(self, batch: int | None = None, seq: int | None = None,
                   first_input_grad: bool = True) -> list[int]:
        """The bytes each decoder layer keeps for backward when it runs plainly, in order
        (the formula: every layer alike; a measured class: by layer type)."""
        b, s = _sizes(self, batch, seq)
        fit = self.fit()
        if fit is None or self.source is None:
            full = layer_bytes(self.tensors(b, s))
            first = full if first_input_grad else layer_bytes(self.tensors(b, s, False))
            return [first] + [full] * (self.arch.layers - 1)
        types = self.source.layer_types
        per_type = {t: fit.slot_bytes(t, b, s) for t in set(types)}
        out = [per_type[t] for t in types]
        if not first_input_grad:
            out[0] = fit.slot_bytes("first", b, s)
        return out

    def tensors(self, batch: int | None = None, seq: int | None = None,
                input_grad: bool = True) -> tuple[Held, ...]:
        """One layer's tensors (a measured class: its largest layer type's terms)."""
        fit = self.fit()
        if fit is not None:
            b, s = _sizes(self, batch, seq)
            slot = "first" if not input_grad else self._slot(fit, b, s)
            return fit.held(slot, b, s)
        return layer_tensors(self.arch, self.batch if batch is None else batch,
                             self.seq if seq is None else seq, self.act_bytes,
                             fused=self.fused, device=self.device,
                             lora_rank=self.lora_rank if self.tuning != "full" else 0,
                             lora_targets=self.targets, attention=self.kernel,
                             padding=self.padding, input_grad=input_grad,
                             lora_bytes=self.lora_bytes, autocast=self.autocast,
                             quantized=self.tuning == "qlora")


_INPUT_FIELDS = frozenset(f.name for f in fields(PlannerInputs))


# ---------------------------------------------------------------- parameters and state


def adapter_params(p: PlannerInputs) -> int:
    """LoRA: r·(in + out) per adapted linear layer. A GPT kind's q, k and v are one linear
    (GPT-2's c_attn): one adapter, r·(h + q + k + v)."""
    fit = p.fit()
    if fit is not None:
        return fit.trainable
    lin = p.arch.linears()
    targets = [t for t in p.targets if t in lin]
    per_layer = sum(p.lora_rank * (lin[t][0] + lin[t][1]) for t in targets)
    fused = [t for t in targets if t in ("q", "k", "v")] if p.arch.kind != "llama" else []
    if fused:  # one input side for the fused projection, every output it adapts
        per_layer -= p.lora_rank * lin["q"][0] * (len(fused) - 1)
    return p.arch.layers * per_layer


def qlora_base_bytes(linear: float, total: float) -> float:
    """QLoRA's frozen base of `total` parameters: its `linear` weights in 4-bit NF4 with
    double-quantized constants (QLORA_BITS a weight), the rest in fp32 (peft's
    prepare_model_for_kbit_training casts every 16-bit parameter that is not 4-bit)."""
    return linear * QLORA_BITS / 8 + (total - linear) * 4


def state_bytes(p: PlannerInputs) -> dict[str, float]:
    """Weights, gradients and optimizer state per GPU, and the sharding gather."""
    prec = PRECISIONS[p.precision]
    total = p.arch.params()
    compute = 4 if p.precision == "fp32" else 2
    if p.tuning == "full":
        trainable, frozen = total, 0.0
    else:
        trainable = adapter_params(p)
        # a pasted config's layer as counted on its class; else the linears' weights
        linear = p.arch.layers * (p.arch.block_params() if p.arch.key == "config" else
                                  sum(i * o for i, o in p.arch.linears().values()))
        frozen = qlora_base_bytes(linear, total) if p.tuning == "qlora" else total * compute
    weight_bytes, grad_bytes = prec.weight_bytes, prec.grad_bytes
    if p.tuning != "full":
        # PEFT's adapters are fp32 whatever the base's dtype (get_peft_model's
        # autocast_adapter_dtype=True upcasts bf16/fp16 adapters: peft 0.21.2,
        # peft/tuners/tuners_utils.py, cast_adapter_dtype), so their gradients and the
        # optimizer's state are fp32 too; under autocast each step also keeps a 16-bit copy
        # of them for backward (autocast's weight cast cache), as mixed precision counts.
        weight_bytes = ADAPTER_BYTES + (PRECISIONS["mixed"].weight_bytes - 4
                                        if p.autocast else 0)
        grad_bytes = ADAPTER_BYTES
    n = p.shards
    weights = (frozen + trainable * weight_bytes) / n
    gathered = root = 0.0
    if n > 1:  # FSDP / ZeRO-3 gathers whole layers in the compute dtype while it uses them
        gathered = FSDP_PREFETCH_LAYERS * p.arch.block_params() * compute * (n - 1) / n
        root = root_unit_params(p) * compute * (n - 1) / n
    grads = trainable * grad_bytes / n
    # the state takes the trained parameters' dtype: bf16 in pure bf16 full fine-tuning,
    # fp32 for PEFT's adapters (memory.precisions.optimizer_state_bytes)
    per_state = optimizer_state_bytes(p.precision if p.tuning == "full" else "fp32",
                                      p.optimizer)
    optimizer = trainable * per_state / n
    if p.tuning == "full" and p.optimizer == "adamw-8bit":
        # The Trainer keeps every nn.Embedding's moments in 32 bits under bitsandbytes'
        # 8-bit optimizers (transformers 5.24.0, trainer.py, create_optimizer:
        # register_module_override(module, "weight", {"optim_bits": 32})): the token (and
        # GPT-2's position) table at AdamW's fp32 8 bytes, not 2.
        tables = (p.arch.vocab + p.arch.positions) * p.arch.hidden
        optimizer += tables * (OPTIMIZERS["adamw"].state_bytes - per_state) / n
    if p.offload:
        optimizer = 0.0
    return {"weights": weights + gathered + root, "gradients": grads,
            "optimizer": optimizer, "gathered": gathered, "root": root,
            "trainable": float(trainable), "params": float(total)}


def root_unit_params(p: PlannerInputs) -> int:
    """The parameters FSDP keeps whole on every GPU from the loss through backward, beside
    the decoder layers it gathers one at a time: the output head and the final norm.
    accelerate 1.15.0 (utils/fsdp_utils.py, fsdp2_prepare_model) shards them as one unit
    with reshard_after_forward=False, and the root with torch's heuristic, which is False
    for the root too; the input embedding is a unit of its own, gathered only while it
    runs (for tied weights the head is the token table, in the same unit)."""
    norm = (2 if p.arch.norm == "layernorm" else 1) * p.arch.hidden  # weight (and bias)
    return p.arch.vocab * p.arch.hidden + norm


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
    if strategy == "none":
        if p.tuning != "full":  # frozen embeddings: the first layer's input needs no gradient
            return Activations(sum(p.each_layer(b, s, first_input_grad=False)), 0, 0.0)
        return Activations(sum(p.each_layer(b, s)), 0, 0.0)
    if strategy == "selective" and p.fused:  # a fused kernel keeps no scores already
        return Activations(sum(p.each_layer(b, s)), 0, 0.0, 0)
    tensors = p.tensors(b, s)
    each = p.each_layer(b, s)
    full, n = layer_bytes(tensors), p.arch.layers
    ckpt = b * s * p.arch.hidden * p.residual_bytes  # a checkpoint keeps the layer's input
    # a rebuilt segment's first layer keeps its input: the checkpoint, counted already
    shared = sum(t.bytes for t in tensors if t.kind == "input")
    # a checkpointed segment reruns its layers, the last one without its final MLP linear
    # (torch's early stop: memory.layer.rerun_flops)
    one, last = layer_flops(p.arch, b, s), rerun_flops(p.arch, b, s, p.targets)
    if strategy == "every-layer":
        return Activations(n * ckpt, full - shared, n * last, n)
    if strategy == "two-layer":
        pairs = math.ceil(n / 2)
        return Activations(pairs * ckpt, min(2, n) * full - shared,
                           (n - pairs) * one + pairs * last, n)
    if strategy == "some-layers":
        k = max(0, min(n, p.some_layers))
        if k == 0:  # nothing checkpointed: checkpointing is not switched on
            return activations(p, "none", b, s)
        if k == n:
            return activations(p, "every-layer", b, s)
        # the first k layers checkpointed; their rebuild comes after the kept ones are freed
        return Activations(k * ckpt + sum(each[k:]), 0, k * last, k)
    if strategy == "selective":
        # Recompute the attention scores only (Korthikanti et al.): what a fused attention
        # kernel (SDPA: flash / memory-efficient) does, keeping a log-sum-exp per head and
        # token and recomputing Q·Kᵀ and the softmax in its backward. With the eager kernel
        # the step is to switch to it (the code the planner prints); with a fused kernel
        # there is nothing left to drop (returned above).
        fused = sum(p.with_(fused=True).each_layer(b, s))
        if p.source is not None and fused >= sum(each):  # the class has no fused kernel
            return Activations(sum(each), 0, 0.0, 0)
        return Activations(fused, 0, n * attention_flops(p.arch, b, s) / 2, n)
    if strategy == "budget" and p.source is not None:
        # the compiler's choice by the course's layer (its tensors' recompute costs),
        # scaled to the class's measured layer
        course = p.with_(source=None)
        formula = layer_bytes(course.tensors(b, s))
        kept, flops = _budget_kept(course.tensors(b, s), p.budget, ckpt)
        share = (kept - ckpt) / max(1, formula - ckpt)
        kept = int(ckpt + share * max(0, full - ckpt))
        return Activations(n * kept, full - kept, n * flops, n if flops else 0)
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
    extra = logit_extra_bytes(p, b, s) * tokens / (b * s) if p.source is not None else 0
    return tokens * p.arch.vocab * (LOSS_FP32_TENSORS * 4 + (e if e < 4 else 0)) + extra


def logit_extra_bytes(p: PlannerInputs, batch: int | None = None, seq: int | None = None
                      ) -> int:
    """What a measured class keeps of b·s·V width around its loss beyond the log-softmax
    the formula counts (Gemma 2's final logit soft-cap keeps its tanh's output; QLoRA under
    autocast keeps the 16-bit cast of the fp32 output head, V·h numbers: peft makes the
    frozen head fp32 and autocast casts it for the head's matmul); 0 for
    the formula."""
    fit = p.fit()
    if fit is None:
        return 0
    b, s = _sizes(p, batch, seq)
    fit = fit.at(b)
    kept = sum(fit.value(t, b, s) for t in fit.terms if t.slot == "outside" and t.kind == "loss")
    return max(0, kept - 4 * b * s * p.arch.vocab)


def step_flops(p: PlannerInputs, batch: int | None = None, seq: int | None = None) -> float:
    """Forward + backward of one micro-batch without checkpointing. Backward is two
    forwards for full fine-tuning (the gradients of the inputs and of the weights); with
    adapters one (the frozen base computes no weight gradients; the adapters' own are
    small: an approximation). So one more forward is about +1/3 of a full fine-tune's step
    and about +1/2 of an adapter's, less the LM head, which is never rerun, and less what
    early stop skips (memory.layer.rerun_flops)."""
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
              seq: int | None = None, state: dict[str, float] | None = None) -> Breakdown:
    """Memory per GPU at the step's peak. The layer being rebuilt and the loss peak are
    added as if they came at once (they come one after the other: this overstates by the
    smaller of the two). Backward's own temporaries and what is kept outside the decoder
    layers are not pieces of their own: the workspace allowance is to cover them
    (`step_peak_range` gives the band measured steps fall in, without the allowances).
    `state`: state_bytes(p), where the caller has it already (it does not depend on the
    batch or the sequence)."""
    state = state_bytes(p) if state is None else state
    act = activations(p, strategy or p.strategy, batch, seq)
    logits = logits_peak_bytes(p, batch, seq)
    subtotal = (state["weights"] + state["gradients"] + state["optimizer"] + act.kept
                + act.rebuilt + logits)
    return Breakdown(state["weights"], state["gradients"], state["optimizer"], act.kept,
                     act.rebuilt, logits, WORKSPACE_BYTES + FRAGMENTATION * subtotal)


def peak_bytes(p: PlannerInputs, strategy: str | None = None, batch: int | None = None,
               seq: int | None = None) -> float:
    """The planner's step peak: `breakdown`'s pieces as if at once, plus the GPU's
    allowances (workspace, fragmentation). Without the allowances the pieces are an
    estimate, not a bound: `step_peak_range` gives the band a measured step falls in."""
    return breakdown(p, strategy, batch, seq).total


# Room for what the pieces leave out, in plain layers: backward's own temporaries (the
# gradients flowing through the layer being differentiated; under LoRA in 16-bit PEFT's
# adapters make them fp32) and what is kept outside the decoder layers (the embedding's
# output, the final norm). On tiny real transformers models (tests/real_libraries/
# test_step_peaks.py) the step peak exceeded the pieces by at most 0.22 of a plain layer
# (QLoRA with every layer checkpointed; LoRA 0.08, both with the adapters' gradients
# counted in fp32); one layer is the allowance.
BACKWARD_ALLOWANCE_LAYERS = 1


@dataclass(frozen=True)
class StepPeakRange:
    """The band a step's peak (live bytes above the weights, without the GPU's workspace
    and fragmentation) falls in, by the planner's documented approximations."""

    lower: float  # the largest moment the step must pass through
    pieces: float  # gradients + activations kept + the layer rebuilt + the loss, at once
    upper: float  # the pieces + BACKWARD_ALLOWANCE_LAYERS plain layers


def step_peak_range(p: PlannerInputs, strategy: str | None = None, batch: int | None = None,
                    seq: int | None = None) -> StepPeakRange:
    """The planner's step peak as a band. Its pieces (gradients, the activations kept, the
    layer being rebuilt, the loss peak) come one after the other, not at once: the loss
    peaks while every kept activation is alive and before any gradient exists, the last
    gradients appear when most activations are freed. So the sum overstates the peak of a
    full fine-tune (measured 0.56 to 0.92 of it on the tiny real models), and it leaves out
    backward's own temporaries and what is kept outside the decoder layers, which can make
    the peak exceed it when gradients are few (with every layer checkpointed: LoRA up to
    1.04 of it, QLoRA 1.10).

    lower: the largest of three moments every step passes through: the loss (every kept
    activation and the loss's tensors), the first layer rebuilt in backward (every
    checkpoint and that layer) and the end of backward (every gradient).
    upper: the pieces plus BACKWARD_ALLOWANCE_LAYERS plain layers for the rest."""
    bd = breakdown(p, strategy, batch, seq)
    b, s = _sizes(p, batch, seq)
    kept, rebuilt = bd.activations_kept, bd.activations_rebuilt
    pieces = bd.gradients + kept + rebuilt + bd.logits
    lower = max(kept + bd.logits, kept + rebuilt, bd.gradients)
    upper = pieces + BACKWARD_ALLOWANCE_LAYERS * layer_bytes(p.tensors(b, s))
    return StepPeakRange(lower, pieces, upper)


def fits(p: PlannerInputs, strategy: str | None = None, batch: int | None = None,
         seq: int | None = None) -> bool:
    """The step's peak within the GPU's memory less the headroom (usable_bytes)."""
    return peak_bytes(p, strategy, batch, seq) <= p.usable_bytes


def largest_n(ok, hi: int) -> int:
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
    state = state_bytes(p)
    return largest_n(lambda b: breakdown(p, strategy, b, None, state).total
                     <= p.usable_bytes, MAX_BATCH)


def longest_seq(p: PlannerInputs, strategy: str) -> int:
    state = state_bytes(p)
    return largest_n(lambda s: breakdown(p, strategy, None, s, state).total
                     <= p.usable_bytes, MAX_SEQ)


# ---------------------------------------------------------------- every strategy, and advice


@dataclass(frozen=True)
class StrategyRow:
    strategy: str
    peak: float
    fits: bool
    spare: float  # GPU bytes minus peak (negative: short by); fits keeps the headroom
    recompute_share: float  # recomputed FLOPs as a share of the step without checkpointing
    largest_batch: int
    longest_seq: int
    saves: bool  # keeps fewer bytes than "none"
    breakdown: Breakdown


def strategy_row(p: PlannerInputs, strategy: str) -> StrategyRow:
    bd = breakdown(p, strategy)
    act = activations(p, strategy)
    none = activations(p, "none")
    return StrategyRow(strategy, bd.total, bd.total <= p.usable_bytes, p.gpu_bytes - bd.total,
                       act.recompute_flops / step_flops(p), largest_batch(p, strategy),
                       longest_seq(p, strategy),
                       act.kept + act.rebuilt < none.kept, bd)


def fewest_n(ok, lo: int, hi: int) -> int | None:
    """The smallest n in lo..hi with ok(n) (ok is monotone: false, then true), by
    bisection; None if not even ok(hi)."""
    if hi < lo or not ok(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid + 1, hi)
    return lo


def minimal_some_layers(p: PlannerInputs) -> int | None:
    """The fewest checkpointed layers that fit (1 to all but one), None if even all but
    one do not. Each layer more turns a layer's bytes into its input's, which it keeps
    anyway, so the peak never grows with k: found by bisection."""
    return fewest_n(lambda k: fits(p.with_(some_layers=k), "some-layers"), 1, p.arch.layers - 1)
