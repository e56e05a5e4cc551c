"""The UNet of Stable Diffusion 1.5 and SDXL as a model kind (model_classes.kinds):
diffusers' `UNet2DConditionModel` built from a config.json with random weights, its
checkpointable blocks, checkpointing switched on as diffusers does it
(model_classes.diffusion), and one training step measured per block
(model_classes.image_step).

Its blocks are what diffusers 0.42.1 hands to `_gradient_checkpointing_func`
(diffusers/models/unets/unet_2d_blocks.py, transformers/transformer_2d.py), in the order
the forward reaches them: every ResnetBlock2D of a down or up block; each
BasicTransformerBlock of a Transformer2DModel (the "attentions" of a cross-attention
block: a resnet, then its transformer blocks); in the mid block
(UNetMidBlock2DCrossAttn) the transformer blocks and the resnets after the first:
`resnets[0]` runs plainly whatever the flag. Never checkpointed, kept outside the blocks:
conv_in, the time (and SDXL's added) embeddings, each Transformer2DModel's norm and
projections in and out, the down- and upsamplers, the up path's concatenated skips,
conv_out and the loss.

One training step, as diffusers' text-to-image and DreamBooth LoRA scripts write it:
noisy latents (the config's in_channels at H/8 × W/8), an integer timestep per image,
77 text embeddings of the config's cross-attention width (SDXL: the pooled text embedding
and the six size and crop numbers as added conditions), and
`F.mse_loss(model_pred.float(), target.float(), reduction="mean")`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from model_classes import diffusion
from model_classes.causal_lm_config import ClassConfigError
from model_classes.image_inputs import TEXT_TOKENS, VAE_SCALE, Inputs, device_of, latent_side
from model_classes.image_step import saved_step
from model_classes.saved_step import Step
from model_classes.variant import DTYPES, Variant, autocast, base_dtype

CLASSES = ("UNet2DConditionModel",)
PAIRED = ("CrossAttnDownBlock2D", "CrossAttnUpBlock2D")  # a resnet, then its attention
PLAIN = ("DownBlock2D", "UpBlock2D")
MID = ("UNetMidBlock2DCrossAttn",)

Forward = Callable[[Callable[[], None]], torch.Tensor]


def named_blocks(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """(path, module) of each block diffusers checkpoints, in forward order (see the
    module's docstring); ClassConfigError for a block type this kind does not know."""
    out: list[tuple[str, torch.nn.Module]] = []

    def transformer(path: str, attn: torch.nn.Module) -> None:
        out.extend((f"{path}.transformer_blocks.{t}", b)
                   for t, b in enumerate(attn.transformer_blocks))

    containers = [(f"down_blocks.{i}", b) for i, b in enumerate(model.down_blocks)]
    if model.mid_block is not None:
        containers.append(("mid_block", model.mid_block))
    containers += [(f"up_blocks.{i}", b) for i, b in enumerate(model.up_blocks)]
    for path, block in containers:
        name = type(block).__name__
        if name in PAIRED:
            for j, (resnet, attn) in enumerate(zip(block.resnets, block.attentions,
                                                   strict=True)):
                out.append((f"{path}.resnets.{j}", resnet))
                transformer(f"{path}.attentions.{j}", attn)
        elif name in PLAIN:
            out.extend((f"{path}.resnets.{j}", r) for j, r in enumerate(block.resnets))
        elif name in MID:
            for j, attn in enumerate(block.attentions):
                transformer(f"{path}.attentions.{j}", attn)
                out.append((f"{path}.resnets.{j + 1}", block.resnets[j + 1]))
        else:
            raise ClassConfigError("image-block", f"{name}: a UNet block this kind does "
                                   "not measure", name)
    return out


def _settings(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k != "_class_name"}


def training_forward(model: torch.nn.Module, batch: int, size: int, dtype: torch.dtype,
                     seed: int = 0) -> Forward:
    """The step's forward and loss at `size` × `size` pixels (see the module's
    docstring); it calls `loss_begins()` between the model and its loss."""
    cfg = model.config
    width = cfg.cross_attention_dim
    if not isinstance(width, int):
        raise ClassConfigError("image-block", "cross_attention_dim per block is not "
                               "measured", "UNet2DConditionModel")
    side = latent_side(size)
    make = Inputs(seed, device_of(model))
    sample = make.normal(batch, cfg.in_channels, side, side, dtype=dtype)
    target = make.normal(batch, cfg.out_channels, side, side, dtype=dtype)
    timestep = make.integers(1000, batch)
    text = make.normal(batch, TEXT_TOKENS["UNet2DConditionModel"], width, dtype=dtype)
    added = None
    if cfg.addition_embed_type == "text_time":  # SDXL: pooled text, size and crop numbers
        pooled = cfg.projection_class_embeddings_input_dim - 6 * cfg.addition_time_embed_dim
        added = {"text_embeds": make.normal(batch, pooled, dtype=dtype),
                 "time_ids": make.normal(batch, 6, dtype=dtype)}

    def forward(loss_begins: Callable[[], None]) -> torch.Tensor:
        pred = model(sample, timestep, text, added_cond_kwargs=added, return_dict=False)[0]
        loss_begins()
        return F.mse_loss(pred.float(), target.float(), reduction="mean")

    return forward


class UNet:
    """The model kind of diffusers' UNet2DConditionModel (SD 1.5, SDXL): its blocks are
    the resnets and transformer blocks diffusers checkpoints; its size is the image's side
    in pixels (square images; the latents are an eighth of it)."""

    name = "unet"
    size_unit = "pixels"

    def claims(self, cfg: Mapping[str, Any]) -> bool:
        return cfg.get("_class_name") in CLASSES

    def config(self, cfg: Mapping[str, Any]) -> dict[str, Any]:
        return diffusion.read_config(cfg, CLASSES)

    def block_types(self, config: Mapping[str, Any]) -> tuple[str, ...]:
        """Each block's path: every block of a UNet has its own shapes."""
        cls = diffusion.diffusers_class(config["_class_name"])
        with torch.device("meta"):
            model = cls.from_config(_settings(config))
        return tuple(path for path, _ in named_blocks(model))

    def reduced(self, types: tuple[str, ...]) -> tuple[str, ...]:
        return types  # a UNet is built whole

    def side_unit(self, config: Mapping[str, Any]) -> int:
        """The side, in pixels, of which an image's side is a whole multiple for every
        level to halve it exactly: the VAE's 8, times 2 per downsampling level."""
        return VAE_SCALE * 2 ** (len(config["block_out_channels"]) - 1)

    def kernels(self, config: Any) -> tuple[str, ...]:
        return ("sdpa",)  # diffusers' AttnProcessor2_0: torch's scaled_dot_product_attention

    def breaks(self, config: Any) -> tuple[int, ...]:
        return ()

    def build(self, config: Mapping[str, Any], variant: Variant, blocks: int | None = None,
              fake: bool = False) -> torch.nn.Module:
        model = diffusion.build_model(config, variant, fake)
        if blocks is not None and blocks != len(named_blocks(model)):
            raise ClassConfigError("image-blocks", "a UNet is built whole",
                                   "UNet2DConditionModel")
        return model

    def blocks(self, model: torch.nn.Module) -> list[torch.nn.Module]:
        return [m for _, m in named_blocks(model)]

    def block_names(self, model: torch.nn.Module) -> list[str]:
        return [path for path, _ in named_blocks(model)]

    def training_forward(self, model: torch.nn.Module, batch: int, size: int,
                         variant: Variant, seed: int = 0) -> Forward:
        return training_forward(model, batch, size, DTYPES[base_dtype(variant)], seed)

    def measure_step(self, model: torch.nn.Module, batch: int, size: int, variant: Variant
                     ) -> Step:
        forward = self.training_forward(model, batch, size, variant)
        return saved_step(model, self.blocks(model), forward, autocast(variant))[0]

    def checkpoint(self, model: torch.nn.Module, strategy: str, n: int = 2, k: int = 1
                   ) -> tuple[int, ...]:
        return diffusion.switch_checkpointing(model, self.blocks(model), strategy, n, k)
