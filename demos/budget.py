"""Checkpoint placement under a byte budget, over per-layer sizes.

A plan is a list of segments of consecutive layers. A 'keep' segment holds each of its
layers' activations; a 'checkpoint' segment holds only its input and rebuilds its
layers in backward. Memory model (bytes for the layers' activations):

    held      = sum(full[i] for kept i) + sum(input[first] for checkpointed segments)
    rebuilt j = held by the layers before segment j + sum(full[i] for i in j)
    need      = max(held, max over checkpointed j of rebuilt j)

'greedy' is Chen et al.'s walk: every layer is checkpointed; a new segment starts when
the running size would pass the segment budget; the largest segment budget whose plan
needs at most the budget wins. 'dp' finds the plan with the fewest rebuilt layers (least
recompute) within the budget, keeping whole layers where they fit."""

from __future__ import annotations

from demos.config import format_bytes
from demos.model import Segment


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


def dp_plan(full: list[int], inputs: list[int], budget: int) -> list[Segment]:
    """Fewest rebuilt layers within the budget (ties: least memory). Exact: keeps, for
    each prefix, the Pareto set of (held bytes, worst rebuild so far, rebuilt layers)."""
    n = len(full)
    # states[i]: list of (rebuilt, held, worst, plan) for layers [0, i)
    states: list[list[tuple]] = [[] for _ in range(n + 1)]
    states[0] = [(0, 0, 0, ())]
    for i in range(n):
        for rebuilt, held, worst, plan in _pareto(states[i]):
            if held + full[i] <= budget:  # keep layer i
                states[i + 1].append((rebuilt, held + full[i], worst,
                                      plan + (Segment(i, i + 1, "keep"),)))
            seg_full = 0
            for j in range(i + 1, n + 1):  # checkpoint layers [i, j)
                seg_full += full[j - 1]
                if held + seg_full > budget:
                    break
                states[j].append((rebuilt + j - i, held + inputs[i], max(worst, held + seg_full),
                                  plan + (Segment(i, j, "checkpoint"),)))
    done = [s for s in states[n] if max(s[1], s[2]) <= budget]
    if not done:
        raise BudgetTooSmall(_too_small(full, inputs, budget))
    rebuilt, held, worst, plan = min(done, key=lambda s: (s[0], max(s[1], s[2]), len(s[3])))
    return _merge_keeps(list(plan))


def _pareto(states: list[tuple]) -> list[tuple]:
    states = sorted(states, key=lambda s: (s[0], s[1], s[2]))
    kept: list[tuple] = []
    for s in states:
        if not any(k[0] <= s[0] and k[1] <= s[1] and k[2] <= s[2] for k in kept):
            kept.append(s)
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
