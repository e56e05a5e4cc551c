"""memory/pixels.py against the installed diffusers: its configs' defaults and pipelines, and
what its blocks and a whole small UNet save for backward (measured with autograd's
saved-tensor hooks on the CPU, fp32, each storage counted once, parameters left out)."""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from memory.pixels import (  # noqa: E402
    ATTENTION_MODULE_MAPS,
    COUNT_TOLERANCE,
    FLUX_DEV,
    FLUX_HEADS,
    FROZEN_RESNET_MAPS,
    FROZEN_TRANSFORMER_LAYER_MAPS,
    RESNET_MAPS,
    SD3,
    SD15,
    TRANSFORMER_LAYER_MAPS,
    VAE_DOWNSAMPLE,
    VIT_B16,
    UNetConfig,
    unet_kept_numbers,
)


def _default(function, name):
    return inspect.signature(function).parameters[name].default


def saved_numbers(module: torch.nn.Module, run) -> int:
    """Numbers autograd keeps for backward while `run()` goes forward (one per storage)."""
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    seen: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        key = tensor.untyped_storage().data_ptr()
        if key not in params and key not in seen:
            seen[key] = tensor.untyped_storage().nbytes() // tensor.element_size()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        run()
    return sum(seen.values())


def test_the_lesson_reads_the_installed_diffusers():
    from lessons.facts import DIFFUSERS_VERSION

    assert diffusers.__version__ == DIFFUSERS_VERSION


def test_the_configs_are_diffusers_own():
    from diffusers import AutoencoderKL, FluxTransformer2DModel, SD3Transformer2DModel
    from diffusers import UNet2DConditionModel as UNet

    assert _default(UNet.__init__, "block_out_channels") == SD15.channels
    assert _default(UNet.__init__, "down_block_types") == (
        "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D")
    assert _default(UNet.__init__, "layers_per_block") == SD15.layers_per_block
    assert _default(UNet.__init__, "attention_head_dim") == SD15.heads[0]
    assert _default(UNet.__init__, "in_channels") == SD15.latent_channels
    assert _default(AutoencoderKL.__init__, "latent_channels") == 4
    assert _default(SD3Transformer2DModel.__init__, "in_channels") == SD3.latent_channels
    assert _default(SD3Transformer2DModel.__init__, "patch_size") == SD3.patch
    assert _default(FluxTransformer2DModel.__init__, "in_channels") == FLUX_DEV.token_numbers
    assert _default(FluxTransformer2DModel.__init__, "num_attention_heads") == FLUX_HEADS


def test_vit_b16_is_transformers_default_vit():
    transformers = pytest.importorskip("transformers")
    config = transformers.ViTConfig()
    assert (config.image_size, config.patch_size, config.hidden_size, config.num_attention_heads,
            config.num_hidden_layers) == tuple(VIT_B16[key] for key in (
                "image", "patch", "hidden", "heads", "layers"))
    assert config.hidden_dropout_prob == config.attention_probs_dropout_prob == 0.0


def test_the_vae_halves_the_side_once_per_level_after_the_first():
    from memory.pixels import VAE_CHANNELS

    assert 2 ** (len(VAE_CHANNELS) - 1) == VAE_DOWNSAMPLE


def test_the_text_tokens_are_the_pipelines_defaults():
    from diffusers import FluxPipeline, StableDiffusion3Pipeline

    assert _default(FluxPipeline.__call__, "max_sequence_length") == FLUX_DEV.text_tokens
    t5 = _default(StableDiffusion3Pipeline.__call__, "max_sequence_length")
    source = inspect.getsource(StableDiffusion3Pipeline)
    assert "else 77" in source  # CLIP's tokenizer length, the fallback of tokenizer_max_length
    assert "torch.cat([clip_prompt_embeds, t5_prompt_embed], dim=-2)" in source
    assert 77 + t5 == SD3.text_tokens
    flux = inspect.getsource(FluxPipeline)
    assert "(height // 2) * (width // 2), num_channels_latents * 4" in flux  # 2×2 packing
    assert "2 ** (len(self.vae.config.block_out_channels) - 1)" in flux


def test_enable_gradient_checkpointing_is_non_reentrant_and_skipped_without_grad():
    from diffusers.models import modeling_utils
    from diffusers.models.unets import unet_2d_blocks

    assert '{"use_reentrant": False}' in inspect.getsource(
        modeling_utils.ModelMixin.enable_gradient_checkpointing)
    blocks = inspect.getsource(unet_2d_blocks.CrossAttnDownBlock2D.forward)
    assert "torch.is_grad_enabled() and self.gradient_checkpointing" in blocks


@pytest.fixture(scope="module")
def blocks():
    from diffusers.models.resnet import ResnetBlock2D
    from diffusers.models.transformers.transformer_2d import Transformer2DModel

    torch.manual_seed(0)
    channels, side = 64, 16

    def transformer(layers: int) -> torch.nn.Module:
        return Transformer2DModel(num_attention_heads=2, attention_head_dim=channels // 2,
                                  in_channels=channels, num_layers=layers,
                                  cross_attention_dim=96, norm_num_groups=32,
                                  use_linear_projection=True).train()

    x = torch.randn(1, channels, side, side, requires_grad=True)
    text = torch.randn(1, 7, 96)
    resnet = ResnetBlock2D(in_channels=channels, out_channels=channels, temb_channels=128,
                           groups=32).train()
    temb = torch.randn(1, 128)
    one, two = transformer(1), transformer(2)
    numbers = {
        "map": channels * side * side,
        "resnet": saved_numbers(resnet, lambda: resnet(x, temb)),
        "one": saved_numbers(one, lambda: one(x, encoder_hidden_states=text)),
        "two": saved_numbers(two, lambda: two(x, encoder_hidden_states=text)),
    }
    for module in (resnet, one, two):
        module.requires_grad_(False)  # a frozen base: only the input asks for a gradient
    numbers["frozen_resnet"] = saved_numbers(resnet, lambda: resnet(x, temb))
    numbers["frozen_layer"] = (
        saved_numbers(two, lambda: two(x, encoder_hidden_states=text))
        - saved_numbers(one, lambda: one(x, encoder_hidden_states=text)))
    with torch.no_grad():
        numbers["no_grad"] = saved_numbers(two, lambda: two(x, encoder_hidden_states=text))
    return numbers


def test_a_resnet_block_keeps_six_maps(blocks):
    maps = blocks["resnet"] / blocks["map"]
    assert RESNET_MAPS <= maps < RESNET_MAPS + 0.05  # + the GroupNorms' statistics


def test_a_transformer_layer_keeps_28_maps_and_its_module_3_more(blocks):
    layer = (blocks["two"] - blocks["one"]) / blocks["map"]
    module = blocks["one"] / blocks["map"] - layer
    # + per-token statistics (LayerNorm, log-sum-exp) and the 7 text tokens' keys and values
    assert TRANSFORMER_LAYER_MAPS <= layer < TRANSFORMER_LAYER_MAPS + 0.3
    assert ATTENTION_MODULE_MAPS - 0.05 < module < ATTENTION_MODULE_MAPS + 0.05


def test_frozen_blocks_keep_most_of_it_and_no_grad_nothing(blocks):
    assert FROZEN_RESNET_MAPS <= blocks["frozen_resnet"] / blocks["map"] < FROZEN_RESNET_MAPS + 0.05
    layer = blocks["frozen_layer"] / blocks["map"]
    assert FROZEN_TRANSFORMER_LAYER_MAPS <= layer < FROZEN_TRANSFORMER_LAYER_MAPS + 0.3
    assert blocks["no_grad"] == 0  # nothing saved, so nothing for a checkpoint to drop


# Small UNets of SD 1.5's and SDXL's shapes (widths divided by 10, a 32×32 latent).
SMALL = {
    "sd15": (UNetConfig("sd15", (32, 64, 128, 128), (1, 1, 1, 0), (8, 8, 8, 0), 1, 8,
                        pixels=256),
             {"block_out_channels": (32, 64, 128, 128), "attention_head_dim": 8}),
    "sdxl": (UNetConfig("sdxl", (32, 64, 128), (0, 2, 10), (0, 2, 4), 10, 4, pixels=256),
             {"block_out_channels": (32, 64, 128),
              "down_block_types": ("DownBlock2D", "CrossAttnDownBlock2D",
                                   "CrossAttnDownBlock2D"),
              "up_block_types": ("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
              "transformer_layers_per_block": (1, 2, 10), "attention_head_dim": (2, 4, 8),
              "use_linear_projection": True}),
}


@pytest.mark.parametrize("name", SMALL)
def test_a_whole_unet_keeps_what_its_levels_add_up_to_within_a_tenth(name):
    """The count leaves out the up path's wider inputs (the skip connections are
    concatenated), the resampling convolutions, conv_in and conv_out: measured, they add
    5-10% (the lesson says so)."""
    from diffusers import UNet2DConditionModel

    config, kwargs = SMALL[name]
    torch.manual_seed(0)
    unet = UNet2DConditionModel(cross_attention_dim=32, norm_num_groups=32, **kwargs).train()
    latent = torch.randn(1, 4, 32, 32)
    text = torch.randn(1, 7, 32)
    measured = saved_numbers(unet, lambda: unet(latent, torch.tensor([10]),
                                                encoder_hidden_states=text))
    assert 1.0 < measured / unet_kept_numbers(config) < 1.0 + COUNT_TOLERANCE
