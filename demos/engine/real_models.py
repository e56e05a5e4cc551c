"""The planner's model families as tiny real Hugging Face models, measured.

A planner preset (memory.architectures.PRESETS) is scaled down to a few layers and a
hidden size of about a hundred (`tiny_architecture`), built from the real transformers
class of its family with random weights (GPT-2: GPT2LMHeadModel, Llama: LlamaForCausalLM,
Qwen2.5: Qwen2ForCausalLM; nothing is downloaded), switched to checkpointing the way a
practitioner does it, optionally wrapped with PEFT LoRA, and run for one training step on
the CPU. What it keeps for backward is counted with torch's saved_tensors_hooks: each
storage once, parameters and buffers apart, attributed to the decoder layer that was
running when the storage was first saved (forward pre/post hooks mark it). A layer run
under checkpoint saves nothing through those hooks: what it keeps is its arguments, which
the checkpoint holds until backward; its hidden-state input is counted as that layer's.

Checkpointing, as transformers 5.24.0 does it (transformers/modeling_utils.py):
* "every-layer": `model.activation_checkpointing_enable()` (use_reentrant=False by default);
* "every-n": `activation_checkpointing_enable(every_n_layers=n)`: layers 0, n, 2n, ...;
* "first-k": enable on every layer, then `layer.gradient_checkpointing = False` on the layers
  from k on. GradientCheckpointingLayer (transformers/modeling_layers.py) reads that flag
  on each call, per layer instance.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from demos.engine.tracker import LiveTracker
from memory.architectures import PRESETS, Architecture
from memory.saved_weights import is_weight_copy

ATTENTIONS = ("sdpa", "eager")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# "mixed": the step under torch.autocast("cpu", dtype=torch.bfloat16), as HF's Trainer runs
# it with bf16=True; full fine-tuning over fp32 weights, LoRA over a bf16 base (the
# planner's mixed precision: memory.precisions, memory.footprint.state_bytes)
PRECISIONS = (*DTYPES, "mixed")
STRATEGIES = ("none", "every-layer", "every-n", "first-k")
TINY_HEAD_DIM = 16
TINY_VOCAB = 256
# PEFT's target module names per family for the planner's two LoRA target sets.
LORA_MODULES = {
    "gpt2": {"attention": ["c_attn", "attn.c_proj"], "all-linear": "all-linear"},
    "llama": {"attention": ["q_proj", "k_proj", "v_proj", "o_proj"],
              "all-linear": "all-linear"},
}
QLORA_SKIP = ("QLoRA needs bitsandbytes (requirements.txt) for its 4-bit NF4 layers, and it "
              "is not installed in this environment, so QLoRA is not measured here.")


def qlora_available() -> bool:
    """Whether bitsandbytes, QLoRA's 4-bit layers, can be imported here."""
    import importlib.util

    return importlib.util.find_spec("bitsandbytes") is not None


def family(arch: Architecture) -> str:
    """The transformers family of an architecture: gpt2, qwen2 (q/k/v biases) or llama."""
    if arch.kind == "gpt":
        return "gpt2"
    return "qwen2" if arch.qkv_bias else "llama"


def tiny_architecture(preset: str, layers: int = 4, vocab: int = TINY_VOCAB,
                      positions: int = 128) -> Architecture:
    """A preset scaled down: the same layer kind, activation, biases, dropout, tying and
    query-heads-per-KV-head ratio, the same MLP width ÷ hidden (rounded to 8), heads of 16
    numbers; `layers` layers and a small vocabulary."""
    big = PRESETS[preset]
    group = big.heads // big.kv_heads
    kv = 4 if group == 1 else (2 if group <= 4 else 1)
    heads = group * kv
    hidden = heads * TINY_HEAD_DIM
    width = 8 * round(big.mlp_width / big.hidden * hidden / 8)
    return big.with_(key=f"{preset}-tiny", label=f"{big.label} (tiny)", layers=layers,
                     hidden=hidden, heads=heads, kv_heads=kv, mlp_width=width, vocab=vocab,
                     positions=positions if big.positions else 0, published_params=None)


def hf_config(arch: Architecture, attention: str = "sdpa"):
    """The transformers config of an architecture (random init, nothing downloaded)."""
    import transformers

    common = {"vocab_size": arch.vocab, "tie_word_embeddings": arch.tied}
    if family(arch) == "gpt2":
        p = 0.1 if arch.dropout else 0.0
        cfg = transformers.GPT2Config(
            n_layer=arch.layers, n_embd=arch.hidden, n_head=arch.heads,
            n_inner=arch.mlp_width, n_positions=arch.positions or 1024,
            activation_function=arch.activation, resid_pdrop=p, embd_pdrop=p, attn_pdrop=p,
            bos_token_id=arch.vocab - 1, eos_token_id=arch.vocab - 1, **common)
    else:
        cls = transformers.Qwen2Config if family(arch) == "qwen2" else transformers.LlamaConfig
        cfg = cls(hidden_size=arch.hidden, intermediate_size=arch.mlp_width,
                  num_hidden_layers=arch.layers, num_attention_heads=arch.heads,
                  num_key_value_heads=arch.kv_heads, hidden_act=arch.activation,
                  max_position_embeddings=max(arch.positions, 4096), **common)
    cfg._attn_implementation = attention
    return cfg


def build_model(arch: Architecture, dtype: str = "fp32", attention: str = "sdpa",
                seed: int = 0) -> torch.nn.Module:
    import transformers

    torch.manual_seed(seed)
    cfg = hf_config(arch, attention)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=attention,
                                                          dtype=DTYPES[dtype])
    model.loss_type = "ForCausalLM"  # the default it would pick, without a warning
    return model.train()


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    from transformers.modeling_layers import GradientCheckpointingLayer

    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


def apply_checkpointing(model: torch.nn.Module, strategy: str, n: int = 2, k: int = 1
                        ) -> tuple[int, ...]:
    """Switch checkpointing on as a practitioner does (see the module's docstring); the
    indices of the checkpointed layers."""
    if strategy == "every-layer":
        model.activation_checkpointing_enable()
    elif strategy == "every-n":
        model.activation_checkpointing_enable(every_n_layers=n)
    elif strategy == "first-k":
        model.activation_checkpointing_enable()
        for i, layer in enumerate(decoder_layers(model)):
            if i >= k:
                layer.gradient_checkpointing = False
    elif strategy != "none":
        raise ValueError(f"unknown strategy {strategy!r}")
    return tuple(i for i, layer in enumerate(decoder_layers(model))
                 if layer.gradient_checkpointing)


def apply_lora(model: torch.nn.Module, arch: Architecture, rank: int, targets: str
               ) -> torch.nn.Module:
    """PEFT LoRA with its defaults (alpha 8, no dropout, adapters in fp32:
    autocast_adapter_dtype=True) on the planner's target set."""
    from peft import LoraConfig, get_peft_model

    fam = "gpt2" if family(arch) == "gpt2" else "llama"
    cfg = LoraConfig(r=rank, target_modules=LORA_MODULES[fam][targets],
                     fan_in_fan_out=fam == "gpt2", task_type="CAUSAL_LM")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return get_peft_model(model, cfg)


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


def nf4_config():
    """QLoRA's quantization as the planner's code loads it: 4-bit NF4, double quantization,
    bf16 compute (transformers' BitsAndBytesConfig)."""
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                              bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=torch.bfloat16)


def load_in_4bit(model: torch.nn.Module, dtype: torch.dtype, kernel: str) -> torch.nn.Module:
    """QLoRA's base on real data, as the planner's code loads it: the model saved to a
    temporary folder and loaded back in `dtype` with bitsandbytes' 4-bit NF4 (nf4_config),
    then peft's prepare_model_for_kbit_training(use_gradient_checkpointing=False), which
    casts every parameter that is not 4-bit (embeddings, norms, the head) to fp32
    (peft/utils/other.py)."""
    import tempfile
    import warnings

    from peft import prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM

    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=dtype, attn_implementation=kernel, quantization_config=nf4_config())
        return prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)


def quantized_model(arch: Architecture, dtype: str = "bf16", attention: str = "sdpa"
                    ) -> torch.nn.Module:
    """QLoRA's base of a tiny preset, as the planner's code loads it
    (load_in_4bit)."""
    model = load_in_4bit(build_model(arch, dtype, attention), DTYPES[dtype], attention)
    model.loss_type = "ForCausalLM"
    return model.train()


def build(setup: Setup) -> tuple[torch.nn.Module, tuple[int, ...]]:
    """The model of a setup, checkpointing switched on, LoRA applied (the order HF's
    Trainer uses: checkpointing on the base model, then PEFT)."""
    dtype = setup.dtype
    if dtype == "mixed":
        dtype = "bf16" if setup.lora_rank else "fp32"
    if setup.qlora:  # loaded in bf16 (fp32 for an fp32 plan), as the planner's code does
        model = quantized_model(setup.arch, dtype, setup.attention)
    else:
        model = build_model(setup.arch, dtype, setup.attention)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        checkpointed = apply_checkpointing(model, setup.strategy, setup.n, setup.k)
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
    and (peak=True) the step's peak live bytes above the parameters (demos.engine.tracker)."""
    model, checkpointed = build(setup)
    ids, labels, mask = _batch(setup)
    layers = decoder_layers(model)
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
    """What the course's own engine model (demos.engine.model, demos.engine.llama) would
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


def import_libraries() -> None:
    """Import what a measurement builds its model with (transformers and peft: about 5 s
    of CPU on a 2-core machine). The server does it before it listens: imported by the
    first learner's page instead, it held every other page's run of a fresh server."""
    import peft  # noqa: F401
    import transformers
    from transformers.modeling_layers import GradientCheckpointingLayer  # noqa: F401

    transformers.AutoModelForCausalLM  # noqa: B018 - its lazy module, loaded now


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
