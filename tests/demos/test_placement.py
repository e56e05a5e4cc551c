"""The chain placement (memory.placement): the optimal method against brute force on
small random chains of unequal layers, with the backward's extra bytes (`after`, `top`,
`base`, `floor`) and torch's early stop (`skip`); every method against the optimum; the
optimal frontier against the least recompute of every plan at each budget; the optimum
with each checkpointed segment one layer long."""

from __future__ import annotations

import itertools
import random

import pytest

from memory.placement import METHODS, BudgetTooSmall, Chain, frontier, place
from memory.segments import Segment


def every_plan(n: int):
    """Every split of n layers into consecutive segments, each kept or checkpointed."""
    for cuts in itertools.product([0, 1], repeat=n - 1):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        segs = list(zip(bounds, bounds[1:], strict=False))
        for modes in itertools.product(["keep", "checkpoint"], repeat=len(segs)):
            yield [Segment(a, b, m) for (a, b), m in zip(segs, modes, strict=True)]


def random_chain(rng: random.Random) -> Chain:
    n = rng.randint(3, 7)
    full = [rng.randint(1, 40) for _ in range(n)]
    full[0] *= rng.choice([1, 5])  # sometimes a wide first block
    inputs = [rng.randint(1, max(1, f // 3)) for f in full]
    cost = [rng.randint(1, 50) * f for f in full]  # FLOPs with the bytes, not in proportion
    skip = [rng.randint(0, c // 3) for c in cost]
    grads = [rng.randint(0, 10) for _ in range(n)]
    # like a real step: the weight gradients of the later layers, plus one in flight
    after = [sum(grads[i + 1 :]) + rng.randint(0, 5) for i in range(n)]
    return Chain(
        full,
        inputs,
        cost,
        skip,
        after,
        top=rng.randint(0, 60),
        base=rng.randint(0, 3),
        floor=rng.randint(0, 30),
    )


def test_the_memory_model_counts_each_moment():
    chain = Chain([10, 20, 30], [1, 2, 3], after=[5, 4, 3], top=7, base=2, floor=1)
    keep = [Segment(0, 3, "keep")]
    # the loss: base + every layer; layer 2: base + layers 0, 1 + itself + its extra
    assert chain.moments(keep) == [2 + 60 + 7, 2 + 10 + 5, 2 + 30 + 4, 2 + 60 + 3, 1]
    one = [Segment(0, 1, "keep"), Segment(1, 3, "checkpoint")]
    # rebuilt: layer 1 alone (20 + 4), then layers 1 and 2 (50 + 3), on layer 0's 10
    assert chain.moments(one) == [2 + 10 + 2 + 7, 2 + 10 + 5, 2 + 10 + 24, 2 + 10 + 53, 1]
    assert chain.need(one) == 65
    assert chain.held(one) == 14


@pytest.mark.parametrize("seed", range(16))
def test_optimal_is_the_least_recompute_of_every_plan(seed):
    rng = random.Random(seed)
    chain = random_chain(rng)
    n = chain.layers
    plans = list(every_plan(n))
    needs = sorted({chain.need(p) for p in plans})
    budget = rng.choice(needs[: max(1, len(needs) // 2)])  # tight budgets, where it matters
    best = min(chain.recompute(p) for p in plans if chain.need(p) <= budget)
    plan = place("optimal", chain, budget)
    assert chain.need(plan) <= budget
    assert [i for s in plan for i in range(s.start, s.stop)] == list(range(n))
    assert chain.recompute(plan) == best
    for method in METHODS:  # no method that fits recomputes less
        try:
            other = place(method, chain, budget)
        except BudgetTooSmall:
            continue
        if chain.need(other) <= budget:
            assert chain.recompute(other) >= best, method
    with pytest.raises(BudgetTooSmall):
        place("optimal", chain, needs[0] - 1)
    # each layer checkpointed on its own (a library that wraps block by block)
    single = [p for p in plans if all(s.mode == "keep" or s.stop - s.start == 1 for s in p)]
    fits = [chain.recompute(p) for p in single if chain.need(p) <= budget]
    if fits:
        plan = place("optimal", chain, budget, longest=1)
        assert all(s.mode == "keep" or s.stop - s.start == 1 for s in plan)
        assert chain.need(plan) <= budget and chain.recompute(plan) == min(fits)


def test_optimal_weighs_flops_not_layers_and_early_stop():
    """A wide layer keeps the most and costs the most to rebuild: the fewest rebuilt layers
    is that one layer, the least recompute is the two narrow layers beside it."""
    chain = Chain([2, 6, 2, 2], [1, 1, 1, 1], cost=[1, 100, 1, 1])
    plan = place("optimal", chain, 10)
    assert [(s.start, s.stop) for s in plan if s.mode == "checkpoint"] == [(0, 1), (2, 3)]
    assert chain.recompute(plan) == 2
    # early stop: a segment's last layer reruns less, so one segment of two beats two of one
    stops = Chain([4, 4, 4], [1, 1, 1], cost=[10, 10, 10], skip=[6, 6, 6])
    assert stops.recompute([Segment(0, 2, "checkpoint"), Segment(2, 3)]) == 14
    assert (
        stops.recompute([Segment(0, 1, "checkpoint"), Segment(1, 2, "checkpoint"), Segment(2, 3)])
        == 8
    )


def test_the_fixed_methods_and_first_k():
    chain = Chain([8] * 9, [1] * 9)
    assert place("sqrt", chain) == [
        Segment(0, 3, "checkpoint"),
        Segment(3, 6, "checkpoint"),
        Segment(6, 9, "checkpoint"),
    ]
    assert place("every", chain) == [Segment(i, i + 1, "checkpoint") for i in range(9)]
    assert place("none", chain) == [Segment(0, 9, "keep")]
    first = place("first-k", chain, 8 * 5 + 4)  # the fewest first layers that fit
    assert first == [Segment(i, i + 1, "checkpoint") for i in range(4)] + [Segment(4, 9)]
    with pytest.raises(ValueError, match="budget"):
        place("greedy", chain)
    with pytest.raises(ValueError, match="unknown"):
        place("revolve", chain, 100)


def test_optimal_scales_to_a_deep_unequal_chain():
    import time

    rng = random.Random(1)
    full = [rng.randint(50, 400) for _ in range(32)]
    chain = Chain(
        full,
        [f // 8 for f in full],
        cost=[f * 3 for f in full],
        after=[10 * (32 - i) for i in range(32)],
    )
    start = time.process_time()
    plan = place("optimal", chain, sum(full) // 3)
    assert time.process_time() - start < 5
    assert chain.need(plan) <= sum(full) // 3


@pytest.mark.parametrize("seed", range(4))
def test_the_frontier_is_every_corner_of_the_least_recompute_at_each_budget(seed):
    chain = random_chain(random.Random(100 + seed))
    points = {(chain.need(p), chain.recompute(p)) for p in every_plan(chain.layers)}
    corners, least = [], None
    for need in sorted({n for n, _ in points}):
        best = min(r for n, r in points if n <= need)
        if least is None or best < least:
            corners.append((need, best))
            least = best
    assert sorted(frontier(chain)) == corners
