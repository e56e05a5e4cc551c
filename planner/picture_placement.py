"""Which blocks of an image model to checkpoint at a GPU's budget: the placement that
recomputes the fewest FLOPs (memory.placement's exact dynamic program), on the image
planner's own memory model (planner.picture_plan.row): the blocks' kept bytes plus what
is outside them, plus the rebuild's transient, the largest checkpointed block's plain
bytes. Each block is checkpointed on its own (diffusers and transformers wrap block by
block), and a block's recompute is its forward's FLOPs, counted by torch
(planner.picture_measure.count_flops).

The planner's peak is a sum plus a maximum, which a chain models exactly once the
maximum is fixed: for a bound m on the largest checkpointed block, a `Chain` with
`top = m` (beside the held activations at the loss) and blocks larger than m unable to
save anything (their checkpointed bytes set to their plain ones) needs exactly what the
planner counts, since every rebuild moment is below the loss's. The optimum is the best
of the chains over every bound m (each block's plain bytes), tried from the one whose
relaxed knapsack promises least; a bound whose relaxation cannot beat the best found is
not solved."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from memory.placement import BudgetTooSmall, Chain, place


def _at(coefficients: list[str], t: int) -> float:
    return float(sum(Fraction(c) * t**i for i, c in enumerate(coefficients)))


def block_flops(
    measured: dict[str, Any], batch: int, side: int
) -> tuple[tuple[float, ...], float] | None:
    """(each block's forward FLOPs, the whole step's FLOPs, forward and backward) at a
    batch and side, from the measurement's counts (planner.picture_measure.count_flops);
    None for a measurement without them. The step's backward is its forward times the
    measured class's backward / forward (the counter cannot place backward's operations
    in their blocks)."""
    flops = measured.get("flops")
    if not flops:
        return None
    t = (side // int(measured["unit"])) ** 2
    slots = ["first" if i == 0 else kind for i, kind in enumerate(measured["block_types"])]
    per = tuple(batch * _at(flops["forward"][slot], t) for slot in slots)
    ahead = batch * _at(flops["outside_forward"], t) + sum(per)
    ratio = _at(flops["reduced_backward"], t) / _at(flops["reduced_forward"], t)
    return per, ahead * (1 + ratio)


def chain(
    plain: tuple[int, ...],
    checkpointed: tuple[int, ...],
    outside: int,
    flops: tuple[float, ...],
    bound: int,
) -> Chain:
    """The chain whose need is the planner's activations (kept, outside the blocks
    checkpointed, and the rebuild) for any placement of blocks no larger than `bound`."""
    inputs = [c if p <= bound else p for p, c in zip(plain, checkpointed, strict=True)]
    return Chain(plain, inputs, flops, base=outside, top=bound)


def optimal(
    plain: tuple[int, ...],
    checkpointed: tuple[int, ...],
    outside_plain: int,
    outside_checkpointed: int,
    flops: tuple[float, ...],
    budget: float,
) -> tuple[int, ...] | None:
    """The blocks to checkpoint, the fewest FLOPs recomputed, such that the activations
    (the planner's count) stay within `budget` bytes; () when nothing needs checkpointing,
    None when even every block does not fit."""
    if sum(plain) + outside_plain <= budget:
        return ()
    best: tuple[float, tuple[int, ...]] | None = None
    # each bound's least recompute, relaxed (blocks taken in part): no plan under that
    # bound recomputes less, so the bounds are tried from the lowest and the rest skipped
    # once one cannot beat the best found
    for least, bound in sorted(_relaxed(plain, checkpointed, outside_checkpointed, flops, budget)):
        if best is not None and least >= best[0]:
            break
        c = chain(plain, checkpointed, outside_checkpointed, flops, bound)
        try:
            plan = place("optimal", c, int(budget), longest=1)
        except BudgetTooSmall:
            continue
        picked = tuple(s.start for s in plan if s.mode != "keep" and plain[s.start] <= bound)
        if not picked:  # the chain holds outside's checkpointed bytes: one block at least
            picked = (min((i for i, p in enumerate(plain) if p <= bound), key=flops.__getitem__),)
        redo = sum(flops[i] for i in picked)
        if best is None or redo < best[0]:
            best = (redo, picked)
    return None if best is None else best[1]


def _relaxed(
    plain: tuple[int, ...],
    checkpointed: tuple[int, ...],
    outside: int,
    flops: tuple[float, ...],
    budget: float,
) -> list[tuple[float, int]]:
    """(a lower bound on the recompute, bound) for each bound m under which some placement
    may fit: the bytes to free, bought from the blocks no larger than m at their best
    FLOPs per byte saved, the last one in part (the knapsack's relaxation)."""
    out = []
    for bound in sorted(set(plain)):
        free = outside + bound + sum(plain) - budget
        items = sorted(
            (flops[i] / (plain[i] - checkpointed[i]), plain[i] - checkpointed[i])
            for i in range(len(plain))
            if plain[i] <= bound and plain[i] > checkpointed[i]
        )
        if free > sum(saved for _, saved in items):
            continue  # even every block it allows checkpointed does not fit
        least = 0.0
        for rate, saved in items:
            if free <= 0:
                break
            least += rate * min(saved, free)
            free -= saved
        out.append((least, bound))
    return out
