"""Inside a block: torch's SAC estimator and solver (demos.op_policy) on the lab's real GPT
block, checked against every 0/1 choice of the same ops."""

from __future__ import annotations

import itertools

import pytest

from demos.op_policy import choose
from memory.config import ModelConfig

CFG = ModelConfig(layers=1, hidden=64, heads=4, seq_len=32, batch=2)


@pytest.mark.parametrize("share", [0.3, 0.6])
def test_torchs_solver_saves_the_costliest_ops_within_the_share(share):
    ops = choose(CFG, share)
    names = [o.op for o in ops]
    assert names.count("addmm") == 4  # qkv, proj, fc, out: the block's four matmuls
    assert any("scaled_dot_product" in n for n in names)
    total = sum(o.bytes for o in ops)
    assert sum(o.bytes for o in ops if o.saved) <= share * total + 1
    avoided = sum(o.flops for o in ops if o.saved)
    costly = [o for o in ops if o.flops]
    best = max(
        sum(o.flops for o, keep in zip(costly, pick, strict=True) if keep)
        for pick in itertools.product([0, 1], repeat=len(costly))
        if sum(o.bytes for o, keep in zip(costly, pick, strict=True) if keep) <= share * total
    )
    assert avoided >= 0.95 * best  # the solver runs CBC with a 5% relative gap
    assert avoided > 0
