"""The model kinds: one adapter per kind of model the course builds from a real library
class, registered in one table. The planner and the lab ask a kind, never a library, to
build a config's class at a size and with a variant's options, and to say what one
training step keeps for backward, per block.

A kind is any object with the attributes and methods of `ModelKind`; add one by writing
its module in this package and appending an instance to `KINDS` (docs/ARCHITECTURE.md,
"Add a model kind"). `kind_for` picks the first kind that claims a config.json, so a
specific kind goes before a general one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import torch

from model_classes.causal_lm import CausalLM
from model_classes.causal_lm_config import ClassConfigError
from model_classes.dit import DiffusionTransformer
from model_classes.saved_step import Step
from model_classes.unet import UNet
from model_classes.variant import Variant
from model_classes.vision_encoder import VisionEncoder


class ModelKind(Protocol):
    """What the planner and the lab need of a kind of model."""

    name: str  # an id: "causal-lm"
    size_unit: str  # what `size` is in measure_step: "tokens" (a sequence's length),
    # "pixels" (a square image's side: H = W = size)

    def claims(self, cfg: Mapping[str, Any]) -> bool:
        """Whether a pasted config.json is this kind's."""

    def config(self, cfg: Mapping[str, Any]) -> Any:
        """The library's config object of a config.json; ClassConfigError (one line, an id
        for the page to word) when the library cannot build it as this kind."""

    def block_types(self, config: Any) -> tuple[str, ...]:
        """Each checkpointable block's type, in order (blocks of one type keep alike)."""

    def reduced(self, types: tuple[str, ...]) -> tuple[str, ...]:
        """The block types of the smallest model that holds every type, which is what is
        built and measured."""

    def kernels(self, config: Any) -> tuple[str, ...]:
        """The attention kernels the class supports, preferred first."""

    def breaks(self, config: Any) -> tuple[int, ...]:
        """Sizes at which what a block keeps changes form (a sliding window)."""

    def build(self, config: Any, variant: Variant, blocks: int | None = None,
              fake: bool = False) -> torch.nn.Module:
        """The class with its first `blocks` blocks (None: those of `reduced`), the
        variant's dtype, kernel and LoRA, in training mode; `fake`: under FakeTensorMode."""

    def blocks(self, model: torch.nn.Module) -> list[torch.nn.Module]:
        """The model's checkpointable blocks, in order."""

    def measure_step(self, model: torch.nn.Module, batch: int, size: int, variant: Variant
                     ) -> Step:
        """One step's forward with its loss: what autograd keeps for backward, per block
        and module, on the CPU and as a GPU keeps it."""

    def checkpoint(self, model: torch.nn.Module, strategy: str, n: int = 2, k: int = 1
                   ) -> tuple[int, ...]:
        """Switch the library's own checkpointing on ("none", "every-layer", "every-n",
        "first-k"); the indices of the checkpointed blocks."""


CAUSAL_LM = CausalLM()
UNET = UNet()  # diffusers' UNet2DConditionModel (SD 1.5, SDXL)
DIFFUSION_TRANSFORMER = DiffusionTransformer()  # diffusers' SD3 and Flux transformers
VISION_ENCODER = VisionEncoder()  # transformers' ViT, SigLIP, DINOv2, CLIP vision towers
# most specific first: the causal LM claims any config naming a transformers model_type
KINDS: tuple[ModelKind, ...] = (UNET, DIFFUSION_TRANSFORMER, VISION_ENCODER, CAUSAL_LM)


def kind_for(cfg: Mapping[str, Any]) -> ModelKind:
    """The kind that builds a config.json; ClassConfigError when none claims it."""
    for kind in KINDS:
        if kind.claims(cfg):
            return kind
    if "_class_name" in cfg:
        name = str(cfg["_class_name"])
        raise ClassConfigError("image-class", f"_class_name {name!r}: no model kind builds "
                               "this diffusers class", name)
    raise ClassConfigError("no-model-type", "config.json has no 'model_type'")


def kind_named(name: str) -> ModelKind:
    """A registered kind by its id."""
    for kind in KINDS:
        if kind.name == name:
            return kind
    raise KeyError(name)
