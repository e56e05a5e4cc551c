"""The image planner's FLOP counts (planner.picture_measure.count_flops), made under fake
tensors on the reduced class and fitted in t, against torch's FlopCounterMode on a tiny
ViT built whole with real tensors, at a side the fit was not made from: each block's
forward to the FLOP, and the step's total within a tenth (its backward is estimated)."""

from __future__ import annotations

import warnings

import pytest
from torch.utils.flop_counter import FlopCounterMode

from model_classes.kinds import kind_for
from model_classes.tiny_pictures import tiny_config
from planner.picture_measure import count_flops, cpu_attention, variant
from planner.picture_placement import block_flops

warnings.filterwarnings("ignore")


def test_the_counted_flops_are_a_real_steps() -> None:
    cfg = tiny_config("vit")
    kind = kind_for(cfg)
    config = kind.config(cfg)
    v = variant("fp32", 4, "attention", "cpu")
    unit = kind.side_unit(config)
    types = list(kind.block_types(config))
    measured = {"unit": unit, "block_types": types, "flops": count_flops(kind, config, v, unit)}
    side = unit * 5  # the fit sampled 2, 3 and 4 units
    per, step = block_flops(measured, 1, side)
    model = kind.build(config, v, blocks=len(types))
    run = kind.training_forward(model, 1, side, v)
    with FlopCounterMode(display=False, custom_mapping=cpu_attention()) as ahead:
        loss = run(lambda: None)
    with FlopCounterMode(display=False, custom_mapping=cpu_attention()) as back:
        loss.backward()
    names = {id(m): name for name, m in model.named_modules()}
    counts = ahead.get_flop_counts()
    real = [
        sum(counts[f"{type(model).__name__}.{names[id(b)]}"].values()) for b in kind.blocks(model)
    ]
    assert len(real) == len(types) > 2 and all(real)
    assert list(per) == real
    # the step's backward is an estimate (the reduced class's backward / forward; its
    # first block, whose input needs no gradient under LoRA, weighs more there)
    assert step == pytest.approx(ahead.get_total_flops() + back.get_total_flops(), rel=0.1)
