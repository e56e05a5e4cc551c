"""The image planner (planner.picture_plan) against real steps of the real classes: for
every image family at tiny size (model_classes.tiny_pictures), the fits made under fake
tensors (planner.picture_measure) give, at a side and batch they were not measured at,
each block's kept bytes and the whole model's as one real CPU step of the class keeps
them (model_classes' measure_step on real tensors), plainly, with every block
checkpointed, and with every n-th block (each block to the byte; the whole within 1%:
outside the blocks the plan takes what a run with every block checkpointed keeps there).
fp32, bf16 and mixed precision, full fine-tuning and LoRA each meet several families."""

from __future__ import annotations

import warnings

import pytest
import torch

from model_classes.kinds import kind_for
from model_classes.tiny_pictures import tiny_config
from planner import picture_measure, picture_plan

warnings.filterwarnings("ignore")
torch.set_num_threads(1)

# (family, precision, LoRA rank, batch): fp32, bf16 and mixed, full and LoRA, one image
# and several, each met by more than one family; QLoRA (a 4-bit NF4 base loaded by
# diffusers' quantizer, under bf16 autocast)
CASES = [("sdxl-unet", "bf16", 4, 1), ("sd3", "fp32", 0, 1), ("flux", "bf16", 4, 1),
         ("vit", "mixed", 0, 2), ("siglip", "bf16", 4, 1), ("dinov2", "bf16", 0, 1),
         ("clip-vision", "fp32", 4, 1), ("flux", "4bit-mixed", 4, 1)]


def _real(cfg: dict, precision: str, rank: int, batch: int, side: int, strategy: str,
          n: int = 2) -> tuple[list[int], int]:
    """One real CPU step: each block's kept bytes and outside the blocks."""
    kind = kind_for(cfg)
    config = kind.config(cfg)
    count = len(kind.block_types(config))
    variant = picture_measure.variant(precision, rank, "attention", "cpu")
    torch.manual_seed(0)
    model = kind.build(config, variant, blocks=count)
    if strategy != "none":
        kind.checkpoint(model, strategy, n=n)
    step = kind.measure_step(model, batch, side, variant)
    return step.per_block(count), step.outside()


@pytest.mark.heavy
@pytest.mark.parametrize("family,precision,rank,batch", CASES,
                         ids=[f"{f}-{p}-r{r}-b{b}" for f, p, r, b in CASES])
def test_the_plan_keeps_what_a_real_step_keeps(family: str, precision: str, rank: int,
                                               batch: int) -> None:
    cfg = tiny_config(family)
    measured = picture_measure.measure(cfg, precision, rank, "attention", batch,
                                       device="cpu", check=False, flops=False)
    unit = measured["unit"]
    # the fit sampled 2, 3 and 4 units; a ViT at its own image_size (224) runs without
    # interpolating its position embeddings, as it did not at the sampled sides
    side = 224 if family == "vit" else unit * 5
    blocks = picture_plan.blocks(measured, batch, side)
    count = len(blocks.plain)
    for strategy, n in (("none", 0), ("every-layer", 0), ("every-n", 2)):
        per, outside = _real(cfg, precision, rank, batch, side, strategy, n or 2)
        picked = picture_plan.chosen(strategy, count, n=n or 2)
        planned, planned_outside, _ = picture_plan.kept(blocks, picked)
        assert planned == per, (strategy, planned, per)
        whole, planned_whole = sum(per) + outside, sum(planned) + planned_outside
        if strategy == "every-n":
            assert abs(planned_whole - whole) <= 0.01 * whole, (planned_whole, whole)
        else:
            assert planned_whole == whole, strategy
    # a checkpointed block keeps less than it does plainly, wherever it keeps anything
    assert all(c < p for c, p in zip(blocks.checkpointed, blocks.plain, strict=True) if p)


def test_a_side_that_is_no_multiple_of_the_unit_is_refused() -> None:
    p = picture_plan.PictureInputs(tiny_config("flux"), resolution=100)
    with pytest.raises(picture_plan.PictureError, match="multiples of 16"):
        picture_plan.check(p, 16)
