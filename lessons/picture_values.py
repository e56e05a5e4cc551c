"""Lesson 9's numbers (image and diffusion models), computed by memory/pixels.py and worded
for a language: lessons/values.py merges them into `lesson_values`."""

from __future__ import annotations

import math
from collections.abc import Callable

from i18n import format_decimal
from lessons.checkpoint_math import (
    best_segment_length,
    every_layer_best_up_to,
    layer_constant,
    uniform_segments_memory,
)
from lessons.facts import DIFFUSERS_VERSION
from memory.pixels import (
    ATTENTION_MODULE_MAPS,
    COUNT_TOLERANCE,
    FLUX_DEV,
    FLUX_HEADS,
    FROZEN_RESNET_MAPS,
    FROZEN_TRANSFORMER_LAYER_MAPS,
    MID_RESNETS,
    RESNET_MAPS,
    SD3,
    SD3_CLIP_TOKENS,
    SD3_T5_TOKENS,
    SD15,
    SDXL,
    TRANSFORMER_LAYER_MAPS,
    VAE_CHANNELS,
    VIT_B16,
    feature_map_numbers,
    interval_maps,
    interval_rerun_share,
    latent_side,
    patch_tokens,
    score_numbers,
    unet_checkpointed_numbers,
    unet_kept_numbers,
    unet_levels,
)

BYTES = 2  # a 16-bit number
# The high resolution the lesson doubles to, and the stack its intervals work on: one of
# SDXL's 32×32 attention modules (ten transformer layers, each checkpointed on its own).
HIGH_PX = 2_048
INTERVALS = (1, 2, 5)
SEGMENT = 2
# The quiz's "apply" shape: a ViT-B/16 taken from 448 to 896 px.
APPLY_VIT_PX = (448, 896)


def picture_values(code: str, number: Callable[[float], str], plain: Callable[[float], str],
                   percent: Callable[..., str], gb: Callable[[float], str]) -> dict[str, str]:
    """Every {{value:pix_...}} of lesson 9 and its quiz items, in language `code`."""
    v: dict[str, str] = {}

    def mb(size: float) -> str:  # bytes as decimal MB with one decimal: "10.5 MB"
        return f"{format_decimal(size / 1e6, code, 1)} MB"

    # Pixels: a feature map, patches, scores.
    vit = VIT_B16
    side, patch, hidden, heads = vit["image"], vit["patch"], vit["hidden"], vit["heads"]
    v["pix_vit_px"] = number(side)
    v["pix_vit_patch"] = number(patch)
    v["pix_vit_hidden"] = number(hidden)
    v["pix_vit_heads"] = number(heads)
    v["pix_vit_layers"] = number(vit["layers"])
    v["pix_vit_grid"] = number(side // patch)
    for name, px in (("", side), ("_2x", 2 * side), ("_1024", 1_024)):
        tokens = patch_tokens(px, px, patch)
        v[f"pix_vit{name}_side"] = number(px)
        v[f"pix_vit{name}_tokens"] = number(tokens)
        v[f"pix_vit{name}_head_scores"] = number(tokens * tokens)
        v[f"pix_vit{name}_scores"] = number(score_numbers(tokens, heads))
        v[f"pix_vit{name}_scores_mb"] = mb(BYTES * score_numbers(tokens, heads))
    tokens = patch_tokens(side, side, patch)
    doubled = patch_tokens(2 * side, 2 * side, patch)
    v["pix_token_factor"] = number(doubled / tokens)
    v["pix_score_factor"] = number(score_numbers(doubled, 1) / score_numbers(tokens, 1))
    big = patch_tokens(1_024, 1_024, patch)
    fused_layer = layer_constant(dropout=False) * big * hidden
    v["pix_vit_constant"] = number(layer_constant(dropout=False))
    v["pix_vit_1024_layer_gb"] = gb(fused_layer)
    v["pix_vit_1024_scores_vs_layer"] = one(BYTES * score_numbers(big, heads) / fused_layer,
                                            code)
    low, high = APPLY_VIT_PX
    v["apply_vit_low"], v["apply_vit_high"] = number(low), number(high)
    low_tokens, high_tokens = patch_tokens(low, low, patch), patch_tokens(high, high, patch)
    v["apply_vit_low_tokens"] = number(low_tokens)
    v["apply_vit_high_tokens"] = number(high_tokens)

    # Latents.
    px = SDXL.pixels
    latent = latent_side(px)
    v["pix_px"] = number(px)
    v["pix_latent_side"] = number(latent)
    v["pix_vae_factor"] = number(px // latent)
    v["pix_image_numbers"] = number(feature_map_numbers(3, px, px))
    v["pix_sdxl_latent_numbers"] = number(feature_map_numbers(SDXL.latent_channels, latent,
                                                              latent))
    v["pix_latent_shrink"] = number(feature_map_numbers(3, px, px)
                                    / feature_map_numbers(SDXL.latent_channels, latent, latent))
    v["pix_sd_latent_channels"] = number(SDXL.latent_channels)
    v["pix_flux_latent_channels"] = number(FLUX_DEV.latent_channels)
    v["pix_flux_latent_numbers"] = number(feature_map_numbers(FLUX_DEV.latent_channels,
                                                              latent, latent))
    v["pix_flux_patch"] = number(FLUX_DEV.patch)
    v["pix_flux_token_numbers"] = number(FLUX_DEV.token_numbers)
    v["pix_flux_grid"] = number(latent // FLUX_DEV.patch)
    v["pix_flux_image_tokens"] = number(FLUX_DEV.image_tokens(px))
    v["pix_flux_text_tokens"] = number(FLUX_DEV.text_tokens)
    v["pix_flux_joint_tokens"] = number(FLUX_DEV.joint_tokens(px))
    v["pix_sd3_clip_tokens"] = number(SD3_CLIP_TOKENS)
    v["pix_sd3_t5_tokens"] = number(SD3_T5_TOKENS)
    v["pix_sd3_text_tokens"] = number(SD3.text_tokens)
    v["pix_sd3_joint_tokens"] = number(SD3.joint_tokens(px))
    v["pix_flux_heads"] = number(FLUX_HEADS)
    joint = FLUX_DEV.joint_tokens(px)
    v["pix_flux_scores_gb"] = gb(BYTES * score_numbers(joint, FLUX_HEADS))
    v["pix_high_px"] = number(HIGH_PX)
    v["pix_flux_high_image_tokens"] = number(FLUX_DEV.image_tokens(HIGH_PX))
    v["pix_flux_high_joint_tokens"] = number(FLUX_DEV.joint_tokens(HIGH_PX))
    v["pix_flux_high_score_factor"] = one(
        score_numbers(FLUX_DEV.joint_tokens(HIGH_PX), 1) / score_numbers(joint, 1), code)
    v["pix_vae_channels"] = number(VAE_CHANNELS[0])
    v["pix_vae_map_mb"] = mb(BYTES * feature_map_numbers(VAE_CHANNELS[0], px, px))

    # UNet levels.
    for key, config in (("sd15", SD15), ("sdxl", SDXL)):
        levels = unet_levels(config)
        total = unet_kept_numbers(config)
        v[f"pix_{key}_px"] = number(config.pixels)
        v[f"pix_{key}_latent"] = number(latent_side(config.pixels))
        for level in levels:
            p = f"pix_{key}_l{level.level}"
            v[f"{p}_channels"] = number(level.channels)
            v[f"{p}_side"] = number(level.side)
            v[f"{p}_map"] = number(level.map_numbers)
            v[f"{p}_map_mb"] = mb(BYTES * level.map_numbers)
            v[f"{p}_resnets"] = number(level.resnets)
            v[f"{p}_layers"] = number(level.transformer_layers)
            v[f"{p}_kept_gb"] = gb(BYTES * level.kept_numbers)
            v[f"{p}_share"] = percent(level.kept_numbers / total)
            v[f"{p}_ckpt_gb"] = gb(BYTES * level.checkpointed_numbers)
            if level.tokens:
                v[f"{p}_tokens"] = number(level.tokens)
                v[f"{p}_heads"] = number(level.heads)
                v[f"{p}_scores_mb"] = mb(BYTES * level.scores_per_layer)
        v[f"pix_{key}_total_gb"] = gb(BYTES * total)
        v[f"pix_{key}_ckpt_gb"] = gb(BYTES * unet_checkpointed_numbers(config))
        v[f"pix_{key}_ckpt_factor"] = one(total / unet_checkpointed_numbers(config), code)
    v["pix_down_resnets"] = number(SDXL.layers_per_block)
    v["pix_up_resnets"] = number(SDXL.layers_per_block + 1)
    v["pix_mid_resnets"] = number(MID_RESNETS)
    v["pix_sdxl_depth_l2"] = number(SDXL.transformer_layers[1])
    v["pix_sdxl_depth_l3"] = number(SDXL.transformer_layers[2])
    v["pix_sdxl_l3_modules"] = number(unet_levels(SDXL)[2].attention_modules)
    v["pix_resnet_frees"] = number(RESNET_MAPS - 1)
    v["pix_layer_frees"] = number(TRANSFORMER_LAYER_MAPS - 1)
    sd15_top = unet_levels(SD15)[0]
    v["pix_sd15_scores_vs_map"] = number(sd15_top.scores_per_layer / sd15_top.map_numbers)
    v["pix_sd15_l1_all_scores_gb"] = gb(BYTES * sd15_top.scores_per_layer
                                        * (sd15_top.transformer_layers))
    sdxl_attn = unet_levels(SDXL)[1]
    v["pix_sdxl_l2_all_scores_gb"] = gb(BYTES * sdxl_attn.scores_per_layer
                                        * sdxl_attn.transformer_layers)
    v["diffusers_version"] = DIFFUSERS_VERSION
    v["pix_count_tolerance"] = percent(COUNT_TOLERANCE)
    v["pix_resnet_maps"] = number(RESNET_MAPS)
    v["pix_attention_module_maps"] = number(ATTENTION_MODULE_MAPS)
    v["pix_frozen_resnet_maps"] = number(FROZEN_RESNET_MAPS)
    v["pix_frozen_layer_maps"] = number(FROZEN_TRANSFORMER_LAYER_MAPS)
    v["pix_layer_maps"] = number(TRANSFORMER_LAYER_MAPS)

    # Intervals on one of SDXL's ten-layer attention modules at 32×32.
    stack = SDXL.transformer_layers[-1]
    level = unet_levels(SDXL)[-1]
    map_bytes = BYTES * level.map_numbers
    v["pix_stack"] = number(stack)
    v["pix_stack_map_mb"] = mb(map_bytes)
    v["pix_stack_layer_mb"] = mb(TRANSFORMER_LAYER_MAPS * map_bytes)
    v["pix_stack_none_maps"] = number(stack * TRANSFORMER_LAYER_MAPS)
    v["pix_stack_none_gb"] = gb(stack * TRANSFORMER_LAYER_MAPS * map_bytes)
    for n in INTERVALS:
        maps = interval_maps(stack, n, TRANSFORMER_LAYER_MAPS)
        v[f"pix_every{n}_maps"] = number(maps)
        v[f"pix_every{n}_gb"] = gb(maps * map_bytes)
        v[f"pix_every{n}_rerun"] = percent(interval_rerun_share(stack, n))
        v[f"pix_every{n}_n"] = number(n)
    v["pix_none_rerun"] = percent(0)
    segments = uniform_segments_memory(stack, SEGMENT, 1, TRANSFORMER_LAYER_MAPS)
    v["pix_segment"] = number(SEGMENT)
    v["pix_segment_maps"] = number(segments)
    v["pix_segment_gb"] = gb(segments * map_bytes)
    v["pix_stack_best_length"] = number(best_segment_length(stack, 1, TRANSFORMER_LAYER_MAPS))
    v["pix_every_block_best_up_to"] = number(every_layer_best_up_to(1, TRANSFORMER_LAYER_MAPS))
    v["pix_stack_sqrt"] = one(math.sqrt(stack), code)
    return v


def one(value: float, code: str) -> str:
    """One decimal, in the language's style: 13.4 / 13,4."""
    return format_decimal(value, code, 1)
