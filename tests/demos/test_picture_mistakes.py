"""The lab of mistakes' image-model cases (demos.mistake_picture_cases), each measured
plain, wrong and fixed on the lab's tiny diffusers and transformers models, and what they
rest on, read in the installed libraries' source."""

from __future__ import annotations

import inspect

import pytest

from demos.mistakes import CASES, run_case

PICTURE_CASES = ("checkpointing-while-sampling", "checkpointing-flag-not-applied",
                 "checkpointing-frozen-encoder")


@pytest.fixture(scope="module")
def results():
    return {case: run_case(case) for case in PICTURE_CASES}


def test_each_shows_its_symptom_wrong_and_not_fixed(results) -> None:
    for case, result in results.items():
        assert result.wrong_shows and not result.fixed_shows, case
        assert CASES[case].lesson == "image-models"


def test_checkpointing_under_no_grad_saves_nothing_and_reruns_nothing(results) -> None:
    """Sampling four images under no_grad with the training's checkpointing left on: the
    same peak and the same counted FLOPs as without it (nothing saved, nothing rerun);
    one image at a time is what lowers the peak."""
    r = results["checkpointing-while-sampling"]
    assert r.wrong.peak_bytes == r.plain.peak_bytes
    assert r.wrong.flops == r.plain.flops > 0
    assert r.plain.statistic == 0 and r.wrong.statistic > 0  # the flags are on
    assert r.fixed.peak_bytes < r.plain.peak_bytes / 2


def test_a_flag_never_applied_leaves_the_saved_bytes_as_they_were(results) -> None:
    r = results["checkpointing-flag-not-applied"]
    assert r.wrong.saved_bytes == r.plain.saved_bytes > 0
    assert r.wrong.statistic == 0 < r.fixed.statistic
    assert r.fixed.saved_bytes < r.plain.saved_bytes / 4


def test_a_frozen_encoder_under_no_grad_has_nothing_to_checkpoint(results) -> None:
    r = results["checkpointing-frozen-encoder"]
    assert r.wrong.saved_bytes == r.plain.saved_bytes
    assert r.wrong.peak_bytes == r.plain.peak_bytes
    assert r.wrong.statistic > 0  # switched on, in the encoder
    assert r.fixed.saved_bytes < r.plain.saved_bytes / 4
    assert r.fixed.peak_bytes < r.plain.peak_bytes


def test_the_libraries_skip_checkpointing_without_grad() -> None:
    """What the cases rest on, in the installed source: torch's non-reentrant checkpoint
    just runs the function when grad is off; diffusers and transformers do not even call
    it then."""
    import diffusers.models.unets.unet_2d_blocks as blocks
    import torch.utils.checkpoint as checkpoint
    import transformers.modeling_layers as layers

    # torch 2.15 moved the generator's body into `..._impl`; 2.13 has it in place
    generator = getattr(checkpoint, "_checkpoint_without_reentrant_generator_impl",
                        checkpoint._checkpoint_without_reentrant_generator)
    source = inspect.getsource(generator)
    assert "if not torch.is_grad_enabled():\n        yield\n        return" in source
    assert "torch.is_grad_enabled() and self.gradient_checkpointing" in inspect.getsource(
        blocks.CrossAttnDownBlock2D.forward)
    assert "torch.is_grad_enabled()" in inspect.getsource(layers.GradientCheckpointingLayer)
