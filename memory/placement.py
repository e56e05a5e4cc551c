"""Checkpoint placement under a byte budget, over a chain of layers of unequal sizes.

A plan is a list of segments of consecutive layers. A 'keep' segment holds each of its
layers' activations; a 'checkpoint' segment holds only its input and rebuilds its
layers in backward. `Chain` is the one memory model every method here plans with and
every prediction of a placement's peak reads (`Chain.need`): per layer `i`

    full[i]    bytes the layer keeps when it runs plainly (its input included)
    inputs[i]  bytes of its input: what a checkpoint that starts there keeps
    cost[i]    FLOPs one rebuild of the layer reruns (its forward; 1 each: count layers)
    skip[i]    FLOPs a rebuild does not rerun when the layer ends its segment (torch's
               non-reentrant checkpoint stops early: the last linear, whose output
               nothing saves)
    after[i]   bytes alive beside the held activations while the layer's backward runs
               (the weight gradients made so far, the gradients in flight, less what the
               layer has already released)

and three constants: `base` (held before the first layer), `top` (beside every held
activation at the loss) and `floor` (a moment no placement changes: every gradient at the
end). Backward runs the layers last to first; when it reaches layer i of a segment that
starts at a, the layers before a hold what they keep (H_a: `base`, kept layers' `full`,
checkpointed segments' `inputs`), and the segment holds what is rebuilt of it so far:

    keep layer i:         H_i + full[i] + after[i]
    checkpoint [a, b), i: H_a + full[a] + ... + full[i] + after[i]
    the loss:             H_n + top
    need = the largest of these and `floor`

With `after`, `top`, `base`, `floor` all 0 this is the activations' model alone (a
rebuilt segment on top of what the layers before it hold).

Methods (`METHODS`): 'optimal' is an exact dynamic program over prefixes (the least
recompute within the budget, keeping whole layers where they fit: Beaumont et al.'s
chain formulation without multi-level recursion); 'greedy' is Chen et al.'s walk (every
layer checkpointed, a new segment when the running size would pass a segment budget;
the largest segment budget whose plan fits wins); 'sqrt' (segments of about √N layers),
'every' (each layer its own segment) and 'none' ignore the budget; 'first-k' checkpoints
the first k layers one by one, the fewest that fit."""

from __future__ import annotations

from dataclasses import dataclass

from i18n.units import format_bytes
from memory.segments import Segment, sqrt_k

METHODS = ("optimal", "greedy", "sqrt", "every", "first-k", "none")
BUDGETED = frozenset({"optimal", "greedy", "first-k"})  # methods that read the budget


class BudgetTooSmall(ValueError):
    """No placement fits; the message says what checkpointing every layer would need."""


@dataclass(frozen=True)
class Chain:
    """A chain of layers as a placement sees it (the memory model in the module's
    docstring). Lists may be given; they are kept as tuples."""

    full: tuple[int, ...]
    inputs: tuple[int, ...]
    cost: tuple[float, ...] | None = None
    skip: tuple[float, ...] | None = None
    after: tuple[int, ...] | None = None
    top: int = 0
    base: int = 0
    floor: int = 0

    def __post_init__(self) -> None:
        n = len(self.full)
        for name in ("full", "inputs", "cost", "skip", "after"):
            value = getattr(self, name)
            if value is None:
                value = (1,) * n if name == "cost" else (0,) * n
            object.__setattr__(self, name, tuple(value))
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name}: one number per layer ({n})")
        if any(c < 0 for c in self.cost) or any(f < 0 for f in self.full):
            raise ValueError("cost and full: non-negative numbers")

    @property
    def layers(self) -> int:
        return len(self.full)

    def moments(self, plan: list[Segment]) -> list[int]:
        """The bytes at each moment of the model, in backward's order of the plan's
        segments (the loss first, then each layer, then the floor)."""
        held, out = self.base, []
        for seg in plan:
            if seg.mode == "keep":
                for i in range(seg.start, seg.stop):
                    out.append(held + self.full[i] + self.after[i])
                    held += self.full[i]
            else:
                rebuilt = 0
                for i in range(seg.start, seg.stop):
                    rebuilt += self.full[i]
                    out.append(held + rebuilt + self.after[i])
                held += self.inputs[seg.start]
        return [held + self.top, *out, self.floor]

    def need(self, plan: list[Segment]) -> int:
        """Bytes the plan needs: the largest moment."""
        return max(self.moments(plan))

    def held(self, plan: list[Segment]) -> int:
        """Bytes held for backward at the end of forward (base included)."""
        return self.base + sum(
            sum(self.full[seg.start : seg.stop]) if seg.mode == "keep" else self.inputs[seg.start]
            for seg in plan
        )

    def segment_cost(self, start: int, stop: int) -> float:
        """FLOPs backward reruns for a checkpointed segment [start, stop)."""
        return sum(self.cost[start:stop]) - self.skip[stop - 1]

    def recompute(self, plan: list[Segment]) -> float:
        return sum(self.segment_cost(s.start, s.stop) for s in plan if s.mode != "keep")


def plan_need(plan: list[Segment], full: list[int], inputs: list[int]) -> int:
    """Bytes the plan needs when only the layers' activations count (Chain.need)."""
    return Chain(full, inputs).need(plan)


def place(
    method: str, chain: Chain, budget: int | None = None, longest: int | None = None
) -> list[Segment]:
    """The segments `method` (one of METHODS) places on the chain. The budgeted methods
    raise BudgetTooSmall when nothing they can place fits; the others ignore the budget
    (their plan may need more: compare `chain.need(plan)` with it). `longest` ('optimal'
    only): no checkpointed segment longer than that many layers (1: each layer wrapped on
    its own, as a library that checkpoints block by block applies a plan)."""
    if method not in METHODS:
        raise ValueError(f"placement {method!r} is unknown; allowed: {', '.join(METHODS)}")
    n = chain.layers
    if method == "none":
        return [Segment(0, n, "keep")]
    if method == "every":
        return _every(n)
    if method == "sqrt":
        k = sqrt_k(n)
        return [Segment(i, min(i + k, n), "checkpoint") for i in range(0, n, k)]
    if budget is None:
        raise ValueError(f"placement {method!r} needs a budget")
    if method == "first-k":
        for k in range(n + 1):
            if chain.need(plan := _first_k(n, k)) <= budget:
                return plan
        raise BudgetTooSmall(_too_small(chain, budget))
    if method == "greedy":
        return _greedy(chain, budget)
    return _optimal(chain, budget, longest)


def frontier(chain: Chain, limit: int = 400) -> list[tuple[int, float]]:
    """The optimal placements' trade-off: (bytes needed, FLOPs recomputed) of every plan the
    optimum picks as the budget falls, from no checkpointing down to the least any
    placement needs. Each point is `place("optimal", ...)` at the previous point's need less
    one byte, so the walk finds every corner of the staircase (a budget between two
    corners gets the upper one's plan); at most `limit` points."""
    budget, points = chain.need(place("none", chain)), []
    while len(points) < limit:
        try:
            plan = _optimal(chain, budget)
        except BudgetTooSmall:
            break
        need = chain.need(plan)
        points.append((need, chain.recompute(plan)))
        budget = need - 1
    return points


def greedy_plan(full: list[int], inputs: list[int], budget: int) -> list[Segment]:
    """Chen et al.'s greedy walk when only the layers' activations count."""
    return _greedy(Chain(full, inputs), budget)


def dp_plan(
    full: list[int], inputs: list[int], budget: int, cost: list[int] | None = None
) -> list[Segment]:
    """The least recompute (the sum of `cost[i]` over rebuilt layers; default 1 each: the
    fewest rebuilt layers) when only the layers' activations count."""
    return _optimal(Chain(full, inputs, cost), budget)


def _every(n: int) -> list[Segment]:
    return [Segment(i, i + 1, "checkpoint") for i in range(n)]


def _first_k(n: int, k: int) -> list[Segment]:
    return [Segment(i, i + 1, "checkpoint") for i in range(k)] + (
        [Segment(k, n, "keep")] if k < n else []
    )


def _greedy(chain: Chain, budget: int) -> list[Segment]:
    n, full = chain.layers, chain.full
    if chain.need(plan := [Segment(0, n, "keep")]) <= budget:
        return plan
    best = None
    for seg_budget in sorted({sum(full[i:j]) for i in range(n) for j in range(i + 1, n + 1)}):
        plan, start, running = [], 0, 0
        for i in range(n):
            if running and running + full[i] > seg_budget:
                plan.append(Segment(start, i, "checkpoint"))
                start, running = i, 0
            running += full[i]
        plan.append(Segment(start, n, "checkpoint"))
        if chain.need(plan) <= budget:
            best = plan  # larger segment budgets give fewer, longer segments
    if best is None:
        raise BudgetTooSmall(_too_small(chain, budget))
    return best


def _optimal(chain: Chain, budget: int, longest: int | None = None) -> list[Segment]:
    """Exact dynamic programming over prefixes. Every moment of a segment depends only on
    what the layers before it hold, so a prefix is described by (its recompute, bytes it
    holds); a state that costs no more and holds no more than another dominates it, and
    each prefix keeps only the states no other beats on both (its Pareto front)."""
    n = chain.layers
    full, after = chain.full, chain.after
    if chain.floor > budget:
        raise BudgetTooSmall(_too_small(chain, budget))
    # fronts[i][recompute] = (held, worst, back-pointer (i', recompute'), segment's
    # (start, stop, mode): made a Segment only on the way back, as most states are beaten)
    fronts: list[dict[float, tuple]] = [{} for _ in range(n + 1)]
    fronts[0][0] = (chain.base, 0, None, None)

    def offer(j: int, redo: float, held: int, worst: int, back: tuple, seg: tuple) -> None:
        old = fronts[j].get(redo)
        if old is None or (held, worst) < (old[0], old[1]):
            fronts[j][redo] = (held, worst, back, seg)

    for i in range(n):
        for redo, (held, worst, _, _) in _pareto(fronts[i]):
            if (moment := held + full[i] + after[i]) <= budget:  # keep layer i
                kept = (i, i + 1, "keep")
                offer(i + 1, redo, held + full[i], max(worst, moment), (i, redo), kept)
            rebuilt, seg_worst = 0, worst
            for j in range(i + 1, min(n, i + (longest or n)) + 1):  # checkpoint [i, j)
                rebuilt += full[j - 1]
                seg_worst = max(seg_worst, held + rebuilt + after[j - 1])
                if seg_worst > budget:
                    break
                offer(
                    j,
                    redo + chain.segment_cost(i, j),
                    held + chain.inputs[i],
                    seg_worst,
                    (i, redo),
                    (i, j, "checkpoint"),
                )
    ends = {redo: state for redo, state in fronts[n].items() if state[0] + chain.top <= budget}
    if not ends:
        raise BudgetTooSmall(_too_small(chain, budget))
    redo = min(ends, key=lambda r: (r, max(ends[r][0] + chain.top, ends[r][1])))
    plan, at = [], (n, redo)
    while at[0] != 0:
        _, _, back, seg = fronts[at[0]][at[1]]
        plan.append(Segment(*seg))
        at = back
    return _merge_keeps(plan[::-1])


def _pareto(front: dict[float, tuple]) -> list[tuple[float, tuple]]:
    """The states no other state beats on both recompute and held bytes."""
    kept, least_held = [], None
    for redo in sorted(front):
        if least_held is None or front[redo][0] < least_held:
            kept.append((redo, front[redo]))
            least_held = front[redo][0]
    return kept


def _merge_keeps(plan: list[Segment]) -> list[Segment]:
    merged: list[Segment] = []
    for seg in plan:
        if merged and seg.mode == "keep" and merged[-1].mode == "keep":
            merged[-1] = Segment(merged[-1].start, seg.stop, "keep")
        else:
            merged.append(seg)
    return merged


def _too_small(chain: Chain, budget: int) -> str:
    least = chain.need(_every(chain.layers))
    return (
        f"budget {format_bytes(budget)} is too small for {chain.layers} layers: even "
        f"checkpointing every layer needs {format_bytes(least)} ({least} bytes)"
    )
