"""What the diffusers model kinds share (model_classes.unet, model_classes.dit): a
config.json read as its class's settings, the class built with random weights in a
variant's dtype (nothing downloaded), LoRA added as diffusers' training scripts add it,
and checkpointing switched on through the library's own switch.

Checkpointing, as diffusers 0.42.1 does it (diffusers/models/modeling_utils.py):
`model.enable_gradient_checkpointing()` sets `gradient_checkpointing = True` and a
`_gradient_checkpointing_func` on every module that has the flag (a UNet's down, mid and
up blocks and each Transformer2DModel inside them; a diffusion transformer itself), and
each of those modules' forward passes its blocks through that function when grad is on:
`torch.utils.checkpoint.checkpoint(module.__call__, *args, use_reentrant=False)`. The
flag sits on a container, not on a block, so the library switches a UNet level or a whole
transformer at once. Every n-th block, or the first k, goes through the switch's one
argument, `enable_gradient_checkpointing(gradient_checkpointing_func=...)`: a function
that numbers the blocks in the order the forward first hands them over and checkpoints
those it picks, calling the others plainly (`BlockPicker`; the same idea as SimpleTuner's
checkpointing interval, which counts the calls of a patched torch checkpoint).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from unittest import mock

import torch

from model_classes.causal_lm_config import ClassConfigError
from model_classes.variant import DTYPES, Variant, base_dtype

# LoRA on the attention projections, as diffusers' training scripts target them (the
# text-to-image and DreamBooth LoRA scripts: to_q/k/v/out.0; SD3 and Flux add their
# joint attention's text projections); names PEFT matches as suffixes
ATTENTION_TARGETS = ["to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj",
                     "add_v_proj", "to_add_out"]
CHECKPOINTING = ("none", "every-layer", "every-n", "first-k")


@contextlib.contextmanager
def quiet(library: str) -> Iterator[None]:
    """A library's log below errors, for a while."""
    logger = logging.getLogger(library)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def diffusers_class(name: str) -> type:
    import diffusers

    return getattr(diffusers, name)


def read_config(cfg: Mapping[str, Any], classes: tuple[str, ...]) -> dict[str, Any]:
    """A diffusers config.json as its class's settings, `_class_name` kept;
    ClassConfigError ("image-class") when it names another class or the class refuses
    its settings."""
    name = cfg.get("_class_name")
    if name not in classes:
        raise ClassConfigError("image-class", f"_class_name {name!r}: this kind builds "
                               f"{', '.join(classes)}", str(name))
    cls = diffusers_class(name)
    init, _unused = cls.extract_init_dict(dict(cfg))[:2]
    return {"_class_name": name, **init}


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """Parameters made in `dtype` (as transformers' from_config(dtype=...) makes them): a
    cast afterwards cannot run under fake tensors, whose parameters cannot be swapped."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


@contextlib.contextmanager
def staying(fake: bool) -> Iterator[None]:
    """Under fake tensors, modules stay where they were made: PEFT moves a new adapter to
    its base layer's device and dtype, which fake parameters cannot do (they are made in
    the base's dtype already: default_dtype)."""
    if not fake:
        yield
        return
    with mock.patch.object(torch.nn.Module, "to", lambda self, *a, **k: self):
        yield


def build_model(config: Mapping[str, Any], variant: Variant, fake: bool = False,
                **changes: Any) -> torch.nn.Module:
    """The class of a config (its settings overridden by `changes`) with random weights,
    made in the variant's dtype, LoRA added as the training scripts add it, in training
    mode. `fake`: under the caller's FakeTensorMode (shapes only). `variant.quantized`:
    QLoRA's base, every linear layer in bitsandbytes' 4-bit NF4 as diffusers' quantizer
    loads it, and the rest fp32 (model_classes.quantized: quantized_diffusers_base under
    fake tensors, load_diffusers_in_4bit on real data)."""
    from model_classes import quantized

    cls = diffusers_class(config["_class_name"])
    settings = {k: v for k, v in config.items() if k != "_class_name"}
    dtype = DTYPES[base_dtype(variant)]
    with warnings.catch_warnings(), default_dtype(dtype):
        warnings.simplefilter("ignore")
        model = cls.from_config({**settings, **changes})
        if variant.quantized:
            model = (quantized.quantized_diffusers_base(model) if fake else
                     quantized.load_diffusers_in_4bit(model, dtype))
        if variant.lora_rank:
            with staying(fake):
                add_lora(model, variant.lora_rank, variant.lora_targets)
    return model.train()


def add_lora(model: torch.nn.Module, rank: int, targets: str = "attention") -> None:
    """LoRA as diffusers' LoRA training scripts add it: the base frozen, then
    `model.add_adapter(LoraConfig(r=rank, lora_alpha=rank, init_lora_weights="gaussian",
    target_modules=...))` on the attention projections ("attention") or on every linear
    layer of the model ("all-linear")."""
    from peft import LoraConfig

    names = lora_targets(model, targets)
    model.requires_grad_(False)
    model.add_adapter(LoraConfig(r=rank, lora_alpha=rank, init_lora_weights="gaussian",
                                 target_modules=names))


def lora_targets(model: torch.nn.Module, targets: str = "attention") -> list[str]:
    """The target_modules names of `add_lora`, those the model has: the attention
    projections, or every linear layer's name (its last two parts where the last is a
    number, "net.2", so that it names no block of a numbered list)."""
    names: list[str] = ATTENTION_TARGETS
    if targets == "all-linear":
        found = set()
        for name, m in model.named_modules():
            if isinstance(m, torch.nn.Linear):
                parts = name.split(".")
                found.add(".".join(parts[-2:]) if parts[-1].isdigit() else parts[-1])
        names = sorted(found)
    present = {name for name, _ in model.named_modules()}
    return [n for n in names if any(p == n or p.endswith("." + n) for p in present)]


class BlockPicker:
    """A `gradient_checkpointing_func` for diffusers that checkpoints only the blocks it
    picks: blocks are numbered in the order the forward first hands them over (the
    model's checkpointable blocks in order), `picks(index)` says which to checkpoint; the
    others run plainly and keep their activations. What the page prints is this class."""

    def __init__(self, picks: Callable[[int], bool]) -> None:
        self.picks = picks
        self.order: dict[torch.nn.Module, int] = {}

    def __call__(self, module: torch.nn.Module, *args: Any) -> Any:
        index = self.order.setdefault(module, len(self.order))
        if self.picks(index):
            return torch.utils.checkpoint.checkpoint(module.__call__, *args,
                                                     use_reentrant=False)
        return module(*args)


def every_nth(n: int) -> Callable[[int], bool]:
    return lambda index: index % n == 0


def first_k(k: int) -> Callable[[int], bool]:
    return lambda index: index < k


def switch_checkpointing(model: torch.nn.Module, blocks: list[torch.nn.Module],
                         strategy: str, n: int = 2, k: int = 1) -> tuple[int, ...]:
    """Checkpointing on as a practitioner does it (see the module's docstring); the
    indices of the checkpointed blocks among `blocks`, the model's checkpointable blocks
    in the order its forward reaches them."""
    if strategy == "none":
        model.disable_gradient_checkpointing()
        return ()
    if strategy == "every-layer":
        model.enable_gradient_checkpointing()
        return tuple(range(len(blocks)))
    if strategy == "every-n":
        picks = every_nth(n)
    elif strategy == "first-k":
        picks = first_k(k)
    else:
        raise ValueError(f"unknown strategy {strategy!r}")
    model.enable_gradient_checkpointing(gradient_checkpointing_func=BlockPicker(picks))
    return tuple(i for i in range(len(blocks)) if picks(i))
