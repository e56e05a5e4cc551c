"""An image model's config.json measured for the planner (planner.picture_plan): its real
diffusers or transformers class built through its model kind (model_classes.kinds: a
UNet, a diffusion transformer, a vision encoder) and fitted under fake tensors
(planner.class_fit, in t = (side / unit)²), twice: as it trains plainly, and with every
block checkpointed (what a checkpointed block keeps: its inputs). Its parameters are
counted on the whole class built on torch's meta device (nothing allocated, nothing
downloaded). Each block type's forward FLOPs (what a rebuild of that block reruns) and
the whole step's (forward and backward) are counted by torch's FlopCounterMode on the
same reduced class under fake tensors, at one image and the fit's three sides, and
fitted exactly as quadratics in t (`count_flops`). The result is JSON-ready
(`FORMAT` names its layout); planner.class_worker runs it in a process of its own, under a
time and a memory limit."""

from __future__ import annotations

import warnings
from dataclasses import replace
from fractions import Fraction
from typing import Any

import torch

from model_classes.kinds import kind_for
from model_classes.variant import Variant, split_quantized
from planner.class_fit import _quadratic, fit_variant, picture_samples, side_of
from planner.class_json import fit_to_json

STRATEGIES_MEASURED = ("none", "every-layer")
# the measurement's layout: 2 added "flops" (count_flops); a reader of an older one plans
# without recompute counts
FORMAT = 2


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


def cpu_attention() -> dict[Any, Any]:
    """FlopCounterMode's formulas for SDPA's CPU kernel (fake tensors live on the CPU,
    where SDPA runs a kernel the counter has no formula for): the counts of a GPU's flash
    attention, forward and backward."""
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    aten = torch.ops.aten
    return {aten._scaled_dot_product_flash_attention_for_cpu:
            lambda q, k, v, *_, out_shape=None, **__: sdpa_flop_count(q, k, v),
            aten._scaled_dot_product_flash_attention_for_cpu_backward:
            lambda g, q, k, v, *_, out_shape=None, **__: sdpa_backward_flop_count(g, q, k, v)}


def count_flops(kind: Any, config: Any, v: Variant, unit: int) -> dict[str, Any]:
    """FLOPs counted by torch.utils.flop_counter.FlopCounterMode (matrix products,
    convolutions, attention: the operations it knows) in one plain step of the reduced
    class at one image, at sides of 2, 3 and 4 units, fitted exactly as c0 + c1·t + c2·t²
    (t = (side / unit)²): "forward" per block slot ("first", then each block type, as the
    memory fits name them), the block's forward, which a checkpointed block reruns in
    backward; "outside_forward", the forward outside the blocks; "reduced_forward" and
    "reduced_backward", the measured (reduced) class's whole forward and backward. The
    module tracker does not place backward's operations in their blocks reliably, so a
    whole model's backward is its forward times the reduced class's backward / forward
    (`picture_plan.step_flops`). Coefficients as fractions' text; a batch of b images
    counts b times one image's."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    xs = picture_samples(unit)
    forward: dict[str, list[int]] = {}
    totals: dict[str, list[int]] = {"outside_forward": [], "reduced_forward": [],
                                    "reduced_backward": []}
    with FakeTensorMode(allow_non_fake_inputs=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = kind.build(config, v, fake=True)
        names = {id(m): name for name, m in model.named_modules()}
        root = type(model).__name__
        keys = [f"{root}.{names[id(block)]}" for block in kind.blocks(model)]
        layout = kind.reduced(kind.block_types(config))
        slots = {0: "first"}
        for i in range(1, len(layout)):
            if layout[i] not in slots.values():
                slots[i] = layout[i]
        for t in xs:
            run = kind.training_forward(model, 1, side_of(t, unit), v)
            with FlopCounterMode(display=False, custom_mapping=cpu_attention()) as ahead:
                loss = run(lambda: None)
            with FlopCounterMode(display=False, custom_mapping=cpu_attention()) as back:
                loss.backward()
            counts = ahead.get_flop_counts()
            per = [sum(counts.get(key, {}).values()) for key in keys]
            for i, slot in slots.items():
                forward.setdefault(slot, []).append(per[i])
            totals["outside_forward"].append(ahead.get_total_flops() - sum(per))
            totals["reduced_forward"].append(ahead.get_total_flops())
            totals["reduced_backward"].append(back.get_total_flops())

    def fitted(ys: list[int]) -> list[str]:
        return [str(Fraction(c)) for c in _quadratic(xs, ys)]

    return {"forward": {slot: fitted(ys) for slot, ys in forward.items()},
            **{name: fitted(ys) for name, ys in totals.items()}}


def measure(cfg: dict[str, Any], precision: str, rank: int, targets: str, batch: int,
            device: str = "cuda", check: bool = True, flops: bool = True) -> dict[str, Any]:
    """describe(cfg) with the fits of the variant (plain and every block checkpointed),
    at one image (batch 1) or at any batch, each checked at a point it was not made from;
    the whole model's parameters with LoRA's adapters, and the trained ones; the FLOP
    counts (`count_flops`; `flops` False: left out, and a plan places by block count)."""
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
    if flops:
        out["flops"] = count_flops(kind, config, v, out["unit"])
    out["format"] = FORMAT
    return out
