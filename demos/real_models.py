"""The planner's model families as tiny real Hugging Face models, measured by the lab.

A planner preset is scaled down and built from the real transformers class of its family
(model_classes.tiny, through the causal-LM kind), switched to checkpointing the way a
practitioner does it (model_classes.causal_lm), optionally wrapped with PEFT LoRA, and run
for one training step on the CPU. What it keeps for backward is counted with torch's
saved_tensors_hooks: each storage once, parameters and buffers apart, attributed to the
decoder layer that was running when the storage was first saved (forward pre/post hooks
mark it). A layer run under checkpoint saves nothing through those hooks: what it keeps is
its arguments, which the checkpoint holds until backward; its hidden-state input is
counted as that layer's. With `peak=True` the lab's live-bytes tracker (demos.tracker)
follows the whole step.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from demos.tracker import LiveTracker
from memory.architectures import Architecture
from memory.saved_weights import is_weight_copy
from model_classes.tiny import KIND, LORA_MODULES, apply_lora, build_model, family

# "mixed": the step under torch.autocast("cpu", dtype=torch.bfloat16), as HF's Trainer runs
# it with bf16=True; full fine-tuning over fp32 weights, LoRA over a bf16 base (the
# planner's mixed precision: memory.precisions, memory.footprint.state_bytes)
PRECISIONS = ("fp32", "bf16", "mixed")
STRATEGIES = ("none", "every-layer", "every-n", "first-k")


@dataclass(frozen=True)
class Setup:
    """One measured configuration."""

    arch: Architecture
    batch: int = 2
    seq: int = 32
    dtype: str = "fp32"
    attention: str = "sdpa"
    strategy: str = "none"
    n: int = 2  # every_n_layers
    k: int = 1  # first k layers checkpointed
    lora_rank: int = 0  # 0: full fine-tuning
    lora_targets: str = "all-linear"
    padding: bool = False  # a padding mask (the last tokens of the first sequence padded)
    qlora: bool = False  # the base in 4-bit NF4 (bitsandbytes), LoRA on top


@dataclass(frozen=True)
class Measurement:
    setup: Setup
    per_layer: tuple[int, ...]  # bytes each decoder layer keeps for backward
    outside: int  # kept outside the decoder layers (embeddings, final norm, head, loss)
    checkpointed: tuple[int, ...]
    peak: int | None = None  # live bytes above parameters at the step's peak
    loss: float = 0.0
    shapes: dict[int, list[str]] = field(default_factory=dict, compare=False)
    # autocast's 16-bit copies of trainable weights kept for backward, per decoder layer
    # (not in per_layer: the planner counts them with the weights)
    weight_copies: tuple[int, ...] = ()
    # the step under the live tracker (peak=True): its event log (LiveTracker.events, the
    # decoder layer as the layer) for the memory snapshot, and the model's parameter bytes
    memory_events: list[list] | None = field(default=None, compare=False, repr=False)
    parameter_bytes: int = 0

    @property
    def layers_total(self) -> int:
        return sum(self.per_layer)

    @property
    def total(self) -> int:
        return self.layers_total + self.outside


def _batch(setup: Setup) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, setup.arch.vocab, (setup.batch, setup.seq), generator=g)
    mask = None
    if setup.padding:
        mask = torch.ones_like(ids)
        mask[0, -max(1, setup.seq // 4):] = 0
    return ids, ids.clone(), mask


def build(setup: Setup) -> tuple[torch.nn.Module, tuple[int, ...]]:
    """The model of a setup, checkpointing switched on, LoRA applied (the order HF's
    Trainer uses: checkpointing on the base model, then PEFT)."""
    dtype = setup.dtype
    if dtype == "mixed":
        dtype = "bf16" if setup.lora_rank else "fp32"
    # QLoRA's base loaded in bf16 (fp32 for an fp32 plan), as the planner's code does
    model = build_model(setup.arch, dtype, setup.attention, quantized=setup.qlora)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        checkpointed = KIND.checkpoint(model, setup.strategy, setup.n, setup.k)
    if setup.lora_rank:
        model = apply_lora(model, setup.arch, setup.lora_rank, setup.lora_targets)
    return model, checkpointed


@contextmanager
def _layer_marks(layers: list[torch.nn.Module], state: dict,
                 tracker: LiveTracker | None = None) -> Iterator[None]:
    """Hooks that mark which decoder layer runs in forward, in `state` and for the
    tracker. transformers checkpoints a layer's `forward`, not its `__call__`, so the
    hooks stay outside the checkpoint (transformers/modeling_layers.py) and a layer's
    recomputation counts as backward."""
    handles = []
    tokens: list[tuple] = []
    for i, layer in enumerate(layers):
        def pre(module, args, kwargs, i=i):
            state["layer"] = i
            if tracker is not None:
                tokens.append(tracker.enter_layer(i))
            # made outside the layers and passed to each (rotary cos/sin, the mask)
            for t in [*args[1:], *kwargs.values()]:
                for u in (t if isinstance(t, tuple) else (t,)):
                    if isinstance(u, torch.Tensor) and u is not kwargs.get("hidden_states"):
                        state["shared"].add(u.untyped_storage().data_ptr())
            if module.gradient_checkpointing and module.training:
                x = args[0] if args else kwargs["hidden_states"]
                state["inputs"].append((i, x))
            return None

        def post(module, args, kwargs, output, i=i):
            state["layer"] = None
            if tracker is not None and tokens:
                tracker.restore(tokens.pop())
            return None

        handles.append(layer.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(layer.register_forward_hook(post, with_kwargs=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def uses_autocast(setup: Setup) -> bool:
    """Mixed precision, and QLoRA in 16-bit: the planner's code sets the Trainer's bf16=True,
    which runs forward and loss under torch.autocast."""
    return setup.dtype == "mixed" or (setup.qlora and setup.dtype == "bf16")


def measure(setup: Setup, peak: bool = False) -> Measurement:
    """One training step of the setup; bytes saved for backward per layer and outside,
    and (peak=True) the step's peak live bytes above the parameters (demos.tracker)."""
    model, checkpointed = build(setup)
    ids, labels, mask = _batch(setup)
    layers = KIND.blocks(model)
    constant = [*model.parameters(), *model.buffers()]
    seen: dict[int, tuple[int | None, int]] = {}
    copies: dict[int, tuple[int | None, int]] = {}
    shapes: dict[int, list[str]] = {}
    state: dict = {"layer": None, "inputs": [], "shared": set()}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key in copies or (key not in seen and is_weight_copy(t)):
            copies[key] = (state["layer"], storage.nbytes())
        elif key not in seen and storage.nbytes() and not any(
                c.untyped_storage().data_ptr() == key for c in constant):
            # the parameters' storages as they are now: bitsandbytes' Linear4bit replaces
            # a bias with a cast of it during the step, and the old address can be reused
            layer = None if key in state["shared"] else state["layer"]
            seen[key] = (layer, storage.nbytes())
            shapes.setdefault(-1 if layer is None else layer, []).append(
                f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')} {t.grad_fn}")
        return t

    tracker = LiveTracker("cpu", events=True) if peak else None
    with _layer_marks(layers, state, tracker), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if tracker is not None:
            tracker.ignore([*model.parameters(), ids, labels]
                           + ([mask] if mask is not None else []))
        context = tracker if tracker is not None else _null()
        autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if uses_autocast(setup)
                    else _null())
        with context:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast:
                out = model(input_ids=ids, labels=labels, attention_mask=mask, use_cache=False)
            for i, x in state["inputs"]:  # what a checkpointed layer holds: its input
                key = x.untyped_storage().data_ptr()
                if key not in seen:
                    seen[key] = (i, x.untyped_storage().nbytes())
            loss = out.loss
            if tracker is not None:
                tracker.start_backward()
            loss.backward()
    per_layer = [0] * len(layers)
    outside = 0
    for layer, nbytes in seen.values():
        if layer is None:
            outside += nbytes
        else:
            per_layer[layer] += nbytes
    weight_copies = [0] * len(layers)
    for layer, nbytes in copies.values():
        if layer is not None:
            weight_copies[layer] += nbytes
    if tracker is not None:
        tracker.close()
    return Measurement(setup, tuple(per_layer), outside, checkpointed,
                       tracker.peak_bytes if tracker is not None else None,
                       float(loss.detach().float()), shapes, tuple(weight_copies),
                       tracker.events if tracker is not None else None,
                       sum(p.nbytes for p in model.parameters()))


@contextmanager
def _null() -> Iterator[None]:
    yield


# --- the planner's prediction for a setup ------------------------------------------------
def sdpa_fused(arch: Architecture, device: str = "cpu") -> bool:
    """Whether SDPA runs a fused kernel: on a CPU torch 2.13 has no fused kernel with
    dropout, so a model with attention dropout (GPT-2) runs the math kernel there."""
    return device != "cpu" or not arch.dropout


def predicted_layers(setup: Setup, checkpointed: tuple[int, ...], fused: bool | None = None
                     ) -> tuple[int, ...]:
    """The planner's bytes per decoder layer (memory.layer.layer_tensors): a checkpointed
    layer keeps its input, the others what a plain layer keeps; under LoRA without
    checkpointing the first layer's input needs no gradient."""
    from memory.layer import layer_bytes

    p = planner_inputs(setup)
    if fused is not None:
        p = p.with_(fused=fused)
    out = []
    for i in range(setup.arch.layers):
        if i in checkpointed:
            out.append(setup.batch * setup.seq * setup.arch.hidden * p.residual_bytes)
            continue
        out.append(layer_bytes(p.tensors(
            input_grad=i > 0 or bool(checkpointed) or not setup.lora_rank)))
    return tuple(out)


# --- the live page's run -------------------------------------------------------------------
_LOCK = threading.Lock()


def lab_layers(setup: Setup, checkpointed: tuple[int, ...]) -> tuple[int, ...]:
    """What the course's own engine model (demos.model, demos.llama) would
    keep at the same shapes: the planner's formula without the libraries' terms (a fused
    GELU, a fused SDPA kernel, as its attention has no dropout, full fine-tuning)."""
    return predicted_layers(Setup(setup.arch.with_(act=""), setup.batch, setup.seq,
                                  setup.dtype, "sdpa", setup.strategy, setup.n, setup.k),
                            checkpointed, fused=True)


def code(setup: Setup) -> str:
    """The lines a practitioner writes for the setup (transformers 5.24.0, peft 0.21.2,
    bitsandbytes 0.50.2)."""
    lines = []
    if setup.qlora:
        dtype = "torch.float32" if setup.dtype == "fp32" else "torch.bfloat16"
        lines += ["from transformers import AutoModelForCausalLM, BitsAndBytesConfig",
                  "from peft import prepare_model_for_kbit_training",
                  "quantization = BitsAndBytesConfig(load_in_4bit=True, "
                  'bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True, '
                  "bnb_4bit_compute_dtype=torch.bfloat16)",
                  f"model = AutoModelForCausalLM.from_pretrained(folder, dtype={dtype}, "
                  "quantization_config=quantization)",
                  "model = prepare_model_for_kbit_training(model, "
                  "use_gradient_checkpointing=False)"]
    if setup.strategy == "every-layer":
        lines.append("model.activation_checkpointing_enable()")
    elif setup.strategy == "every-n":
        lines.append(f"model.activation_checkpointing_enable(every_n_layers={setup.n})")
    elif setup.strategy == "first-k":
        lines += ["model.activation_checkpointing_enable()",
                  f"for layer in model.model.layers[{setup.k}:]:"
                  if family(setup.arch) != "gpt2" else
                  f"for layer in model.transformer.h[{setup.k}:]:",
                  "    layer.gradient_checkpointing = False"]
    if setup.lora_rank:
        fam = "gpt2" if family(setup.arch) == "gpt2" else "llama"
        targets = LORA_MODULES[fam][setup.lora_targets]
        lines += ["from peft import LoraConfig, get_peft_model",
                  f"model = get_peft_model(model, LoraConfig(r={setup.lora_rank}, "
                  f"target_modules={targets!r}, task_type=\"CAUSAL_LM\"))"]
    if uses_autocast(setup):
        lines += ["with torch.autocast(\"cpu\", dtype=torch.bfloat16):  # bf16=True",
                  "    loss = model(input_ids=ids, labels=ids).loss",
                  "loss.backward()"]
    return "\n".join(lines) or "# checkpointing off"


@functools.lru_cache(maxsize=64)
def run_live(setup: Setup) -> Measurement:
    """measure(setup) with the step's peak, one at a time (the CPU is shared), cached."""
    with _LOCK:
        return measure(setup, peak=True)


PLANNER_STRATEGIES = {"none": "none", "every-layer": "every-layer", "first-k": "some-layers",
                      "every-n": None}  # every_n_layers is no planner strategy


def planner_inputs(setup: Setup):
    """The planner's inputs for a measured setup (the CPU's kernels, its precision)."""
    from memory.footprint import PlannerInputs

    return PlannerInputs(
        setup.arch, seq=setup.seq, batch=setup.batch, precision=setup.dtype,
        tuning=("qlora" if setup.qlora else "lora") if setup.lora_rank else "full",
        lora_rank=setup.lora_rank or 16,
        lora_targets=setup.lora_targets, fused=sdpa_fused(setup.arch), device="cpu",
        attention=setup.attention, padding=setup.padding, some_layers=setup.k)


def planner_peak_pieces(setup: Setup) -> int | None:
    """The planner's step peak without the parameters and the GPU allowances: gradients,
    activations kept, the layers rebuilt and the loss peak, added as if at once; None for a
    strategy the planner has no row for."""
    from memory.footprint import breakdown

    strategy = PLANNER_STRATEGIES[setup.strategy]
    if strategy is None:
        return None
    bd = breakdown(planner_inputs(setup), strategy)
    return int(bd.gradients + bd.activations_kept + bd.activations_rebuilt + bd.logits)


def planner_peak_range(setup: Setup):
    """The planner's step-peak band for a measured setup (memory.footprint.step_peak_range:
    the moments every step passes through, the pieces as if at once, and the pieces plus
    an allowance for backward's temporaries); None for a strategy without a planner row."""
    from memory.footprint import step_peak_range

    strategy = PLANNER_STRATEGIES[setup.strategy]
    return None if strategy is None else step_peak_range(planner_inputs(setup), strategy)
