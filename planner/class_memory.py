"""The bytes a model family's real transformers class keeps for backward, measured.

For a config.json, the transformers 5.24 class (AutoModelForCausalLM) is built with the
config's own shapes but only as many decoder layers as it takes to meet each layer type
once after the first (Llama: 2; Gemma 2: 3, local then global; Gemma 3: 6), and one
training step's forward runs with its loss. Nothing is downloaded and nothing is
allocated: the model is built and run under torch's FakeTensorMode, whose tensors have
shapes, dtypes and storages but no data, so a 70B layer at 4,096 tokens costs what a tiny
one does. Every tensor autograd saves goes through torch.autograd.graph.
saved_tensors_hooks; each storage is counted once (views of it are the same storage),
parameters apart, and attributed to the decoder layer running when it was first saved
(the layer's own input to that layer; a tensor made outside the layers and passed in,
such as a mask, outside them), and inside the layer to the innermost module running.

Full size: run at three sequence lengths and three batch sizes (1, 2, 3) per stretch of s (a sliding
window splits s at the window: transformers builds a real mask from there on), and each
term's bytes are fitted exactly as b·(g0 + g1·s + g2·s²) + (h0 + h1·s + h2·s²) for
b ≥ 2 and as its own quadratic in s at b = 1 (memory.class_layers.Poly).
`fit_variant(..., check=True)` measures one more point per stretch and refuses a fit that
misses it by a byte; the tests compare the fit with real CPU steps.

CPU against GPU: the measurement runs torch's CPU kernels; a plan prices the GPU's. The
terms that differ are converted per saved tensor, read off the autograd graph:
* dropout masks: 1 byte per number on CUDA (native_dropout's bool mask), the input's
  dtype on the CPU (its dropout multiplies by a float mask; found as the tensor
  torch.nn.functional.dropout saves that needs no gradient);
* LayerNorm's mean and 1/std (native_layer_norm's 2nd and 3rd results): fp32 on CUDA, the
  input's dtype on the CPU;
* SDPA's log-sum-exp (fp32 per head and token on both): CUDA's memory-efficient kernel,
  used for fp32 inputs or with an attention mask, pads it to 32 tokens;
* softmax under autocast: CUDA's autocast runs it in fp32 (its fp32 list,
  torch/include/ATen/autocast_mode.h, AT_FORALL_FP32_SET_OPT_DTYPE), the CPU's in its
  input's dtype: a 16-bit softmax output is kept in fp32 on CUDA, and where a later op
  saves it too (GPT-2's eager attention without dropout: the matmul with v) that op keeps
  the 16-bit cast of it (`.type(value.dtype)`) as well;
* SDPA with attention dropout: the CPU has no fused kernel with dropout and runs the
  math kernel (s² probabilities); CUDA's flash kernel drops inside the kernel, so the GPU
  variant is measured with the attention dropout set to 0 (the kernel keeps its random
  seed and offset: 16 bytes, left out).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any
from unittest import mock

import torch

from memory.class_layers import DENSE_MLP, ClassFit, Poly, Term
from memory.saved_weights import VIEW_NODES, is_weight_copy

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
KERNELS = ("sdpa", "eager")
# config keys of attention dropout (GPT-2 and the Llama-style configs)
ATTENTION_DROPOUT = ("attn_pdrop", "attention_dropout")
SAMPLE_STEP = 64  # tokens between the sampled sequence lengths (without a window)


class ClassConfigError(ValueError):
    """A config.json transformers cannot build as a decoder-only causal LM: `problem` (an
    id: no-model-type, unknown, encoder, not-causal, cannot-build, encoder-decoder, multimodal,
    window) and `model_type`, for the page to word; str() is the English line."""

    def __init__(self, problem: str, message: str, model_type: str = "") -> None:
        super().__init__(message)
        self.problem = problem
        self.model_type = model_type


# a variant key's precision prefix for QLoRA: the base in 4-bit NF4 ("4bit-fp32": loaded
# in fp32, no autocast; "4bit-mixed": loaded in bf16, under bf16 autocast)
QUANTIZED = "4bit-"


@dataclass(frozen=True)
class Variant:
    """What changes what a layer keeps: the precision (fp32, bf16, mixed: autocast over
    fp32 weights, or over a bf16 base under LoRA), the attention kernel, LoRA (rank and
    targets: "attention" or "all-linear"; rank 0: full fine-tuning), the device priced
    ("cpu": as measured, "cuda": converted) and `quantized`: QLoRA's base, every linear
    layer transformers quantizes in bitsandbytes' 4-bit NF4 (quantized_base)."""

    precision: str = "fp32"
    kernel: str = "sdpa"
    lora_rank: int = 0
    lora_targets: str = "all-linear"
    device: str = "cpu"
    quantized: bool = False


def load_libraries() -> None:
    """Import, once per process, what every measurement uses whatever the family:
    transformers' model classes and masks, PEFT (which imports bitsandbytes where it is
    installed) and torch's fake tensors; about 2 s of CPU time on a 2-core machine, spent
    by the first measured plan of a process unless the process calls this earlier. A
    family's own modeling module is imported on its first use."""
    import peft  # noqa: F401
    import transformers.masking_utils  # noqa: F401
    import transformers.modeling_layers  # noqa: F401
    from torch._subclasses import fake_tensor  # noqa: F401
    from transformers import AutoModelForCausalLM  # noqa: F401


# ---------------------------------------------------------------- the config


def _text_part(cfg: dict[str, Any]) -> dict[str, Any]:
    """A multimodal config's language model (Gemma 3's text_config): the part trained
    as a causal LM here."""
    text = cfg.get("text_config")
    if isinstance(text, dict) and text.get("model_type"):
        return dict(text)
    return cfg


def hf_config(cfg: dict[str, Any]):
    """The transformers config of a config.json dict; ClassConfigError (one line) when it
    is no decoder-only causal LM transformers builds."""
    from transformers import CONFIG_MAPPING, AutoConfig
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    cfg = _text_part(cfg)
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str):
        raise ClassConfigError("no-model-type", "config.json has no 'model_type'")
    if model_type not in CONFIG_MAPPING:
        raise ClassConfigError("unknown", f"model_type {model_type!r}: transformers 5.24 has "
                               "no such model", model_type)
    if model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES:  # BERT, RoBERTa, BART ...: their
        # causal-LM class is the encoder (or a decoder half) run with is_decoder=True
        raise ClassConfigError("encoder", f"model_type {model_type!r} is an encoder model "
                               "(it has a masked-LM class), not a decoder-only LM", model_type)
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ClassConfigError("not-causal", f"model_type {model_type!r} is not a decoder-only "
                               "causal LM (transformers has no AutoModelForCausalLM class "
                               "for it)", model_type)
    fields = {k: v for k, v in cfg.items()
              if k not in ("model_type", "architectures", "transformers_version",
                           "torch_dtype", "dtype", "quantization_config")}
    try:
        config = AutoConfig.for_model(model_type, **fields)
    except (TypeError, ValueError, KeyError) as error:
        raise ClassConfigError("cannot-build", f"transformers cannot build {model_type!r} "
                               f"from this config.json: {str(error).splitlines()[0]}",
                               model_type) from None
    if getattr(config, "is_encoder_decoder", False):
        raise ClassConfigError("encoder-decoder", f"model_type {model_type!r} is an "
                               "encoder-decoder model, not a decoder-only LM", model_type)
    causal = causal_class(config)
    if "ConditionalGeneration" in causal.__name__:
        raise ClassConfigError("multimodal", f"model_type {model_type!r} builds "
                               f"{causal.__name__}, not a decoder-only LM", model_type)
    return config


def causal_class(config) -> type:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    return MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]


def kernels(config) -> tuple[str, ...]:
    """The attention kernels the class supports of sdpa and eager (Gemma 2: eager only,
    `_supports_sdpa = False`: SDPA has no soft-capping)."""
    cls = causal_class(config)
    return ("sdpa", "eager") if getattr(cls, "_supports_sdpa", False) else ("eager",)


def layer_types(config) -> tuple[str, ...]:
    """Each decoder layer's type in order: its attention (config.layer_types where the class
    has them: sliding_attention / full_attention ...; else one type) and, in a model that
    mixes dense and MoE layers (dense_layers), DENSE_MLP after a dense layer's."""
    n = int(config.num_hidden_layers)
    types = getattr(config, "layer_types", None)
    if not (isinstance(types, (list, tuple)) and len(types) == n):
        types = ("full_attention",) * n
    dense = dense_layers(config)
    if 0 < len(dense) < n:
        return tuple(str(t) + (DENSE_MLP if i in dense else "") for i, t in enumerate(types))
    return tuple(str(t) for t in types)


def _expert_count(config) -> int:
    for key in ("num_experts", "num_local_experts", "n_routed_experts"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return 0


def dense_layers(config) -> set[int]:
    """The decoder layers of an MoE model that run a dense MLP, as the classes read their
    configs: DeepSeek V2/V3 (and GLM-4-MoE) the first `first_k_dense_replace` (transformers
    5.24 reads no `moe_layer_freq`); Qwen2/Qwen3-MoE those in `mlp_only_layers` and those
    off the `decoder_sparse_step` (MoE where (i + 1) % step == 0). Empty for a dense model."""
    n = int(config.num_hidden_layers)
    if not _expert_count(config):
        return set()
    first = getattr(config, "first_k_dense_replace", None)
    if isinstance(first, int):
        return set(range(min(max(first, 0), n)))
    if hasattr(config, "mlp_only_layers") or hasattr(config, "decoder_sparse_step"):
        only = set(getattr(config, "mlp_only_layers", None) or ())
        step = int(getattr(config, "decoder_sparse_step", None) or 1)
        return {i for i in range(n) if i in only or (i + 1) % step != 0}
    return set()


def window(config) -> int | None:
    """The sliding window where the class uses one (Mistral v0.1, Gemma 2 and 3's local
    layers, Qwen with use_sliding_window), else None."""
    w = getattr(config, "sliding_window", None)
    if not isinstance(w, int) or w < 1:
        return None
    if getattr(config, "use_sliding_window", True) is False:
        return None
    return w


def reduced_layers(types: tuple[str, ...]) -> tuple[str, ...]:
    """The layer types of the reduced model that is measured: the model's first layers, as
    few as hold every type met after layer 0 at an index ≥ 1 (layer 0 keeps less under
    LoRA without checkpointing: its input needs no gradient), and layer 0's type again at
    index 1 where no later layer has it (DeepSeek-V2-Lite's one dense layer)."""
    if len(types) <= 1:
        return types
    need = set(types[1:])
    n = next((n for n in range(2, len(types) + 1) if set(types[1:n]) >= need), len(types))
    out = types[:n]
    if types[0] not in out[1:]:
        out = (types[0], *out)
    return out


# ---------------------------------------------------------------- one measured step


def _storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


@dataclass
class _Step:
    """Bytes per (slot index, module, kind, padded): cpu and gpu."""

    cpu: dict[tuple, int] = field(default_factory=lambda: defaultdict(int))
    gpu: dict[tuple, int] = field(default_factory=lambda: defaultdict(int))


class _GroupedMM(torch.autograd.Function):
    """torch's grouped_mm for shapes only, keeping for backward what its derivative keeps
    (torch 2.13, tools/autograd/derivatives.yaml, _grouped_mm: the input for the weight's
    gradient, the weight for the input's, each only where that gradient is computed)."""

    @staticmethod
    def forward(ctx, input, weight, offs):  # type: ignore[override]
        ctx.save_for_backward(input if ctx.needs_input_grad[1] else None,
                              weight if ctx.needs_input_grad[0] else None)
        return input.new_empty((input.shape[0], weight.shape[-1]))

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        raise NotImplementedError("shapes only: a measured step runs no backward")


def _fake_grouped_mm(input: torch.Tensor, weight: torch.Tensor, offs: torch.Tensor
                     ) -> torch.Tensor:
    """transformers.integrations.moe._grouped_mm as it runs on the CPU and on a GPU
    (torch's grouped_mm of the input cast to the weight's dtype), for fake tensors."""
    return _GroupedMM.apply(input.to(weight.dtype), weight, offs)


@contextlib.contextmanager
def _as_real_batch() -> Iterator[None]:
    """What transformers decides from values that fake tensors have not, decided as for a
    real batch. It looks for packed sequences in position_ids by reading them (unable, it
    builds a mask as if the batch were packed; a real unpacked batch has none); and its
    experts run torch's grouped_mm, whose shape function under fake tensors wants bf16
    where the CPU and GPU kernels take fp32 too, and whose fallback (a custom op) keeps its
    input and weight for backward even where the weight is frozen: under fake tensors a
    stand-in of grouped_mm runs (_GroupedMM), keeping what grouped_mm keeps."""
    from torch._guards import detect_fake_mode

    fake = detect_fake_mode() is not None
    with mock.patch("transformers.masking_utils.find_packed_sequence_indices",
                    lambda position_ids: None), \
            (mock.patch("transformers.integrations.moe._grouped_mm", _fake_grouped_mm)
             if fake else contextlib.nullcontext()):
        yield


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    from transformers.modeling_layers import GradientCheckpointingLayer

    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


def _gpu_rules(root, autocast: bool = False) -> dict[int, tuple[str, tuple[int, ...], int]]:
    """Storage -> (rule, shape, element size) for the saved tensors CUDA keeps otherwise
    (see the module's docstring), read off the autograd graph from `root`; `autocast`:
    the step ran under autocast."""
    rules: dict[int, tuple[str, tuple[int, ...], int]] = {}
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        name = type(node).__name__
        picks: list[tuple[str, str]] = []
        if name == "NativeDropoutBackward0":
            picks = [("_saved_result1", "mask")]
        elif name == "NativeLayerNormBackward0":
            picks = [("_saved_result1", "stats"), ("_saved_result2", "stats")]
        elif name == "SoftmaxBackward0" and autocast:
            picks = [("_saved_result", "softmax")]
        elif name.startswith("ScaledDotProduct") and "Attention" in name:
            masked = getattr(node, "_saved_attn_mask", None) is not None
            query = getattr(node, "_saved_query", None)
            wide = isinstance(query, torch.Tensor) and query.dtype == torch.float32
            picks = [("_saved_logsumexp", "lse-pad" if masked or wide else "lse")]
        for attr, rule in picks:
            t = getattr(node, attr, None)
            if rule == "softmax" and isinstance(t, torch.Tensor) and t.element_size() > 2:
                continue  # softmax(dtype=float32): fp32 on both
            if isinstance(t, torch.Tensor):
                rules[_storage_key(t)] = (rule, tuple(t.shape), t.element_size())
        stack.extend(fn for fn, _ in node.next_functions)
    return rules


# a select of a weight copy (a fused projection's slice) is the copy too
_VIEWS = VIEW_NODES | {"SelectBackward0"}


def measure_step(model: torch.nn.Module, batch: int, seq: int, autocast: bool = False,
                 input_ids: torch.Tensor | None = None) -> _Step:
    """One forward with its loss; what autograd saves, per layer and module, on the CPU
    and as a GPU keeps it. Runs real or under the caller's FakeTensorMode."""
    from torch._guards import detect_fake_mode

    layers = decoder_layers(model)
    index = {id(m): i for i, m in enumerate(layers)}
    # the parameters' storages, held to the step's end: bitsandbytes' Linear4bit swaps a
    # bias for a cast of it during the step, and a freed address goes to the next storage
    held = [p.untyped_storage() for p in [*model.parameters(), *model.buffers()]]
    params = {s._cdata for s in held}
    # "alive": the tensors whose storages "shared" and "input" name, held to the step's end:
    # a storage's key is its address, which a freed storage hands on to the next one
    state: dict[str, Any] = {"layer": None, "stack": [], "shared": set(), "input": set(),
                             "dropout": False, "alive": []}
    seen: dict[object, tuple] = {}
    packs: dict[object, int] = defaultdict(int)  # how many saves of each storage
    masks: dict[object, int] = {}  # dropout masks the CPU keeps as floats: their numbers
    # each storage's saved tensors, weakly: autograd holds what pack returns for as long as
    # the node that saved it lives, so a storage is kept for backward while one is alive
    refs: dict[object, list[weakref.ref]] = {}

    def _alive(key: object) -> bool:
        return any(ref() is not None for ref in refs.get(key, ()))

    handles = []
    names = {}
    for i, layer in enumerate(layers):
        for sub_name, sub in layer.named_modules():
            names[id(sub)] = (i, sub_name)

    def pre(module, args, kwargs):
        where = names.get(id(module))
        if where is None:
            return None
        i, sub_name = where
        if id(module) in index:
            state["layer"] = i
            hidden = args[0] if args else kwargs.get("hidden_states")
            for t in [*args, *kwargs.values()]:
                for u in (t if isinstance(t, tuple) else (t,)):
                    if isinstance(u, torch.Tensor) and u is not hidden:
                        state["shared"].add(_storage_key(u))
                        state["alive"].append(u)
            if isinstance(hidden, torch.Tensor):
                state["input"].add(_storage_key(hidden))
                state["alive"].append(hidden)
        state["stack"].append(sub_name)
        return None

    fake = detect_fake_mode() is not None

    def post(module, args, kwargs, output):
        if id(module) not in names:
            return None
        if fake and isinstance(getattr(module, "num_experts", None), int) and hasattr(
                module, "down_proj") and state["layer"] is not None:
            # torch's grouped_mm keeps the experts' offsets (int32, one per expert) for
            # backward; its stand-in under fake tensors (_GroupedMM) keeps no integer
            # tensor: count them
            seen[("offsets", id(module), len(seen))] = (
                state["layer"], state["stack"][-1], "other", 4 * module.num_experts)
        if state["stack"]:
            state["stack"].pop()
        if id(module) in index:
            state["layer"] = None
        return None

    for module in model.modules():
        if id(module) in names:
            handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
            handles.append(module.register_forward_hook(post, with_kwargs=True))

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key in seen and not _alive(key):
            # a storage saved by a branch of the graph that nothing used (a router's top-k
            # values, a discarded output) was freed with it and lent this one its address
            for table in (seen, masks, packs, refs):
                table.pop(key, None)
        packs[key] += 1
        if key in params:
            return t
        if key in seen:
            refs[key].append(weakref.ref(t))
            return t
        if is_weight_copy(t, _VIEWS):  # autocast's 16-bit weight copy: the plan counts it with the
            params.add(key)  # weights (mixed precision's 6 bytes per parameter)
            return t
        nbytes = t.untyped_storage().nbytes()
        if not nbytes:
            return t
        layer = state["layer"]
        module = state["stack"][-1] if state["stack"] else ""
        if layer is None or key in state["shared"]:
            slot, kind = -1, "other"
            if t.dim() >= 2 and t.shape[-1] == model.config.get_text_config().vocab_size:
                kind = "loss"
            module = "outside"
        else:
            slot = layer
            kind = ("input" if key in state["input"] else
                    "lora" if "lora_" in module else "other")
        seen[key] = (slot, module, kind, nbytes)
        refs[key] = [weakref.ref(t)]
        if state["dropout"] and not t.requires_grad and t.is_floating_point():
            # the CPU's dropout keeps its mask in the input's dtype (input * mask / (1 - p))
            masks[key] = nbytes // t.element_size()
        return t

    if input_ids is None:
        input_ids = torch.zeros((batch, seq), dtype=torch.long)
    cast = (torch.autocast("cpu", dtype=torch.bfloat16) if autocast
            else contextlib.nullcontext())
    dropout = torch.nn.functional.dropout

    def marked_dropout(*args, **kwargs):
        state["dropout"] = True
        try:
            return dropout(*args, **kwargs)
        finally:
            state["dropout"] = False

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), cast, \
                _as_real_batch(), mock.patch.object(torch.nn.functional, "dropout",
                                                    marked_dropout):
            out = model(input_ids=input_ids, labels=input_ids, use_cache=False)
        rules = _gpu_rules(out.loss.grad_fn, autocast)
    finally:
        for h in handles:
            h.remove()
    step = _Step()
    for key, (slot, module, kind, nbytes) in seen.items():
        if key in refs and not _alive(key):
            continue  # freed before backward: its graph branch died in forward
        gpu, padded = nbytes, False
        if key in masks:  # CUDA's native_dropout keeps a bool mask
            gpu = masks[key]
        rule = rules.get(key)
        if rule is not None:
            name, shape, size = rule
            numel = nbytes // size
            if name == "mask":
                gpu = numel
            elif name == "stats":
                gpu = numel * 4
            elif name == "softmax":  # fp32 on CUDA, and cast back for a later op that saves it
                gpu = numel * 4 + (nbytes if packs[key] > 1 else 0)
            elif name == "lse-pad":
                padded = True
            if name.startswith("lse"):
                kind = "lse"
        step.cpu[(slot, module, kind, False)] += nbytes
        step.gpu[(slot, module, kind, padded)] += gpu
    return step


# ---------------------------------------------------------------- building the class


def quantized_base(model: torch.nn.Module) -> torch.nn.Module:
    """QLoRA's base from a model built under FakeTensorMode: what `from_pretrained(...,
    quantization_config=nf4_config())` (demos.engine.real_models) and then peft's
    prepare_model_for_kbit_training do to it, with the libraries' own code. transformers'
    bitsandbytes quantizer picks the linear layers (all but the output head and what the
    class keeps in fp32) and puts bitsandbytes' Linear4bit in their place
    (replace_with_bnb_linear); each weight is quantized by bitsandbytes' quantize_4bit,
    whose kernels have fake implementations; the packed weight is held as a plain parameter
    carrying its quant_state (bitsandbytes' Params4bit is a tensor subclass, which cannot
    wrap a fake tensor; Linear4bit's forward reads only the quant_state of it). So each
    frozen 4-bit linear runs Linear4bit.forward and MatMul4Bit as on real data: the input
    cast to the compute dtype, the output cast back to the input's dtype, nothing but the
    packed weight kept for backward; and PEFT wraps it in its own 4-bit LoRA layer.
    prepare_model_for_kbit_training then casts every other 16-bit parameter (embeddings,
    norms, the head) to fp32."""
    import bitsandbytes as bnb
    from peft import prepare_model_for_kbit_training
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from transformers.integrations.bitsandbytes import replace_with_bnb_linear
    from transformers.quantizers.quantizer_bnb_4bit import Bnb4BitHfQuantizer

    from demos.engine.real_models import nf4_config

    config = nf4_config()
    with unset_fake_temporarily():  # on the meta device, as transformers makes them
        # bitsandbytes' double quantization computes its 8-bit code book from data once
        # (functional.name2qmap): made here on a real tensor, as its first real use does
        bnb.functional.quantize_4bit(torch.zeros(64), compress_statistics=True)
        before = dict(model.named_modules())
        skip = Bnb4BitHfQuantizer.get_modules_to_not_convert(
            model, config.llm_int8_skip_modules, model._keep_in_fp32_modules)
        replace_with_bnb_linear(model, modules_to_not_convert=skip, quantization_config=config)
    for name, module in model.named_modules():
        if not isinstance(module, bnb.nn.Linear4bit):
            continue
        source = before[name]
        weight = source.weight.T if module.source_cls.__name__ == "Conv1D" else source.weight
        four = module.weight
        packed, state = bnb.functional.quantize_4bit(
            weight.data.contiguous(), blocksize=four.blocksize,
            compress_statistics=four.compress_statistics, quant_type=four.quant_type,
            quant_storage=four.quant_storage)
        param = torch.nn.Parameter(packed, requires_grad=False)
        for key in ("blocksize", "compress_statistics", "quant_type", "quant_storage"):
            setattr(param, key, getattr(four, key))
        param.quant_state = state
        module.weight = param
        module.quant_state = state
        module.bias = source.bias
    model.is_loaded_in_4bit = True
    return prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)


def _reduced_config(config, layout: tuple[str, ...] | None, variant: Variant):
    """The config with the decoder layers of `layout` (layer types, reduced_layers; None:
    all of the model's): its attention types in layer_types where the class has them,
    its dense MLPs where the model mixes dense and MoE layers."""
    import copy

    small = copy.deepcopy(config)
    if layout is not None:
        small.num_hidden_layers = len(layout)
        if getattr(small, "layer_types", None) is not None and len(
                config.layer_types) == config.num_hidden_layers:
            small.layer_types = [t.removesuffix(DENSE_MLP) for t in layout]
        dense = [i for i, t in enumerate(layout) if t.endswith(DENSE_MLP)]
        if isinstance(getattr(small, "first_k_dense_replace", None), int):
            if dense != list(range(len(dense))):
                raise ValueError(f"dense layers {dense} are not the first ones")
            small.first_k_dense_replace = len(dense)
        elif dense_layers(config):
            small.mlp_only_layers = dense
            small.decoder_sparse_step = 1
    if variant.device == "cuda" and variant.kernel == "sdpa":
        for key in ATTENTION_DROPOUT:  # CUDA's flash kernel drops inside the kernel
            if getattr(small, key, 0):
                setattr(small, key, 0.0)
    return small


def lora_modules(model: torch.nn.Module, targets: str) -> list[str] | str:
    """PEFT's target_modules for the planner's two sets: "all-linear" (PEFT's own: every
    nn.Linear but the output head), or the linear layers inside each decoder layer's
    attention module (q/k/v/o, a fused qkv, GPT-2's Conv1D)."""
    if targets == "all-linear":
        return "all-linear"
    from transformers.pytorch_utils import Conv1D

    out: set[str] = set()
    for layer in decoder_layers(model)[:1]:
        for name, module in layer.named_modules():
            head = name.split(".")[0]
            if ("attn" in head or "attention" in head) and isinstance(
                    module, (torch.nn.Linear, Conv1D)):
                out.add(name)
    return sorted(out)


def build(config, variant: Variant, layers: int | None = None, fake: bool = False
          ) -> torch.nn.Module:
    """The class with its first `layers` decoder layers (default: those of reduced_layers),
    the variant's
    dtype, kernel and LoRA, in training mode. `fake`: called under FakeTensorMode, for
    full size. PEFT then keeps its adapters where nn.Linear made them, fp32 on the CPU
    (fake parameters cannot be moved; PEFT's moves to the base layer's device and dtype
    and its upcast to fp32, autocast_adapter_dtype, end there too). `variant.quantized`:
    QLoRA's 4-bit base, loaded in bf16 under autocast ("mixed") and in fp32 otherwise, as
    the planner's code loads it (fake: quantized_base; real: the engine's load_in_4bit)."""
    import warnings

    from transformers import AutoModelForCausalLM

    from demos.engine.real_models import load_in_4bit

    layout = reduced_layers(layer_types(config)) if layers is None else (
        None if layers == config.num_hidden_layers else layer_types(config)[:layers])
    small = _reduced_config(config, layout, variant)
    base = "bf16" if variant.precision == "bf16" or (
        variant.precision == "mixed" and variant.lora_rank) else "fp32"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_config(small, attn_implementation=variant.kernel,
                                                 dtype=DTYPES[base])
        if variant.quantized:
            model = (quantized_base(model) if fake else
                     load_in_4bit(model, DTYPES[base], variant.kernel))
        model.loss_type = "ForCausalLM"
        if variant.lora_rank:
            from peft import LoraConfig, get_peft_model
            from transformers.pytorch_utils import Conv1D

            conv = any(isinstance(m, Conv1D) for m in model.modules())
            stay = (mock.patch.object(torch.nn.Module, "to", lambda self, *a, **k: self)
                    if fake else contextlib.nullcontext())
            with stay:
                model = get_peft_model(model, LoraConfig(
                    r=variant.lora_rank,
                    target_modules=lora_modules(model, variant.lora_targets),
                    fan_in_fan_out=conv, task_type="CAUSAL_LM"))
    return model.train()


def _autocast(variant: Variant) -> bool:
    return variant.precision == "mixed"


# ---------------------------------------------------------------- the fit


def _samples(start: int, stop: int | None) -> list[int]:
    """Three sequence lengths in [start, stop) (stop None: unbounded), spread apart."""
    if stop is None:
        step = SAMPLE_STEP
        first = start if start > 1 else step
        return [first, first + step, first + 2 * step]
    span = stop - start
    if span < 3:
        raise ClassConfigError("window", f"a sliding window of {stop} tokens is too small "
                               "to plan")
    step = span // 3
    return [start + step // 2, start + step // 2 + step, start + step // 2 + 2 * step]


def _quadratic(xs: list[int], ys: list[int]) -> tuple[Fraction, Fraction, Fraction]:
    """The polynomial c0 + c1·x + c2·x² through three points, exactly."""
    c = [Fraction(0)] * 3
    for i, (xi, yi) in enumerate(zip(xs, ys, strict=True)):
        others = [xj for j, xj in enumerate(xs) if j != i]
        denom = Fraction((xi - others[0]) * (xi - others[1]))
        a, b2 = others
        # (x - a)(x - b) = x² - (a + b)x + ab
        c[0] += yi * Fraction(a * b2) / denom
        c[1] += yi * Fraction(-(a + b2)) / denom
        c[2] += yi * Fraction(1) / denom
    return (c[0], c[1], c[2])


def _whole_model(model: torch.nn.Module, types: tuple[str, ...], slot_names: dict[int, str],
                 trainable: bool = False) -> int:
    """Parameters (trainable ones: `trainable`) of the whole model, from the reduced one:
    those outside the decoder layers once, each layer's by its type."""
    layers = decoder_layers(model)

    def count(params) -> int:
        return sum(p.numel() for p in params if p.requires_grad or not trainable)

    inside = {id(p) for layer in layers for p in layer.parameters()}
    outside = count(p for p in model.parameters() if id(p) not in inside)
    per_type = {name: count(layers[i].parameters()) for i, name in slot_names.items()
                if i > 0}
    if len(layers) == 1:
        per_type = {types[0]: count(layers[0].parameters())}
    return outside + sum(per_type[t] for t in types)


class FitMissed(AssertionError):
    """A fitted term missed a measured check point."""


def fit_variant(config, variant: Variant, check: bool = False, one_only: bool = False,
                one: ClassFit | None = None) -> ClassFit:
    """Measure the class under FakeTensorMode at sampled sizes (b = 1, 2 and 3) and fit
    every term. `one_only`: at b = 1 only (ClassFit.one_only: a third of the steps);
    `one`, such a fit: b = 2 and 3 only, its b = 1 quadratics taken from `one` (the whole
    fit, the same as measuring all three batch sizes)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    batches = (1,) if one_only else (2, 3) if one is not None else (1, 2, 3)
    types = layer_types(config)
    layout = reduced_layers(types)
    n = len(layout)
    w = window(config)
    stretches = [(1, w), (w, None)] if w else [(1, None)]
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = build(config, variant, fake=True)
        runs: dict[tuple[int, int], dict[tuple, int]] = {}
        points = [(b, s) for start, stop in stretches for s in _samples(start, stop)
                  for b in batches]
        if check:
            points += [(4, _samples(start, stop)[-1] + 7 if stop is None else
                        min(stop - 1, _samples(start, stop)[-1] + 1))
                       for start, stop in stretches]
        for b, s in points:
            step = measure_step(model, b, s, _autocast(variant))
            runs[(b, s)] = step.gpu if variant.device == "cuda" else step.cpu
    # each layer type once: its first layer after layer 0 (and layer 0 as "first")
    slot_names = {-1: "outside", 0: "first"}
    for i in range(1, n):
        if layout[i] not in slot_names.values():
            slot_names[i] = layout[i]
    slots = {name: i for i, name in slot_names.items()}
    at_one = ({(slots[t.slot], t.name, t.kind, t.padded): t.polys for t in one.terms}
              if one is not None else {})
    keys = sorted({k for r in runs.values() for k in r if k[0] in slot_names} | set(at_one))
    zero = (Fraction(0),) * 3
    terms = []
    for key in keys:
        slot, module, kind, padded = key
        polys = []
        for index, (start, stop) in enumerate(stretches):
            xs = _samples(start, stop)
            if one is None:
                first = _quadratic(xs, [runs[(1, s)].get(key, 0) for s in xs])
            else:
                first = at_one[key][index].one if key in at_one else zero
            if one_only:
                polys.append(Poly(zero, zero, first))  # type: ignore[arg-type]
                continue
            two, three = ([runs[(b, s)].get(key, 0) for s in xs] for b in (2, 3))
            per = [c - t for t, c in zip(two, three, strict=True)]
            g = _quadratic(xs, per)
            h = _quadratic(xs, [t - 2 * p for t, p in zip(two, per, strict=True)])
            polys.append(Poly(g, h, first))
        terms.append(Term(slot_names[slot], module, kind, tuple(polys), padded))
    fit = ClassFit(tuple(terms), (w,) if w else (),
                   trainable=_whole_model(model, types, slot_names, trainable=True),
                   one_only=one_only)
    if check:
        for (b, s), run in runs.items():
            for term, key in zip(terms, keys, strict=True):
                want = run.get(key, 0)
                polys = term.polys[fit.stretch(s)]
                if polys(b, s) != want:
                    raise FitMissed(f"{term.slot}/{term.name}: fit {polys(b, s)} != "
                                    f"measured {want} at b={b}, s={s}")
    return fit


# ---------------------------------------------------------------- a class, for plans


class MeasuredClass:
    """A config.json's class for the planner (memory.class_layers.LayerSource): the
    fitted terms of each variant, measured on first use and kept (under a lock)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.config = hf_config(cfg)
        self.family = self.config.model_type
        self.layer_types = layer_types(self.config)
        self.kernels = kernels(self.config)
        self.window = window(self.config)
        self._fits: dict[Variant, ClassFit] = {}
        self._meta_model: torch.nn.Module | None = None
        self._lock = threading.Lock()

    def architecture(self, label: str = ""):
        """The memory model's Architecture of the config (its shapes; its parameters counted
        on the class, experts and extra norms included)."""
        from memory.architectures import Architecture

        c = self.config
        heads = int(c.num_attention_heads)
        hidden = int(c.hidden_size)
        head_dim = int(getattr(c, "head_dim", None) or hidden // heads)
        kv = int(getattr(c, "num_key_value_heads", None) or
                 (1 if getattr(c, "multi_query", False) else heads))
        width = int(getattr(c, "intermediate_size", None) or getattr(c, "n_inner", None)
                    or getattr(c, "ffn_hidden_size", None) or 4 * hidden)
        total, block = self._params()
        expert_block = self._expert_block()
        rms = "layernorm" not in " ".join(type(m).__name__.lower()
                                           for m in self._meta().modules())
        return Architecture(
            "config", label or f"{self.family} (config.json)", layers=len(self.layer_types),
            hidden=hidden, heads=heads, kv_heads=kv, mlp_width=width,
            mlp="swiglu" if rms else "gelu", norm="rmsnorm" if rms else "layernorm",
            vocab=int(c.vocab_size), tied=bool(getattr(c, "tie_word_embeddings", False)),
            family=self.family, head_size=head_dim if head_dim * heads != hidden else 0,
            counted_params=total, counted_block=block,
            expert_params=expert_block * self._moe_layers(), expert_block=expert_block)

    def _expert_block(self) -> int:
        """The experts' parameters in the largest decoder layer: those under a module
        named `experts` (the router's gate and a shared expert are dense)."""
        return max(sum(param.numel() for name, param in layer.named_parameters()
                       if "experts" in name.split("."))
                   for layer in decoder_layers(self._meta()))

    def _moe_layers(self) -> int:
        """Decoder layers with experts: all, but those a config keeps dense
        (`mlp_only_layers`, or off the `decoder_sparse_step`, as Qwen's MoE classes read them)."""
        return len(self.layer_types) - len(dense_layers(self.config))

    def experts(self) -> tuple[int, int] | None:
        """(experts per MoE layer, experts per token), None for a dense model."""
        count = _expert_count(self.config)
        top_k = getattr(self.config, "num_experts_per_tok", None)
        return (int(count), int(top_k)) if count and top_k else None

    def attention_modules(self) -> list[str]:
        """PEFT's target names for LoRA on the attention (lora_modules)."""
        found = lora_modules(self._meta(), "attention")
        return list(found) if not isinstance(found, str) else [found]

    def _meta(self) -> torch.nn.Module:
        if self._meta_model is None:
            import warnings

            from transformers import AutoModelForCausalLM

            with torch.device("meta"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._meta_model = AutoModelForCausalLM.from_config(
                    _reduced_config(self.config, reduced_layers(self.layer_types), Variant()),
                    attn_implementation=self.kernels[0])
        return self._meta_model

    def _params(self) -> tuple[int, int]:
        """Every parameter of the whole model, and the largest layer's."""
        model = self._meta()
        layout = reduced_layers(self.layer_types)
        names = {0: layout[0]}
        for i in range(1, len(layout)):
            names.setdefault(i, layout[i])
        layers = decoder_layers(model)
        block = max(sum(p.numel() for p in layer.parameters()) for layer in layers)
        return _whole_model(model, self.layer_types, names), block

    def variant(self, key: tuple) -> Variant:
        """The Variant of a key (memory.footprint.PlannerInputs.variant): precision (with
        QUANTIZED before it for QLoRA), kernel, rank, targets, device."""
        precision, kernel, rank, targets, device = key
        if kernel not in self.kernels:
            kernel = self.kernels[0]
        quantized = precision.startswith(QUANTIZED)
        return Variant(precision.removeprefix(QUANTIZED), kernel, rank,
                       targets if rank else "all-linear", device, quantized)

    def fit(self, key: tuple, one_only: bool = False) -> ClassFit:
        """A variant's fit, measured on first use: at one sequence only (`one_only`), or
        whole (from the fit at one sequence where this class has it: two more batch sizes
        measured)."""
        variant = self.variant(key)
        with self._lock:
            found = self._fits.get(variant)
            if found is None:
                found = fit_variant(self.config, variant, one_only=one_only)
            elif found.one_only and not one_only:
                found = fit_variant(self.config, variant, one=found)
            self._fits[variant] = found
            return found

