"""Activation memory of image models, from their pixels: pure arithmetic, no torch.

A convolution's feature map holds C·H·W numbers per image. A vision or diffusion transformer
cuts the image (or its latents) into p×p patches, (H/p)·(W/p) tokens, and where a kernel
materializes its attention scores they are tokens² numbers per head (a fused kernel keeps
none, lesson 4). Latent diffusion models work on a VAE's latents, 1/8 of the image's side; a
UNet then halves the side and doubles the channels level by level. Lesson 9
(lessons/content/image-models.md) prints these, through lessons/values.py.

What a UNet block keeps, counted op by op in feature maps of its level (C·h·w numbers each),
for diffusers' blocks with a fused attention kernel and no dropout; tests/lessons/
test_pixels_measured.py measures both against diffusers' own classes:

- a ResnetBlock2D keeps 6: the inputs of its two GroupNorms, its two SiLUs and its two
  convolutions (plus the norms' per-group statistics);
- a BasicTransformerBlock keeps 28: its three LayerNorms' inputs (3); self-attention's input
  to q/k/v and the fused kernel's q, k, v and output (5); cross-attention's query input, query
  and output (3; its keys and values come from the text, a few dozen tokens); the GEGLU
  feed-forward's input (1), its 8·C-wide projection (8), the GELU of its gate (4) and the
  product the last linear reads (4);
- the Transformer2DModel around a stack of those keeps 3 more: its GroupNorm's input, the
  projection in and the projection out's inputs.

With every weight frozen (a LoRA base, before its adapters), a resnet still keeps all 6 (a
convolution saves its input whether or not its weight trains) and a transformer layer 21 of
its 28 (a frozen linear needs no input for its gradient: the inputs of q/k/v, of the
cross-attention's query and of the feed-forward's two linears go, 7 maps).
"""

from __future__ import annotations

from dataclasses import dataclass

# A VAE with four levels of block_out_channels halves the side three times:
# 2 ** (len(vae.config.block_out_channels) - 1) = 8, as diffusers' pipelines compute
# vae_scale_factor (SD 1.5, SDXL, SD3 and FLUX.1 alike).
VAE_DOWNSAMPLE = 8
# The SD VAE's block_out_channels (SD 1.5 and SDXL; its encoder's first level runs at the
# image's full resolution).
VAE_CHANNELS = (128, 256, 512, 512)
RESNET_MAPS = 6
TRANSFORMER_LAYER_MAPS = 28
ATTENTION_MODULE_MAPS = 3
FROZEN_RESNET_MAPS = 6
MID_RESNETS = 2  # UNetMidBlock2DCrossAttn: a resnet, an attention module, a resnet
FROZEN_TRANSFORMER_LAYER_MAPS = 21
# Small UNets of SD 1.5's and SDXL's shapes, built from diffusers' class and measured, keep
# up to this share more than unet_kept_numbers counts (the up path's concatenated skip
# inputs, the resampling convolutions, conv_in and conv_out): tests/lessons/
# test_pixels_measured.py holds them to it.
COUNT_TOLERANCE = 0.10
# ViT-B/16 (google/vit-base-patch16-224): transformers' ViTConfig defaults; no dropout.
VIT_B16 = {"image": 224, "patch": 16, "hidden": 768, "heads": 12, "layers": 12}


def feature_map_numbers(channels: int, height: int, width: int, batch: int = 1) -> int:
    """C·H·W numbers per image, times the batch: one convolution's feature map."""
    return batch * channels * height * width


def patch_tokens(height: int, width: int, patch: int) -> int:
    """(H/p)·(W/p): the tokens of an image (or a latent) cut into p×p patches. A ViT adds
    one class token; diffusion transformers add none."""
    if height % patch or width % patch:
        raise ValueError(f"{height}×{width} is not a whole number of {patch}×{patch} patches")
    return (height // patch) * (width // patch)


def score_numbers(tokens: int, heads: int, batch: int = 1) -> int:
    """heads·tokens² per image: one attention's score matrix (its softmax output), what a
    non-fused ("eager", "math") attention keeps for backward. A fused kernel keeps none."""
    return batch * heads * tokens * tokens


def latent_side(pixels: int, downsample: int = VAE_DOWNSAMPLE) -> int:
    """The latent's side for an image side of `pixels`: pixels / 8 for these VAEs."""
    if pixels % downsample:
        raise ValueError(f"{pixels} px is not a multiple of the VAE's {downsample}")
    return pixels // downsample


@dataclass(frozen=True)
class LatentTransformer:
    """A diffusion transformer on latents: its tokens are latent patches beside the text."""

    name: str
    latent_channels: int  # the VAE's latent_channels
    patch: int  # latent pixels per token side (SD3's patch_size, FLUX.1's 2×2 packing)
    text_tokens: int  # the text tokens beside the image tokens in the joint attention

    def image_tokens(self, pixels: int) -> int:
        """Image tokens of a square image of side `pixels`."""
        side = latent_side(pixels)
        return patch_tokens(side, side, self.patch)

    def joint_tokens(self, pixels: int) -> int:
        """Image and text tokens together: the sequence its joint attention runs over."""
        return self.image_tokens(pixels) + self.text_tokens

    @property
    def token_numbers(self) -> int:
        """Numbers per token as it enters: latent_channels·patch² (FLUX.1's in_channels 64)."""
        return self.latent_channels * self.patch * self.patch


# FLUX.1-dev: 16 latent channels (FluxTransformer2DModel's in_channels 64 = 16·2·2, the packing
# of pipeline_flux.py's _pack_latents), T5 text at the pipeline's max_sequence_length of 512.
FLUX_DEV = LatentTransformer("FLUX.1-dev", 16, 2, 512)
# FLUX.1's 24 heads (FluxTransformer2DModel's num_attention_heads default, 24 × 128 = 3,072).
FLUX_HEADS = 24
# Stable Diffusion 3: 16 latent channels (SD3Transformer2DModel's in_channels), patch_size 2;
# its text is CLIP's 77 tokens (both CLIP encoders side by side in width) followed by T5's
# max_sequence_length of 256 (pipeline_stable_diffusion_3.py): 333 text tokens.
SD3_CLIP_TOKENS, SD3_T5_TOKENS = 77, 256
SD3 = LatentTransformer("Stable Diffusion 3", 16, 2, SD3_CLIP_TOKENS + SD3_T5_TOKENS)


@dataclass(frozen=True)
class UNetConfig:
    """The shape of a UNet2DConditionModel, level by level from full latent resolution."""

    name: str
    channels: tuple[int, ...]  # block_out_channels
    transformer_layers: tuple[int, ...]  # per level; 0: no attention at that level
    heads: tuple[int, ...]  # attention heads per level (0 where there is none)
    mid_layers: int  # transformer layers of the mid block's attention
    mid_heads: int
    layers_per_block: int = 2  # resnets per down block; up blocks have one more
    latent_channels: int = 4
    pixels: int = 512  # the image side it was trained at


# SD 1.5: UNet2DConditionModel's defaults (block_out_channels (320, 640, 1280, 1280), three
# CrossAttnDownBlock2D then a DownBlock2D, one transformer layer each, 8 heads everywhere:
# SD 1.x's attention_head_dim 8 is its number of heads), 512 px.
SD15 = UNetConfig("Stable Diffusion 1.5", (320, 640, 1280, 1280), (1, 1, 1, 0), (8, 8, 8, 0),
                  mid_layers=1, mid_heads=8)
# SDXL base 1.0 (Stability's sd_xl_base.yaml: model_channels 320, channel_mult [1, 2, 4],
# attention at the second and third levels, transformer_depth [0, 2, 10], 64 channels per
# head; diffusers: DownBlock2D then two CrossAttnDownBlock2D, transformer_layers_per_block
# [1, 2, 10] of which the first is unused), 1024 px.
SDXL = UNetConfig("Stable Diffusion XL", (320, 640, 1280), (0, 2, 10), (0, 10, 20),
                  mid_layers=10, mid_heads=20, pixels=1024)


@dataclass(frozen=True)
class UNetLevel:
    """One resolution level of a UNet: its down block, its up block and, at the lowest
    level, the mid block; per image."""

    level: int  # from 1, the full latent resolution
    channels: int
    side: int
    resnets: int
    attention_modules: int  # Transformer2DModels
    transformer_layers: int  # BasicTransformerBlocks in them
    heads: int

    @property
    def map_numbers(self) -> int:
        """One feature map of this level, C·h·w."""
        return feature_map_numbers(self.channels, self.side, self.side)

    @property
    def tokens(self) -> int:
        """The tokens its self-attention runs over (h·w), 0 without attention."""
        return self.side * self.side if self.transformer_layers else 0

    @property
    def kept_maps(self) -> int:
        """Feature maps its blocks keep for backward without checkpointing."""
        return (RESNET_MAPS * self.resnets + TRANSFORMER_LAYER_MAPS * self.transformer_layers
                + ATTENTION_MODULE_MAPS * self.attention_modules)

    @property
    def checkpointed_maps(self) -> int:
        """Feature maps it keeps with every resnet and every transformer layer checkpointed
        (diffusers' enable_gradient_checkpointing): each block's input, and the attention
        modules' own 3 maps, which sit outside the checkpointed layers."""
        return (self.resnets + self.transformer_layers
                + ATTENTION_MODULE_MAPS * self.attention_modules)

    @property
    def kept_numbers(self) -> int:
        return self.kept_maps * self.map_numbers

    @property
    def checkpointed_numbers(self) -> int:
        return self.checkpointed_maps * self.map_numbers

    @property
    def largest_block_numbers(self) -> int:
        """What its largest block keeps: rebuilt at once during a checkpointed backward."""
        per_block = TRANSFORMER_LAYER_MAPS if self.transformer_layers else RESNET_MAPS
        return per_block * self.map_numbers

    @property
    def scores_per_layer(self) -> int:
        """One self-attention's score matrix per image where it is materialized."""
        return score_numbers(self.tokens, self.heads) if self.tokens else 0


def unet_levels(config: UNetConfig, pixels: int | None = None) -> tuple[UNetLevel, ...]:
    """The levels of `config` for a square image of side `pixels` (its own by default).
    A down block has layers_per_block resnets, an up block one more, each followed by an
    attention module where the level has transformer layers; the mid block (two resnets
    around one attention module) counts to the lowest level. The down- and upsampling
    convolutions, conv_in and conv_out are left out (a map or so each)."""
    side = latent_side(pixels or config.pixels)
    last = len(config.channels) - 1
    levels = []
    for index, channels in enumerate(config.channels):
        level_side = side >> index
        if level_side << index != side:
            raise ValueError(f"a latent side of {side} does not halve {last} times")
        per_path = config.layers_per_block + (config.layers_per_block + 1)
        layers = config.transformer_layers[index]
        modules = per_path if layers else 0
        resnets, heads = per_path, config.heads[index]
        stacked = modules * layers
        if index == last:
            resnets += MID_RESNETS
            modules += 1 if config.mid_layers else 0
            stacked += config.mid_layers
            heads = heads or config.mid_heads
        levels.append(UNetLevel(index + 1, channels, level_side, resnets, modules, stacked,
                                heads if stacked else 0))
    return tuple(levels)


def unet_kept_numbers(config: UNetConfig, pixels: int | None = None) -> int:
    """All levels' kept numbers per image without checkpointing."""
    return sum(level.kept_numbers for level in unet_levels(config, pixels))


def unet_checkpointed_numbers(config: UNetConfig, pixels: int | None = None) -> int:
    """Per image with every block checkpointed: the kept inputs and attention modules of all
    levels, plus the largest block, rebuilt at once."""
    levels = unet_levels(config, pixels)
    return (sum(level.checkpointed_numbers for level in levels)
            + max(level.largest_block_numbers for level in levels))


def interval_maps(blocks: int, interval: int, kept: float, boundary: float = 1.0) -> float:
    """A stack of `blocks` equal blocks, each keeping `kept` (in units of its input,
    `boundary`), with every `interval`-th block checkpointed and the rest left as they are
    (SimpleTuner's --gradient_checkpointing_interval as its option page describes it,
    transformers' every_n_layers): the checkpointed ones keep their input, the others all
    they keep, and one checkpointed block is rebuilt at a time. interval 1 is every block."""
    if blocks < 1 or interval < 1:
        raise ValueError("blocks and interval must be positive")
    checkpointed = -(-blocks // interval)
    return checkpointed * boundary + (blocks - checkpointed) * kept + kept


def interval_rerun_share(blocks: int, interval: int) -> float:
    """The share of the stack's forward that every `interval`-th block rerun adds."""
    return -(-blocks // interval) / blocks
