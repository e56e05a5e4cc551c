"""A decoder-only causal LM of transformers as a model kind (model_classes.kinds): its
class built at any number of decoder layers with a variant's dtype, attention kernel,
QLoRA base and PEFT LoRA, checkpointing switched on as a practitioner does it, and one
step measured (model_classes.causal_lm_step).

Checkpointing, as transformers 5.24.0 does it (transformers/modeling_utils.py):
* "every-layer": `model.activation_checkpointing_enable()` (use_reentrant=False by default);
* "every-n": `activation_checkpointing_enable(every_n_layers=n)`: layers 0, n, 2n, ...;
* "first-k": enable on every layer, then `layer.gradient_checkpointing = False` on the layers
  from k on. GradientCheckpointingLayer (transformers/modeling_layers.py) reads that flag
  on each call, per layer instance.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any
from unittest import mock

import torch

from model_classes import causal_lm_config as config_json
from model_classes.causal_lm_step import Step, decoder_layers, measure_step
from model_classes.quantized import load_in_4bit, quantized_base
from model_classes.variant import DTYPES, Variant, autocast, base_dtype

CHECKPOINTING = ("none", "every-layer", "every-n", "first-k")


def load_libraries() -> None:
    """Import, once per process, what every build and measurement uses whatever the
    family: transformers' model classes and masks, PEFT (which imports bitsandbytes where
    it is installed) and torch's fake tensors; about 2-5 s of CPU time on a 2-core
    machine, spent by the first measurement of a process unless the process calls this
    earlier (the server does, before it listens). A family's own modeling module is
    imported on its first use."""
    import peft  # noqa: F401
    import transformers
    import transformers.masking_utils  # noqa: F401
    import transformers.modeling_layers  # noqa: F401
    from torch._subclasses import fake_tensor  # noqa: F401

    transformers.AutoModelForCausalLM  # noqa: B018 - its lazy module, loaded now


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
    the planner's code loads it (fake: quantized_base; real: load_in_4bit)."""
    import warnings

    from transformers import AutoModelForCausalLM

    types = config_json.layer_types(config)
    layout = config_json.reduced_layers(types) if layers is None else (
        None if layers == config.num_hidden_layers else types[:layers])
    small = config_json.reduced_config(config, layout, variant)
    base = base_dtype(variant)
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



class CausalLM:
    """The model kind of every decoder-only causal LM transformers builds (GPT-2, Llama,
    Qwen, Mistral, Gemma, the MoE families ...): its blocks are the decoder layers, its size
    is the sequence length in tokens."""

    name = "causal-lm"
    size_unit = "tokens"
    ConfigError = config_json.ClassConfigError

    def claims(self, cfg: Mapping[str, Any]) -> bool:
        """Whether a config.json is this kind's to build: anything naming a transformers
        model_type (a config that is no causal LM is refused by `config` with its reason)."""
        return "model_type" in cfg or isinstance(cfg.get("text_config"), dict)

    def config(self, cfg: Mapping[str, Any]):
        return config_json.hf_config(dict(cfg))

    def block_types(self, config) -> tuple[str, ...]:
        return config_json.layer_types(config)

    def reduced(self, types: tuple[str, ...]) -> tuple[str, ...]:
        return config_json.reduced_layers(types)

    def kernels(self, config) -> tuple[str, ...]:
        return config_json.kernels(config)

    def breaks(self, config) -> tuple[int, ...]:
        """Sizes where what a block keeps changes form: a sliding window."""
        w = config_json.window(config)
        return (w,) if w else ()

    def build(self, config, variant: Variant, blocks: int | None = None, fake: bool = False
              ) -> torch.nn.Module:
        return build(config, variant, blocks, fake)

    def blocks(self, model: torch.nn.Module) -> list[torch.nn.Module]:
        return decoder_layers(model)

    def measure_step(self, model: torch.nn.Module, batch: int, size: int, variant: Variant
                     ) -> Step:
        return measure_step(model, batch, size, autocast(variant))

    def checkpoint(self, model: torch.nn.Module, strategy: str, n: int = 2, k: int = 1
                   ) -> tuple[int, ...]:
        return apply_checkpointing(model, strategy, n, k)
