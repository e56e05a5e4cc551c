"""What an image training run holds on the GPU besides the model it trains: the frozen
VAE and text encoders of a diffusion model (their parameters, in the dtype the training
scripts keep them), the batch's latents and text embeddings, and the latents a run caches.
Pure arithmetic, no torch.

The parameter counts are those of the published checkpoints' classes, built from their
config.json shapes on torch's meta device (tests/real_libraries/test_picture_plan_parts.py
builds them again and holds these numbers to them):

* the VAE of SD 1.5 and SDXL (`AutoencoderKL`, block_out_channels 128, 256, 512, 512;
  4 latent channels): 83,653,863; of SD3 and Flux (16 latent channels, no quant convs):
  83,819,683;
* CLIP ViT-L/14's text encoder (`CLIPTextModel`, SD 1.5's, SDXL's first, Flux's):
  123,060,480; with its projection (`CLIPTextModelWithProjection`, SD3's first):
  123,650,304;
* OpenCLIP ViT-bigG/14's text encoder with projection (SDXL's second, SD3's "CLIP-G"):
  694,659,840;
* T5 v1.1 XXL's encoder (`T5EncoderModel`, d_model 4,096, 24 layers; SD3's third and
  Flux's second): 4,762,310,656.

The dtypes, as diffusers' DreamBooth LoRA scripts place them (examples/dreambooth,
train_dreambooth_lora.py, _sdxl.py, _sd3.py, _flux.py): the text encoders in the
training's weight dtype (bf16 under --mixed_precision bf16, else fp32); the VAE in fp32
for SDXL and SD3 ("The VAE is always in float32 to avoid NaN losses"), in the weight
dtype for SD 1.5 and Flux.

With the latents and text embeddings cached ("cached"), neither the VAE nor the text
encoders stay: the scripts encode the prompts once and free the encoders, and
--cache_latents (SD3, Flux) encodes every image once and keeps its latent distribution
on the GPU: diffusers' DiagonalGaussianDistribution keeps its parameters (mean and
log-variance, 2·C numbers per latent pixel) and the clamped log-variance, std and
variance (C each), 5·C·(side/8)² numbers per image of the data set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

VAE_SCALE = 8  # latents at an eighth of the image's side (model_classes.image_inputs)
DISTRIBUTION_NUMBERS = 5  # per latent channel and pixel of a cached latent distribution

VAE_4 = 83_653_863
VAE_16 = 83_819_683
CLIP_L = 123_060_480
CLIP_L_PROJECTION = 123_650_304
CLIP_BIG_G = 694_659_840
T5_XXL = 4_762_310_656


@dataclass(frozen=True)
class Part:
    """A frozen model the run keeps beside the trained one."""

    id: str  # "vae", "text_encoder", "text_encoder_2", "text_encoder_3"
    label: str  # what it is: "CLIP ViT-L/14 text encoder"
    params: int
    fp32: bool = False  # kept in fp32 whatever the training's weight dtype


@dataclass(frozen=True)
class Family:
    """A diffusion model's frozen parts, the prompt's token count its embeddings have,
    the pooled embedding's width, and the diffusers training script of its kind."""

    name: str
    parts: tuple[Part, ...]
    text_tokens: int
    script: str


SD15 = Family("Stable Diffusion 1.5", (
    Part("vae", "VAE (AutoencoderKL, 4 channels)", VAE_4),
    Part("text_encoder", "CLIP ViT-L/14 text encoder", CLIP_L)), 77,
    "train_dreambooth_lora.py")
SDXL = Family("Stable Diffusion XL", (
    Part("vae", "VAE (AutoencoderKL, 4 channels)", VAE_4, fp32=True),
    Part("text_encoder", "CLIP ViT-L/14 text encoder", CLIP_L),
    Part("text_encoder_2", "OpenCLIP ViT-bigG/14 text encoder", CLIP_BIG_G)), 77,
    "train_dreambooth_lora_sdxl.py")
SD3 = Family("Stable Diffusion 3 / 3.5", (
    Part("vae", "VAE (AutoencoderKL, 16 channels)", VAE_16, fp32=True),
    Part("text_encoder", "CLIP ViT-L/14 text encoder", CLIP_L_PROJECTION),
    Part("text_encoder_2", "OpenCLIP ViT-bigG/14 text encoder", CLIP_BIG_G),
    Part("text_encoder_3", "T5 v1.1 XXL encoder", T5_XXL)), 154,
    "train_dreambooth_lora_sd3.py")
FLUX = Family("FLUX.1", (
    Part("vae", "VAE (AutoencoderKL, 16 channels)", VAE_16),
    Part("text_encoder", "CLIP ViT-L/14 text encoder", CLIP_L),
    Part("text_encoder_2", "T5 v1.1 XXL encoder", T5_XXL)), 512,
    "train_dreambooth_lora_flux.py")


def family(cfg: dict[str, Any]) -> Family | None:
    """The diffusion family of a diffusers config.json (None: a vision encoder, or a UNet
    whose text encoder is not one of these: SD 2's OpenCLIP-H, a custom one)."""
    name = cfg.get("_class_name")
    if name == "FluxTransformer2DModel":
        return FLUX
    if name == "SD3Transformer2DModel":
        return SD3
    if name == "UNet2DConditionModel":
        if cfg.get("addition_embed_type") == "text_time":
            return SDXL
        if cfg.get("cross_attention_dim") == 768:
            return SD15
    return None


def weight_bytes(precision: str) -> int:
    """Bytes per parameter of a frozen part in the training's weight dtype."""
    return 4 if precision == "fp32" else 2


def frozen_bytes(fam: Family | None, precision: str, encoders: str) -> dict[str, int]:
    """Each frozen part's bytes on the GPU ({} when the encoders are cached or there are
    none)."""
    if fam is None or encoders == "cached":
        return {}
    return {part.id: part.params * (4 if part.fp32 else weight_bytes(precision))
            for part in fam.parts}


def latent_channels(cfg: dict[str, Any]) -> int:
    """The VAE's latent channels (Flux's in_channels count its 2 × 2 packing)."""
    channels = int(cfg.get("in_channels") or 4)
    return channels // 4 if cfg.get("_class_name") == "FluxTransformer2DModel" else channels


def text_width(cfg: dict[str, Any]) -> tuple[int, int]:
    """(the text embeddings' width, the pooled embedding's width)."""
    if cfg.get("_class_name") == "UNet2DConditionModel":
        width = int(cfg.get("cross_attention_dim") or 768)
        pooled = 0
        if cfg.get("addition_embed_type") == "text_time":
            pooled = int(cfg["projection_class_embeddings_input_dim"]) - 6 * int(
                cfg["addition_time_embed_dim"])
        return width, pooled
    return int(cfg.get("joint_attention_dim") or 0), int(cfg.get("pooled_projection_dim") or 0)


def batch_inputs(cfg: dict[str, Any], fam: Family | None, side: int, batch: int,
                 precision: str, encoders: str) -> dict[str, int]:
    """The step's inputs on the GPU: the pixels (encoded each step when the encoders are
    resident; a vision encoder's input), the latents and the text embeddings."""
    size = weight_bytes(precision)
    if fam is None and "_class_name" not in cfg:  # a vision encoder: the pixels only
        return {"pixels": batch * int(cfg.get("num_channels") or 3) * side * side * size}
    latent = latent_channels(cfg) * (side // VAE_SCALE) ** 2
    width, pooled = text_width(cfg)
    tokens = fam.text_tokens if fam is not None else 77
    out = {"latents": batch * latent * size,
           "text_embeddings": batch * (tokens * width + pooled) * size}
    if encoders == "resident":
        out["pixels"] = batch * 3 * side * side * size
    return out


def cached_latent_bytes(cfg: dict[str, Any], side: int, precision: str) -> int:
    """One cached image's latent distribution (see the module's docstring)."""
    return (DISTRIBUTION_NUMBERS * latent_channels(cfg) * (side // VAE_SCALE) ** 2
            * weight_bytes(precision))
