"""An image model's config.json measured for the planner (planner.picture_plan): its real
diffusers or transformers class built through its model kind (model_classes.kinds: a
UNet, a diffusion transformer, a vision encoder) and fitted under fake tensors
(planner.class_fit, in t = (side / unit)²), twice: as it trains plainly, and with every
block checkpointed (what a checkpointed block keeps: its inputs). Its parameters are
counted on the whole class built on torch's meta device (nothing allocated, nothing
downloaded). The result is JSON-ready; planner.class_worker runs it in a process of its
own, under a time and a memory limit."""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import torch

from model_classes.kinds import kind_for
from model_classes.variant import Variant, split_quantized
from planner.class_fit import fit_variant
from planner.class_json import fit_to_json

STRATEGIES_MEASURED = ("none", "every-layer")


def variant(precision: str, rank: int, targets: str, device: str) -> Variant:
    """The Variant of an image plan: the image kinds run torch's SDPA; QLoRA's precision
    has model_classes.variant.QUANTIZED before it ("4bit-mixed")."""
    precision, quantized = split_quantized(precision)
    return Variant(precision, "sdpa", rank, targets if rank else "all-linear", device,
                   quantized)


def _whole(kind: Any, config: Any, v: Variant, blocks: int) -> torch.nn.Module:
    """The whole model on the meta device (a QLoRA base counted unquantized: the same
    parameters)."""
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return kind.build(config, replace(v, quantized=False), blocks=blocks)


def quantized_params(model: torch.nn.Module) -> int:
    """The weights QLoRA holds in 4-bit NF4: those of the linear layers diffusers'
    quantizer converts (model_classes.quantized.kept_in_16bit); 0 for a vision encoder,
    which the image planner trains in 16 bits."""
    if type(model).__module__.split(".")[0] != "diffusers":
        return 0
    from model_classes.quantized import kept_in_16bit

    kept = kept_in_16bit(model)
    return sum(m.weight.numel() for name, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and "lora_" not in name
               and not any(k == part for k in kept for part in name.split(".")))


def describe(cfg: dict[str, Any]) -> dict[str, Any]:
    """What a plan needs of the class besides its fits: the kind, the class, the side
    unit, every block's type and path, and the parameters of the whole model."""
    kind = kind_for(cfg)
    config = kind.config(cfg)
    types = kind.block_types(config)
    model = _whole(kind, config, Variant(), len(types))
    blocks = kind.blocks(model)
    targets = {target: _targets(kind, model, target) for target in ("attention", "all-linear")}
    name = (config["_class_name"] if isinstance(config, dict)
            else type(getattr(model, "get_base_model", lambda: model)()).__name__)
    return {"kind": kind.name, "class": name, "unit": kind.side_unit(config),
            "block_types": list(types), "block_names": list(kind.block_names(model)),
            "params": sum(p.numel() for p in model.parameters()),
            "quantized_params": quantized_params(model),
            "largest_block_params": max(sum(p.numel() for p in b.parameters())
                                        for b in blocks),
            "lora_targets": targets}


def _targets(kind: Any, model: torch.nn.Module, targets: str) -> list[str] | str:
    """The module names LoRA targets, as the kind's build passes them to PEFT."""
    if kind.name == "vision-encoder":
        from model_classes.causal_lm import lora_modules

        found = lora_modules(model, targets)
        return found if isinstance(found, str) else list(found)
    from model_classes.diffusion import lora_targets

    return lora_targets(model, targets)


def measure(cfg: dict[str, Any], precision: str, rank: int, targets: str, batch: int,
            device: str = "cuda", check: bool = True) -> dict[str, Any]:
    """describe(cfg) with the fits of the variant (plain and every block checkpointed),
    at one image (batch 1) or at any batch, each checked at a point it was not made from;
    the whole model's parameters with LoRA's adapters, and the trained ones."""
    kind = kind_for(cfg)
    config = kind.config(cfg)
    out = describe(cfg)
    v = variant(precision, rank, targets, device)
    fits = {strategy: fit_variant(config, v, check=check, one_only=batch == 1, kind=kind,
                                  unit=out["unit"], checkpointing=strategy)
            for strategy in STRATEGIES_MEASURED}
    if rank:
        model = _whole(kind, config, v, len(out["block_types"]))
        out["params"] = sum(p.numel() for p in model.parameters())
    out["trainable"] = fits["none"].trainable
    out["fits"] = {strategy: fit_to_json(fit) for strategy, fit in fits.items()}
    return out
