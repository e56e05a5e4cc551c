"""The frozen parts of a diffusion run (planner.picture_parts): their parameter counts
are those of their classes built from the published config.json shapes on torch's meta
device (nothing allocated, nothing downloaded), and the bytes a plan counts for them and
for a cached latent follow the training scripts' dtypes."""

from __future__ import annotations

import warnings

import pytest
import torch

from planner import picture_parts as parts

warnings.filterwarnings("ignore")


def _count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _clip(width: int, layers: int, heads: int, act: str, projection: bool) -> int:
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    config = CLIPTextConfig(hidden_size=width, intermediate_size=4 * width,
                            num_attention_heads=heads, num_hidden_layers=layers,
                            projection_dim=width, hidden_act=act, vocab_size=49408,
                            max_position_embeddings=77)
    cls = CLIPTextModelWithProjection if projection else CLIPTextModel
    with torch.device("meta"):
        return _count(cls(config))


def _vae(channels: int) -> int:
    from diffusers import AutoencoderKL

    quant = channels == 4  # SD 1.5's and SDXL's VAE has its quant convs, SD3's and Flux's not
    with torch.device("meta"):
        return _count(AutoencoderKL(
            down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4,
            block_out_channels=[128, 256, 512, 512], layers_per_block=2,
            latent_channels=channels, use_quant_conv=quant, use_post_quant_conv=quant))


@pytest.mark.parametrize("name,count", [
    ("clip-l", parts.CLIP_L), ("clip-l-projection", parts.CLIP_L_PROJECTION),
    ("clip-big-g", parts.CLIP_BIG_G), ("vae-4", parts.VAE_4), ("vae-16", parts.VAE_16)])
def test_the_counts_are_the_classes(name: str, count: int) -> None:
    built = {"clip-l": lambda: _clip(768, 12, 12, "quick_gelu", False),
             "clip-l-projection": lambda: _clip(768, 12, 12, "quick_gelu", True),
             "clip-big-g": lambda: _clip(1280, 32, 20, "gelu", True),
             "vae-4": lambda: _vae(4), "vae-16": lambda: _vae(16)}[name]()
    assert built == count


def test_the_t5_xxl_encoder_count_is_the_class() -> None:
    from transformers import T5Config, T5EncoderModel

    config = T5Config(d_model=4096, d_ff=10240, d_kv=64, num_heads=64, num_layers=24,
                      vocab_size=32128, feed_forward_proj="gated-gelu",
                      is_encoder_decoder=False)
    with torch.device("meta"):
        assert _count(T5EncoderModel(config)) == parts.T5_XXL


def test_the_frozen_bytes_follow_the_scripts_dtypes() -> None:
    sdxl = parts.frozen_bytes(parts.SDXL, "mixed", "resident")
    assert sdxl == {"vae": parts.VAE_4 * 4, "text_encoder": parts.CLIP_L * 2,
                    "text_encoder_2": parts.CLIP_BIG_G * 2}
    assert parts.frozen_bytes(parts.FLUX, "mixed", "resident")["vae"] == parts.VAE_16 * 2
    assert parts.frozen_bytes(parts.FLUX, "mixed", "cached") == {}
    flux = {"_class_name": "FluxTransformer2DModel", "in_channels": 64}
    # 16 channels, 128 x 128 latents at 1024 px, 5 numbers each, bf16
    assert parts.cached_latent_bytes(flux, 1024, "mixed") == 5 * 16 * 128 * 128 * 2
