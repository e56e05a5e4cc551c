"""A step-by-step simulation of one training step on a chain of N layers.

Layer i (1..N) reads its input x[i-1] (one unit of memory) and computes internals (r units:
everything else its backward needs). Backward through layer i needs x[i-1] and its
internals; a layer's internals come back only by running its forward again from its input.
Layer N's output goes straight into the loss, so x[N] is not tracked.

Four strategies:

* ``keep-all``: keep every input and all internals. N forwards; peak N·(1+r).
* ``recompute-all``: keep only x[0]; before each layer's backward, run forward from x[0]
  again (the "memory-poor" backprop). N + N(N+1)/2 forwards; peak 3 + r (N >= 3).
* ``every-layer``: keep every layer's input (a checkpoint), drop internals, rebuild one
  layer at a time in backward. 2N forwards; peak N + r.
* ``sqrt``: keep the input of every ⌈√N⌉-th layer; rebuild a whole segment at a time in
  backward. 2N forwards; peak = checkpoints + one segment's inputs and internals.

Each step records, *during* that step, the state of every input and every layer's internals,
the memory in use (units of one layer input) and the forward computations so far.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from i18n import DEFAULT, N_, gettext

Strategy = Literal["keep-all", "recompute-all", "every-layer", "sqrt"]
STRATEGIES: tuple[Strategy, ...] = ("keep-all", "recompute-all", "every-layer", "sqrt")
STRATEGY_LABELS: dict[str, str] = {  # marked N_: word them with `strategy_label`
    "keep-all": N_("Keep everything"),
    "recompute-all": N_("Keep nothing (recompute from the input)"),
    "every-layer": N_("Checkpoint every layer"),
    "sqrt": N_("Checkpoint every √N layers"),
}


def strategy_label(strategy: str, code: str = DEFAULT) -> str:
    """The stepper strategy's name in language `code`."""
    return gettext(code, STRATEGY_LABELS[strategy])



Phase = Literal["forward", "recompute", "backward"]

# Item states, as seen during a step: ids; their words are STATE_LABELS.
NOT_YET = "not-yet"
HELD = "held"
TRANSIENT = "transient"
DROPPED = "dropped"
RECOMPUTED = "recomputed"
FREED = "freed"
STATES: tuple[str, ...] = (NOT_YET, HELD, TRANSIENT, DROPPED, RECOMPUTED, FREED)
IN_MEMORY = frozenset({HELD, TRANSIENT, RECOMPUTED})
STATE_LABELS: dict[str, str] = {
    NOT_YET: N_("not computed yet"),
    HELD: N_("in memory"),
    TRANSIENT: N_("in memory, dropped after this step"),
    DROPPED: N_("dropped (will be recomputed)"),
    RECOMPUTED: N_("recomputed, in memory"),
    FREED: N_("freed (backward is done with it)"),
}


def state_label(state: str, code: str = DEFAULT) -> str:
    """An item state's words in language `code`."""
    return gettext(code, STATE_LABELS[state])


@dataclass(frozen=True)
class Step:
    index: int  # 0-based
    phase: Phase
    layer: int  # 1-based layer this step works on
    message: str  # what happens, an English message marked N_ with {named} placeholders
    params: tuple[tuple[str, int], ...]  # the placeholders' values (layer numbers)
    inputs: tuple[str, ...]  # state of x[0..N-1] (the input of layers 1..N) during the step
    internals: tuple[str, ...]  # state of the internals of layers 1..N during the step
    memory: float  # units in memory during the step
    forwards: int  # layer forward computations so far, this step included

    def describe(self, code: str = DEFAULT) -> str:
        """What happens in this step, in language `code`."""
        return gettext(code, self.message, **dict(self.params))

    @property
    def text(self) -> str:
        """What happens in this step, in English."""
        return self.describe(DEFAULT)


@dataclass(frozen=True)
class Simulation:
    strategy: Strategy
    layers: int
    ratio: float  # a layer's internals, in units of its input
    checkpoints: tuple[int, ...]  # indices j of the inputs x[j] kept through the forward
    steps: tuple[Step, ...]

    @property
    def peak(self) -> float:
        return max(step.memory for step in self.steps)

    @property
    def forwards(self) -> int:
        return self.steps[-1].forwards

    @property
    def recomputations(self) -> int:
        return self.forwards - self.layers

    def peak_so_far(self, index: int) -> float:
        return max(step.memory for step in self.steps[: index + 1])


def sqrt_spacing(layers: int) -> int:
    """Layers per segment for the √N strategy: ⌈√N⌉ rounded to the nearest whole number."""
    return max(1, round(math.sqrt(layers)))


def checkpoint_indices(strategy: Strategy, layers: int) -> tuple[int, ...]:
    """The inputs x[j] a strategy keeps through the forward pass."""
    if strategy in ("keep-all", "every-layer"):
        return tuple(range(layers))
    if strategy == "recompute-all":
        return (0,)
    if strategy == "sqrt":
        return tuple(range(0, layers, sqrt_spacing(layers)))
    raise ValueError(f"unknown strategy {strategy!r}")


# An action: (phase, layer, message and its parameters, items created with their state,
# items dropped with theirs).
Item = tuple[str, int]  # ("in", j) for x[j], ("int", i) for layer i's internals
Message = tuple[str, dict[str, int]]
Action = tuple[Phase, int, Message, list[tuple[Item, str]], list[tuple[Item, str]]]


def _forward_pass(layers: int, keep: set[int], keep_internals: bool) -> Iterator[Action]:
    for i in range(1, layers + 1):
        created: list[tuple[Item, str]] = [(("int", i), HELD)]
        if i < layers:
            created.append((("in", i), HELD))
        dropped: list[tuple[Item, str]] = []
        if not keep_internals:
            dropped.append((("int", i), DROPPED))
        if i - 1 not in keep:
            dropped.append((("in", i - 1), DROPPED))
        if keep_internals:
            text = N_("Forward through layer {layer}: keep its input and everything it "
                      "computes.")
        elif i - 1 in keep:
            text = N_("Forward through layer {layer}: its input is a checkpoint, so it stays; "
                      "the layer's internals are dropped as soon as its output exists.")
        else:
            text = N_("Forward through layer {layer}: use its input, then drop it and the "
                      "layer's internals; only the output moves on.")
        yield "forward", i, (text, {"layer": i}), created, dropped


def _backward(layer: int) -> Action:
    dropped: list[tuple[Item, str]] = [(("int", layer), FREED), (("in", layer - 1), FREED)]
    return ("backward", layer,
            (N_("Backward through layer {layer}: its input and internals give its gradients; "
                "then both are freed."), {"layer": layer}), [], dropped)


def _actions(strategy: Strategy, layers: int) -> Iterator[Action]:
    keep = set(checkpoint_indices(strategy, layers))
    yield from _forward_pass(layers, keep, keep_internals=strategy == "keep-all")
    if strategy == "keep-all":
        for i in range(layers, 0, -1):
            yield _backward(i)
        return
    if strategy == "recompute-all":
        for i in range(layers, 0, -1):
            for m in range(1, i):
                dropped: list[tuple[Item, str]] = [(("int", m), DROPPED)]
                if m - 1 != 0:
                    dropped.append((("in", m - 1), DROPPED))
                yield ("recompute", m,
                       (N_("Rebuilding the input of layer {layer}: run layer {other} forward "
                           "again (from the batch), keep only its output."),
                        {"layer": i, "other": m}),
                       [(("int", m), RECOMPUTED), (("in", m), RECOMPUTED)], dropped)
            yield ("recompute", i,
                   (N_("Run layer {layer} forward again from its rebuilt input to get its "
                       "internals."), {"layer": i}),
                   [(("int", i), RECOMPUTED)], [])
            yield _backward(i)
        return
    starts = sorted(keep)
    for position in range(len(starts) - 1, -1, -1):
        first = starts[position] + 1
        last = starts[position + 1] if position + 1 < len(starts) else layers
        for m in range(first, last + 1):
            created: list[tuple[Item, str]] = [(("int", m), RECOMPUTED)]
            if m < last:
                created.append((("in", m), RECOMPUTED))
            message: Message
            if last > first:
                message = (N_("Rebuild the segment of layers {first}–{last} from its "
                              "checkpoint: run layer {layer} forward again and keep what it "
                              "computes."), {"first": first, "last": last, "layer": m})
            else:
                message = (N_("Rebuild layer {layer} from its checkpointed input: run it "
                              "forward again and keep its internals."), {"layer": m})
            yield "recompute", m, message, created, []
        for m in range(last, first - 1, -1):
            yield _backward(m)


def simulate(strategy: Strategy, layers: int, ratio: float = 1.0) -> Simulation:
    """Run one training step of `strategy` on `layers` layers whose internals are `ratio`
    times their input."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}")
    if layers < 1:
        raise ValueError("layers must be at least 1")
    if ratio < 0:
        raise ValueError("ratio must be >= 0")
    inputs = [NOT_YET] * layers
    internals = [NOT_YET] * layers
    inputs[0] = HELD  # the batch itself
    size = {"in": 1.0, "int": float(ratio)}

    def states(kind: str) -> list[str]:
        return inputs if kind == "in" else internals

    steps: list[Step] = []
    forwards = 0
    for index, (phase, layer, (message, params), created, dropped) in enumerate(
            _actions(strategy, layers)):
        for (kind, number), state in created:
            states(kind)[number if kind == "in" else number - 1] = state
        if phase in ("forward", "recompute"):
            forwards += 1
        view_inputs, view_internals = list(inputs), list(internals)
        for (kind, number), _ in dropped:
            view = view_inputs if kind == "in" else view_internals
            view[number if kind == "in" else number - 1] = TRANSIENT
        memory = sum(size["in"] for state in view_inputs if state in IN_MEMORY) + sum(
            size["int"] for state in view_internals if state in IN_MEMORY)
        steps.append(Step(index, phase, layer, message, tuple(sorted(params.items())),
                          tuple(view_inputs),
                          tuple(view_internals), memory, forwards))
        for (kind, number), state in dropped:
            states(kind)[number if kind == "in" else number - 1] = state
    return Simulation(strategy, layers, float(ratio), checkpoint_indices(strategy, layers),
                      tuple(steps))


SUMMARY_COLUMNS: dict[str, str] = {  # column id -> its header, marked N_
    "strategy": N_("Strategy"),
    "forwards": N_("Forward computations"),
    "extra": N_("Extra forwards"),
    "peak": N_("Peak memory (units)"),
    "steps": N_("Steps"),
}


def summary_rows(layers: int, ratio: float) -> list[dict[str, object]]:
    """One row per strategy (its id under "strategy"): forwards, recomputations and peak
    memory, keyed by the ids of SUMMARY_COLUMNS."""
    rows = []
    for strategy in STRATEGIES:
        result = simulate(strategy, layers, ratio)
        rows.append({
            "strategy": strategy,
            "forwards": result.forwards,
            "extra": result.recomputations,
            "peak": result.peak,
            "steps": len(result.steps),
        })
    return rows
