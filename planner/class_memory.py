"""A pasted config.json's class for the planner: its architecture (shapes and parameters
counted on the class), its model kind (model_classes.kinds) and the fitted terms of each
variant (planner.class_fit), measured on first use and kept under a lock."""

from __future__ import annotations

import threading
from typing import Any

import torch

from memory.class_layers import ClassFit
from model_classes import causal_lm_config as config_json
from model_classes.causal_lm_config import ClassConfigError
from model_classes.kinds import CAUSAL_LM, kind_for
from model_classes.variant import Variant, split_quantized
from planner.class_fit import fit_variant, whole_model


class MeasuredClass:
    """A config.json's class for the planner (memory.class_layers.LayerSource): the
    fitted terms of each variant, measured on first use and kept (under a lock)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.kind = kind_for(cfg)
        if self.kind is not CAUSAL_LM:  # measured on the lab's /pictures page, not planned
            name = str(cfg.get("_class_name") or cfg.get("model_type") or self.kind.name)
            raise ClassConfigError("image-model", f"{name} is an image model: the planner "
                                   "plans decoder-only language models", name)
        self.config = self.kind.config(cfg)
        self.family = self.config.model_type
        self.layer_types = self.kind.block_types(self.config)
        self.kernels = self.kind.kernels(self.config)
        breaks = self.kind.breaks(self.config)
        self.window = breaks[0] if breaks else None
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

    def description(self, label: str = "") -> dict[str, Any]:
        """What a plan needs of the class besides its fits, JSON-ready (planner.class_cache
        keeps it; planner.class_worker sends it back from the measuring process)."""
        arch = self.architecture(label)
        return {"family": self.family, "layer_types": list(self.layer_types),
                "kernels": list(self.kernels), "window": self.window,
                "attention_modules": self.attention_modules(), "experts": self.experts(),
                "architecture": {f: getattr(arch, f) for f in arch.__dataclass_fields__},
                "fits": {}}

    def _expert_block(self) -> int:
        """The experts' parameters in the largest decoder layer: those under a module
        named `experts` (the router's gate and a shared expert are dense)."""
        return max(sum(param.numel() for name, param in layer.named_parameters()
                       if "experts" in name.split("."))
                   for layer in self.kind.blocks(self._meta()))

    def _moe_layers(self) -> int:
        """Decoder layers with experts: all, but those a config keeps dense
        (`mlp_only_layers`, or off the `decoder_sparse_step`, as Qwen's MoE classes read them)."""
        return len(self.layer_types) - len(config_json.dense_layers(self.config))

    def experts(self) -> tuple[int, int] | None:
        """(experts per MoE layer, experts per token), None for a dense model."""
        count = config_json.expert_count(self.config)
        top_k = getattr(self.config, "num_experts_per_tok", None)
        return (int(count), int(top_k)) if count and top_k else None

    def attention_modules(self) -> list[str]:
        """PEFT's target names for LoRA on the attention (lora_modules)."""
        from model_classes.causal_lm import lora_modules

        found = lora_modules(self._meta(), "attention")
        return list(found) if not isinstance(found, str) else [found]

    def _meta(self) -> torch.nn.Module:
        if self._meta_model is None:
            import warnings

            from transformers import AutoModelForCausalLM

            with torch.device("meta"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._meta_model = AutoModelForCausalLM.from_config(
                    config_json.reduced_config(self.config, self.kind.reduced(self.layer_types),
                                               Variant()),
                    attn_implementation=self.kernels[0])
        return self._meta_model

    def _params(self) -> tuple[int, int]:
        """Every parameter of the whole model, and the largest layer's."""
        model = self._meta()
        layout = self.kind.reduced(self.layer_types)
        names = {0: layout[0]}
        for i in range(1, len(layout)):
            names.setdefault(i, layout[i])
        layers = self.kind.blocks(model)
        block = max(sum(p.numel() for p in layer.parameters()) for layer in layers)
        return whole_model(model, self.layer_types, names, kind=self.kind), block

    def variant(self, key: tuple) -> Variant:
        """The Variant of a key (memory.footprint.PlannerInputs.variant): precision (with
        QUANTIZED before it for QLoRA), kernel, rank, targets, device."""
        precision, kernel, rank, targets, device = key
        if kernel not in self.kernels:
            kernel = self.kernels[0]
        precision, quantized = split_quantized(precision)
        return Variant(precision, kernel, rank, targets if rank else "all-linear", device,
                       quantized)

    def fit(self, key: tuple, one_only: bool = False, one: ClassFit | None = None
            ) -> ClassFit:
        """A variant's fit, measured on first use: at one sequence only (`one_only`), or
        whole (from the fit at one sequence where this class has it, or `one`, such a fit
        measured before: two more batch sizes measured)."""
        variant = self.variant(key)
        with self._lock:
            found = self._fits.get(variant) or one
            if found is None:
                found = fit_variant(self.config, variant, one_only=one_only, kind=self.kind)
            elif found.one_only and not one_only:
                found = fit_variant(self.config, variant, one=found, kind=self.kind)
            self._fits[variant] = found
            return found

