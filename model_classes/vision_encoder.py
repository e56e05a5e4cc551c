"""A ViT-style vision encoder of transformers as a model kind (model_classes.kinds):
`ViTModel` / `ViTForImageClassification`, `SiglipVisionModel`, `Dinov2Model` and
`CLIPVisionModel` built from a config.json with random weights (a full SigLIP or CLIP
config: its vision_config), PEFT LoRA, checkpointing switched on as transformers does it,
and one training step measured per encoder layer (model_classes.image_step).

Its blocks are the encoder layers (transformers' GradientCheckpointingLayer: ViTLayer,
SiglipEncoderLayer, Dinov2Layer, CLIPEncoderLayer). Checkpointing, as transformers 5.24
does it (modeling_utils.py, as for the causal LM: model_classes.causal_lm):
`model.activation_checkpointing_enable()` (its older name, `gradient_checkpointing_enable`,
still works and warns), `every_n_layers=n` for layers 0, n, 2n, ...; the first k by
switching `layer.gradient_checkpointing` off on the others. transformers checkpoints a
layer's `forward`, so its hooks stay outside the checkpoint.

One training step on pixels: `size` × `size` images of the config's channels, the
position embeddings interpolated to that size where the class takes
`interpolate_pos_encoding` (DINOv2 always interpolates); tokens (H/p)·(W/p) for patches
of p pixels. A classifier (ViTForImageClassification) trains on labels through the
class's own loss function; an encoder without a head on a regression of its pooled output
to a random target (`F.mse_loss`), a stand-in for a task head.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from model_classes.causal_lm import lora_modules
from model_classes.causal_lm_config import ClassConfigError
from model_classes.causal_lm_step import decoder_layers
from model_classes.diffusion import default_dtype, staying
from model_classes.image_inputs import Inputs, device_of
from model_classes.image_step import saved_step
from model_classes.saved_step import Step
from model_classes.variant import DTYPES, Variant, autocast, base_dtype

VISION_TYPES = ("vit", "siglip_vision_model", "dinov2", "clip_vision_model")
# a full dual-encoder config: its vision tower is this kind's
TOWERS = {"siglip": "siglip_vision_model", "clip": "clip_vision_model"}
CLASSIFIER = "ViTForImageClassification"

Forward = Callable[[Callable[[], None]], torch.Tensor]


def _vision_part(cfg: Mapping[str, Any]) -> dict[str, Any]:
    model_type = cfg.get("model_type")
    if model_type in TOWERS and isinstance(cfg.get("vision_config"), dict):
        return {**cfg["vision_config"], "model_type": TOWERS[model_type]}
    return dict(cfg)


def _classifies(config: Any) -> bool:
    return config.model_type == "vit" and CLASSIFIER in (config.architectures or [])


def _base(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model under PEFT's wrapper."""
    get = getattr(model, "get_base_model", None)
    return get() if callable(get) else model


def training_forward(model: torch.nn.Module, batch: int, size: int, dtype: torch.dtype,
                     seed: int = 0) -> Forward:
    """The step's forward and loss on `size` × `size` images (see the module's
    docstring); it calls `loss_begins()` between the model and its loss."""
    base = _base(model)
    cfg = base.config
    make = Inputs(seed, device_of(model))
    pixels = make.normal(batch, cfg.num_channels, size, size, dtype=dtype)
    options: dict[str, Any] = {}
    if "interpolate_pos_encoding" in inspect.signature(base.forward).parameters and \
            size != cfg.image_size:
        options["interpolate_pos_encoding"] = True
    classifies = _classifies(cfg)
    labels = make.integers(cfg.num_labels, batch) if classifies else None
    width = getattr(cfg, "hidden_size", 0)
    target = None if classifies else make.normal(batch, width, dtype=torch.float32)

    def forward(loss_begins: Callable[[], None]) -> torch.Tensor:
        out = model(pixel_values=pixels, **options)
        loss_begins()
        if classifies:
            return base.loss_function(labels, out.logits, cfg)
        return F.mse_loss(out.pooler_output.float(), target)

    return forward


class VisionEncoder:
    """The model kind of transformers' ViT-style vision encoders: its blocks are the
    encoder layers; its size is the image's side in pixels (square images)."""

    name = "vision-encoder"
    size_unit = "pixels"

    def claims(self, cfg: Mapping[str, Any]) -> bool:
        part = _vision_part(cfg)
        return part.get("model_type") in VISION_TYPES

    def config(self, cfg: Mapping[str, Any]) -> Any:
        from transformers import AutoConfig

        part = _vision_part(cfg)
        model_type = part.pop("model_type", None)
        if model_type not in VISION_TYPES:
            raise ClassConfigError("image-class", f"model_type {model_type!r}: this kind "
                                   f"builds {', '.join(VISION_TYPES)}", str(model_type))
        try:
            return AutoConfig.for_model(model_type, **part)
        except (TypeError, ValueError) as error:
            raise ClassConfigError("cannot-build", str(error).splitlines()[0][:200],
                                   model_type) from error

    def block_types(self, config: Any) -> tuple[str, ...]:
        return ("layer",) * config.num_hidden_layers

    def reduced(self, types: tuple[str, ...]) -> tuple[str, ...]:
        return types[:2]  # the first layer, and one more

    def side_unit(self, config: Any) -> int:
        """The side, in pixels, of one patch: a side of whole patches has no remainder."""
        return int(config.patch_size)

    def kernels(self, config: Any) -> tuple[str, ...]:
        return ("sdpa", "eager")

    def breaks(self, config: Any) -> tuple[int, ...]:
        return ()

    def build(self, config: Any, variant: Variant, blocks: int | None = None,
              fake: bool = False) -> torch.nn.Module:
        """The class with its first `blocks` encoder layers (None: those of `reduced`),
        the variant's dtype, kernel and LoRA (PEFT's get_peft_model), in training mode."""
        import copy

        from transformers import AutoModel, AutoModelForImageClassification
        from transformers.initialization import no_init_weights

        small = copy.deepcopy(config)
        small.num_hidden_layers = len(self.reduced(self.block_types(config))) \
            if blocks is None else blocks
        auto = AutoModelForImageClassification if _classifies(small) else AutoModel
        # under fake tensors the weights are not initialised (their init reads values)
        blank = no_init_weights() if fake else contextlib.nullcontext()
        with warnings.catch_warnings(), blank:
            warnings.simplefilter("ignore")
            model = auto.from_config(small, attn_implementation=variant.kernel,
                                     dtype=DTYPES[base_dtype(variant)])
            if variant.lora_rank:
                from peft import LoraConfig, get_peft_model

                with default_dtype(DTYPES[base_dtype(variant)]), staying(fake):
                    model = get_peft_model(model, LoraConfig(
                        r=variant.lora_rank,
                        target_modules=lora_modules(model, variant.lora_targets)))
        return model.train()

    def blocks(self, model: torch.nn.Module) -> list[torch.nn.Module]:
        return decoder_layers(model)

    def block_names(self, model: torch.nn.Module) -> list[str]:
        index = {id(m): i for i, m in enumerate(self.blocks(model))}
        return [name for name, m in _base(model).named_modules() if id(m) in index]

    def training_forward(self, model: torch.nn.Module, batch: int, size: int,
                         variant: Variant, seed: int = 0) -> Forward:
        return training_forward(model, batch, size, DTYPES[base_dtype(variant)], seed)

    def measure_step(self, model: torch.nn.Module, batch: int, size: int, variant: Variant
                     ) -> Step:
        forward = self.training_forward(model, batch, size, variant)
        return saved_step(model, self.blocks(model), forward, autocast(variant))[0]

    def checkpoint(self, model: torch.nn.Module, strategy: str, n: int = 2, k: int = 1
                   ) -> tuple[int, ...]:
        """As transformers does it (see the module's docstring)."""
        base = _base(model)
        if strategy == "none":
            base.activation_checkpointing_disable()
        elif strategy == "every-layer":
            base.activation_checkpointing_enable()
        elif strategy == "every-n":
            base.activation_checkpointing_enable(every_n_layers=n)
        elif strategy == "first-k":
            base.activation_checkpointing_enable()
            for i, layer in enumerate(self.blocks(model)):
                if i >= k:
                    layer.gradient_checkpointing = False
        else:
            raise ValueError(f"unknown strategy {strategy!r}")
        return tuple(i for i, layer in enumerate(self.blocks(model))
                     if layer.gradient_checkpointing)
