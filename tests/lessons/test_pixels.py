"""memory/pixels.py against values worked out by hand."""

from __future__ import annotations

import pytest

from memory.pixels import (
    FLUX_DEV,
    SD3,
    SD15,
    SDXL,
    UNetConfig,
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


def test_a_feature_map_is_channels_times_pixels():
    assert feature_map_numbers(320, 64, 64) == 1_310_720
    assert feature_map_numbers(320, 128, 128, batch=2) == 2 * 5_242_880
    # double the side: four times the numbers
    assert feature_map_numbers(3, 448, 448) == 4 * feature_map_numbers(3, 224, 224)


def test_patches_make_tokens_and_doubling_the_side_quadruples_them():
    assert patch_tokens(224, 224, 16) == 196  # ViT-B/16, its class token aside
    assert patch_tokens(448, 448, 16) == 784
    assert patch_tokens(1024, 1024, 16) == 4_096
    assert patch_tokens(224, 448, 16) == 14 * 28
    with pytest.raises(ValueError):
        patch_tokens(225, 224, 16)


def test_scores_are_heads_times_tokens_squared_and_grow_sixteenfold():
    assert score_numbers(196, 12) == 12 * 38_416
    assert score_numbers(784, 12) == 16 * score_numbers(196, 12)
    assert score_numbers(4_096, 8) == 134_217_728
    assert score_numbers(4_096, 8, batch=2) == 268_435_456


def test_latents_are_an_eighth_of_the_side():
    assert latent_side(1_024) == 128 and latent_side(512) == 64
    with pytest.raises(ValueError):
        latent_side(1_020)


def test_flux_and_sd3_make_4096_image_tokens_at_1024_px_beside_their_text():
    assert FLUX_DEV.image_tokens(1_024) == SD3.image_tokens(1_024) == 64 * 64 == 4_096
    assert FLUX_DEV.joint_tokens(1_024) == 4_096 + 512
    assert SD3.joint_tokens(1_024) == 4_096 + 77 + 256 == 4_429
    assert FLUX_DEV.token_numbers == 64  # 16 channels × 2 × 2
    assert FLUX_DEV.image_tokens(2_048) == 16_384  # twice the side: four times the tokens


def test_sd15_levels_at_512_px():
    levels = unet_levels(SD15)
    assert [(x.channels, x.side) for x in levels] == [(320, 64), (640, 32), (1280, 16),
                                                      (1280, 8)]
    assert [x.map_numbers for x in levels] == [1_310_720, 655_360, 327_680, 81_920]
    # down 2 + up 3 resnets, an attention module after each where the level has attention;
    # the mid block (2 resnets, 1 attention module of 1 layer) at the lowest level
    assert [(x.resnets, x.attention_modules, x.transformer_layers) for x in levels] == [
        (5, 5, 5), (5, 5, 5), (5, 5, 5), (7, 1, 1)]
    # 6 per resnet, 28 per transformer layer, 3 per attention module
    assert [x.kept_maps for x in levels] == [30 + 140 + 15] * 3 + [42 + 28 + 3]
    assert levels[0].kept_numbers == 185 * 1_310_720 == 242_483_200
    assert levels[0].tokens == 4_096 and levels[0].scores_per_layer == 8 * 4_096 ** 2
    assert unet_kept_numbers(SD15) == 185 * (1_310_720 + 655_360 + 327_680) + 73 * 81_920
    # checkpointed: one input per block, the modules' 3 maps, one transformer layer rebuilt
    assert [x.checkpointed_maps for x in levels] == [25, 25, 25, 11]
    assert unet_checkpointed_numbers(SD15) == (25 * (1_310_720 + 655_360 + 327_680)
                                               + 11 * 81_920 + 28 * 1_310_720)


def test_sdxl_levels_at_1024_px_put_most_bytes_at_the_lowest_resolution():
    levels = unet_levels(SDXL)
    assert [(x.channels, x.side, x.map_numbers) for x in levels] == [
        (320, 128, 5_242_880), (640, 64, 2_621_440), (1280, 32, 1_310_720)]
    # each level's map is half the one above: channels ×2, pixels ÷4
    assert levels[0].map_numbers == 2 * levels[1].map_numbers == 4 * levels[2].map_numbers
    assert [(x.resnets, x.attention_modules, x.transformer_layers) for x in levels] == [
        (5, 0, 0), (5, 5, 10), (7, 6, 60)]
    assert [x.kept_maps for x in levels] == [30, 30 + 280 + 15, 42 + 1_680 + 18]
    assert [x.kept_numbers for x in levels] == [157_286_400, 851_968_000, 2_280_652_800]
    assert max(levels, key=lambda x: x.kept_numbers).level == 3
    assert levels[0].tokens == 0 and levels[0].scores_per_layer == 0  # no attention there
    assert levels[1].tokens == 4_096 and levels[1].scores_per_layer == 10 * 4_096 ** 2
    assert unet_kept_numbers(SDXL) == 3_289_907_200
    assert unet_checkpointed_numbers(SDXL) == (5 * 5_242_880 + 30 * 2_621_440
                                               + 85 * 1_310_720 + 28 * 2_621_440)


def test_a_unet_that_does_not_halve_evenly_is_refused():
    odd = UNetConfig("odd", (8, 16, 32), (0, 1, 1), (0, 1, 1), 1, 1, pixels=24)
    with pytest.raises(ValueError):
        unet_levels(odd)  # latent side 3 cannot halve twice


def test_intervals_keep_more_and_rerun_less():
    # 10 blocks keeping 28 units each, a 1-unit input
    assert interval_maps(10, 1, 28) == 10 + 28
    assert interval_maps(10, 2, 28) == 5 + 5 * 28 + 28
    assert interval_maps(10, 10, 28) == 1 + 9 * 28 + 28
    assert interval_rerun_share(10, 1) == 1 and interval_rerun_share(10, 2) == 0.5
    assert interval_rerun_share(10, 3) == 0.4  # blocks 1, 4, 7, 10
    with pytest.raises(ValueError):
        interval_maps(10, 0, 28)
