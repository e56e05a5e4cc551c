"""The diffusion transformers of Stable Diffusion 3 and Flux as a model kind
(model_classes.kinds): diffusers' `SD3Transformer2DModel` and `FluxTransformer2DModel`
built from a config.json with random weights, their blocks, checkpointing switched on as
diffusers does it (model_classes.diffusion) and one training step measured per block
(model_classes.image_step).

Its blocks are what diffusers 0.42.1 hands to `_gradient_checkpointing_func`
(transformer_sd3.py, transformer_flux.py): SD3's `transformer_blocks` (JointTransformerBlock:
the image and the text each with their own weights, one attention over both; the last
block updates only the image, `context_pre_only`; SD3.5's first blocks add a second
attention over the image alone, `dual_attention_layers`), Flux's `transformer_blocks`
(double-stream, like SD3's) and then its `single_transformer_blocks` (image and text as one
sequence). Outside them: the patch embedding, the time, pooled-text and guidance
embeddings, the text projection, the final norm and projection, and the loss.

One training step, as diffusers' DreamBooth LoRA scripts for SD3 and Flux write it: noisy
latents (16 channels at H/8 × W/8; Flux packs each 2 × 2 patch of them into one token of
64 numbers, `FluxPipeline._pack_latents`, with its image ids, and unpacks the prediction),
a timestep per image (Flux: divided by 1000), text embeddings of the config's
joint-attention width (SD3: 77 + 77 tokens; Flux: T5's 512, with its zero text ids and,
for a guidance-distilled model, a guidance of 3.5) and the pooled text embedding; the
flow-matching loss `mean((weighting * (model_pred - target)²).reshape(b, -1), 1).mean()`
with the scripts' default weighting (logit-normal timesteps: ones).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from model_classes import diffusion
from model_classes.causal_lm_config import ClassConfigError
from model_classes.image_inputs import TEXT_TOKENS, VAE_SCALE, Inputs, device_of, latent_side
from model_classes.image_step import saved_step
from model_classes.saved_step import Step
from model_classes.variant import DTYPES, Variant, autocast, base_dtype

SD3, FLUX = "SD3Transformer2DModel", "FluxTransformer2DModel"
CLASSES = (SD3, FLUX)
GUIDANCE = 3.5  # the Flux DreamBooth script's --guidance_scale default

Forward = Callable[[Callable[[], None]], torch.Tensor]


def _layout(config: Mapping[str, Any]) -> tuple[str, ...]:
    if config["_class_name"] == FLUX:
        return ("double",) * config["num_layers"] + ("single",) * config["num_single_layers"]
    n = config["num_layers"]
    dual = set(config.get("dual_attention_layers") or ())
    return tuple("last" if i == n - 1 else "dual" if i in dual else "joint" for i in range(n))


def _changes(config: Mapping[str, Any], layout: tuple[str, ...]) -> dict[str, Any]:
    """The settings that build a model of these block types."""
    if config["_class_name"] == FLUX:
        return {"num_layers": layout.count("double"), "num_single_layers": layout.count("single")}
    return {"num_layers": len(layout),
            "dual_attention_layers": tuple(i for i, t in enumerate(layout) if t == "dual")}


def named_blocks(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    out = [(f"transformer_blocks.{i}", b) for i, b in enumerate(model.transformer_blocks)]
    single = getattr(model, "single_transformer_blocks", None) or []
    return out + [(f"single_transformer_blocks.{i}", b) for i, b in enumerate(single)]


def _flux_pipeline() -> Any:
    """FluxPipeline, for its static packing helpers (its module imports transformers'
    image processors, which log about torchvision: silenced)."""
    with diffusion.quiet("transformers"):
        from diffusers.pipelines.flux.pipeline_flux import FluxPipeline
    return FluxPipeline


def training_forward(model: torch.nn.Module, batch: int, size: int, dtype: torch.dtype,
                     seed: int = 0) -> Forward:
    """The step's forward and loss at `size` × `size` pixels (see the module's
    docstring); it calls `loss_begins()` between the model and its loss."""
    cfg = model.config
    flux = type(model).__name__ == FLUX
    side = latent_side(size)
    make = Inputs(seed, device_of(model))
    channels = cfg.in_channels // 4 if flux else cfg.in_channels
    latents = make.normal(batch, channels, side, side, dtype=dtype)
    target = make.normal(batch, channels, side, side, dtype=dtype)
    text = make.normal(batch, TEXT_TOKENS[type(model).__name__], cfg.joint_attention_dim,
                       dtype=dtype)
    pooled = make.normal(batch, cfg.pooled_projection_dim, dtype=dtype)
    weighting = make.constant(1.0, batch, 1, 1, 1, dtype=dtype)
    if flux:
        pipe = _flux_pipeline()
        packed = pipe._pack_latents(latents, batch, channels, side, side)
        image_ids = pipe._prepare_latent_image_ids(batch, side // 2, side // 2,
                                                   latents.device, dtype)
        text_ids = make.constant(0.0, text.shape[1], 3, dtype=dtype)
        guidance = make.constant(GUIDANCE, batch) if cfg.guidance_embeds else None
        timestep = make.uniform(batch, dtype=dtype)  # the scripts' timesteps / 1000
    else:
        timestep = make.uniform(batch, dtype=dtype) * 1000

    def forward(loss_begins: Callable[[], None]) -> torch.Tensor:
        if flux:
            pred = model(hidden_states=packed, timestep=timestep, guidance=guidance,
                         pooled_projections=pooled, encoder_hidden_states=text,
                         txt_ids=text_ids, img_ids=image_ids, return_dict=False)[0]
            pred = pipe._unpack_latents(pred, height=side * VAE_SCALE,
                                        width=side * VAE_SCALE, vae_scale_factor=VAE_SCALE)
        else:
            pred = model(hidden_states=latents, timestep=timestep,
                         encoder_hidden_states=text, pooled_projections=pooled,
                         return_dict=False)[0]
        loss_begins()
        loss = torch.mean((weighting.float() * (pred.float() - target.float()) ** 2)
                          .reshape(batch, -1), 1)
        return loss.mean()

    return forward


class DiffusionTransformer:
    """The model kind of diffusers' SD3 and Flux transformers: its blocks are the
    transformer blocks diffusers checkpoints; its size is the image's side in pixels
    (square images; latents at an eighth of it, in 2 × 2 patches: (H/16)·(W/16) image
    tokens)."""

    name = "diffusion-transformer"
    size_unit = "pixels"

    def claims(self, cfg: Mapping[str, Any]) -> bool:
        return cfg.get("_class_name") in CLASSES

    def config(self, cfg: Mapping[str, Any]) -> dict[str, Any]:
        config = diffusion.read_config(cfg, CLASSES)
        if config["_class_name"] == FLUX and sum(config["axes_dims_rope"]) != \
                config["attention_head_dim"]:
            raise ClassConfigError("image-class", "axes_dims_rope must add up to "
                                   "attention_head_dim", FLUX)
        return config

    def block_types(self, config: Mapping[str, Any]) -> tuple[str, ...]:
        return _layout(config)

    def reduced(self, types: tuple[str, ...]) -> tuple[str, ...]:
        """The first block, then each type once more (SD3's last block last)."""
        out = [types[0]]
        for kind in types[1:]:
            if kind not in out[1:]:
                out.append(kind)
        if "last" in out:
            out.remove("last")
            out.append("last")
        return tuple(out)

    def side_unit(self, config: Mapping[str, Any]) -> int:
        """The side, in pixels, of one image token: the VAE's 8 times the patch (Flux:
        its 2 × 2 packing of the latents, times its patch_size of 1)."""
        packing = 2 if config["_class_name"] == FLUX else 1
        return VAE_SCALE * packing * int(config.get("patch_size") or 1)

    def kernels(self, config: Any) -> tuple[str, ...]:
        return ("sdpa",)  # diffusers' native attention: torch's scaled_dot_product_attention

    def breaks(self, config: Any) -> tuple[int, ...]:
        return ()

    def build(self, config: Mapping[str, Any], variant: Variant, blocks: int | None = None,
              fake: bool = False) -> torch.nn.Module:
        """The class with the block types of `reduced` (blocks None), or its first
        `blocks` blocks (SD3: the last of them is always a `context_pre_only` block, as
        in every SD3)."""
        types = _layout(config)
        if blocks is None:
            layout = self.reduced(types)
        elif config["_class_name"] == SD3:
            layout = types[:blocks - 1] + ("last",)
        else:
            layout = types[:blocks]
        return diffusion.build_model(config, variant, fake, **_changes(config, layout))

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
