"""Checkpoint placement under a byte budget, over per-layer sizes.

A plan is a list of segments of consecutive layers. A 'keep' segment holds each of its
layers' activations; a 'checkpoint' segment holds only its input and rebuilds its
layers in backward. Memory model (bytes for the layers' activations):

    held      = sum(full[i] for kept i) + sum(input[first] for checkpointed segments)
    rebuilt j = held by the layers before segment j + sum(full[i] for i in j)
    need      = max(held, max over checkpointed j of rebuilt j)

'greedy' is Chen et al.'s walk: every layer is checkpointed; a new segment starts when
the running size would pass the segment budget; the largest segment budget whose plan
needs at most the budget wins. 'dp' finds the plan with the least recompute within the
budget, keeping whole layers where they fit: what rebuilding each layer costs is given
(its forward FLOPs, for a chain of unequal layers), one per layer by default (the fewest
rebuilt layers)."""

from __future__ import annotations

from i18n.units import format_bytes
from memory.segments import Segment


class BudgetTooSmall(ValueError):
    """No placement fits; the message says the smallest budget that would."""


def plan_need(plan: list[Segment], full: list[int], inputs: list[int]) -> int:
    """Bytes the plan needs under the memory model above."""
    held_before, need = 0, 0
    for seg in plan:
        layers = range(seg.start, seg.stop)
        if seg.mode == "keep":
            held_before += sum(full[i] for i in layers)
        else:
            need = max(need, held_before + sum(full[i] for i in layers))
            held_before += inputs[seg.start]
    return max(need, held_before)


def greedy_plan(full: list[int], inputs: list[int], budget: int) -> list[Segment]:
    n = len(full)
    if sum(full) <= budget:
        return [Segment(0, n, "keep")]
    best = None
    for seg_budget in sorted({sum(full[i:j]) for i in range(n) for j in range(i + 1, n + 1)}):
        plan, start, running = [], 0, 0
        for i in range(n):
            if running and running + full[i] > seg_budget:
                plan.append(Segment(start, i, "checkpoint"))
                start, running = i, 0
            running += full[i]
        plan.append(Segment(start, n, "checkpoint"))
        if plan_need(plan, full, inputs) <= budget:
            best = plan  # larger segment budgets give fewer, longer segments
    if best is None:
        raise BudgetTooSmall(_too_small(full, inputs, budget))
    return best


def dp_plan(full: list[int], inputs: list[int], budget: int,
            cost: list[int] | None = None) -> list[Segment]:
    """Least recompute within the budget: the sum of `cost[i]` over the rebuilt layers
    (default 1 each: the fewest rebuilt layers). Exact dynamic programming over prefixes:
    the budget is checked where a segment is placed, so a prefix is described by (its
    recompute, bytes held); a state that costs no more and holds no more than another
    dominates it, so each prefix keeps one state per distinct cost (at most n+1 for
    equal costs: O(n^3) in all)."""
    n = len(full)
    cost = [1] * n if cost is None else list(cost)
    if len(cost) != n or any(c < 0 for c in cost):
        raise ValueError("cost: one non-negative number per layer")
    # fronts[i][rebuilt] = (held, worst, back-pointer (i', rebuilt'), segment)
    fronts: list[dict[int, tuple]] = [{} for _ in range(n + 1)]
    fronts[0][0] = (0, 0, None, None)

    def offer(j: int, rebuilt: int, held: int, worst: int, back: tuple, seg: Segment) -> None:
        old = fronts[j].get(rebuilt)
        if old is None or (held, worst) < (old[0], old[1]):
            fronts[j][rebuilt] = (held, worst, back, seg)

    for i in range(n):
        for rebuilt, (held, worst, _, _) in _pareto(fronts[i]):
            if held + full[i] <= budget:  # keep layer i
                offer(i + 1, rebuilt, held + full[i], worst, (i, rebuilt), Segment(i, i + 1))
            seg_full = seg_cost = 0
            for j in range(i + 1, n + 1):  # checkpoint layers [i, j)
                seg_full += full[j - 1]
                seg_cost += cost[j - 1]
                if held + seg_full > budget:
                    break
                offer(j, rebuilt + seg_cost, held + inputs[i], max(worst, held + seg_full),
                      (i, rebuilt), Segment(i, j, "checkpoint"))
    if not fronts[n]:
        raise BudgetTooSmall(_too_small(full, inputs, budget))
    rebuilt = min(fronts[n], key=lambda r: (r, max(fronts[n][r][0], fronts[n][r][1])))
    plan, at = [], (n, rebuilt)
    while at != (0, 0):
        _, _, back, seg = fronts[at[0]][at[1]]
        plan.append(seg)
        at = back
    return _merge_keeps(plan[::-1])


def _pareto(front: dict[int, tuple]) -> list[tuple[int, tuple]]:
    """The states no other state beats on both recompute and held bytes."""
    kept, least_held = [], None
    for rebuilt in sorted(front):
        if least_held is None or front[rebuilt][0] < least_held:
            kept.append((rebuilt, front[rebuilt]))
            least_held = front[rebuilt][0]
    return kept


def _merge_keeps(plan: list[Segment]) -> list[Segment]:
    merged: list[Segment] = []
    for seg in plan:
        if merged and seg.mode == "keep" and merged[-1].mode == "keep":
            merged[-1] = Segment(merged[-1].start, seg.stop, "keep")
        else:
            merged.append(seg)
    return merged


def _too_small(full: list[int], inputs: list[int], budget: int) -> str:
    every = [Segment(i, i + 1, "checkpoint") for i in range(len(full))]
    least = plan_need(every, full, inputs)
    return (f"budget {format_bytes(budget)} is too small for {len(full)} layers: even "
            f"checkpointing every layer needs {format_bytes(least)} ({least} bytes)")
