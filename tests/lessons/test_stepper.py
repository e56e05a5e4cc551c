"""The step-by-step simulation: exact forward counts, peaks and per-step states."""

from __future__ import annotations

import pytest

from lessons.stepper import (
    DROPPED,
    FREED,
    HELD,
    IN_MEMORY,
    NOT_YET,
    RECOMPUTED,
    STATES,
    STRATEGIES,
    TRANSIENT,
    checkpoint_indices,
    simulate,
    sqrt_spacing,
    summary_rows,
)

LAYERS = [1, 2, 3, 5, 8, 9, 16]
RATIOS = [0.0, 1.0, 4.0, 16.0]


@pytest.mark.parametrize("layers", LAYERS)
@pytest.mark.parametrize("ratio", RATIOS)
def test_keep_everything(layers, ratio):
    sim = simulate("keep-all", layers, ratio)
    assert sim.forwards == layers
    assert sim.recomputations == 0
    assert sim.peak == layers * (1 + ratio)
    assert len(sim.steps) == 2 * layers


@pytest.mark.parametrize("layers", LAYERS)
@pytest.mark.parametrize("ratio", RATIOS)
def test_keep_nothing_is_quadratic(layers, ratio):
    sim = simulate("recompute-all", layers, ratio)
    # The forward pass, then before backward through layer i: layers 1..i again.
    assert sim.forwards == layers + layers * (layers + 1) // 2
    assert len(sim.steps) == layers + layers * (layers + 1) // 2 + layers
    # The batch, the tensor being worked on, the next one, and one layer's internals.
    expected_peak = {1: 1 + ratio, 2: 2 + ratio}.get(layers, 3 + ratio)
    assert sim.peak == expected_peak


@pytest.mark.parametrize("layers", LAYERS)
@pytest.mark.parametrize("ratio", RATIOS)
def test_checkpoint_every_layer(layers, ratio):
    sim = simulate("every-layer", layers, ratio)
    assert sim.forwards == 2 * layers  # every layer exactly twice
    assert sim.peak == layers + ratio  # all inputs + one layer's internals
    assert len(sim.steps) == 3 * layers


@pytest.mark.parametrize("ratio", RATIOS)
def test_checkpoint_every_sqrt_n_layers(ratio):
    sim = simulate("sqrt", 16, ratio)
    assert sim.checkpoints == (0, 4, 8, 12)
    assert sim.forwards == 32
    # 4 checkpoints + the last segment rebuilt: 3 more inputs and 4 layers' internals.
    assert sim.peak == 4 + 3 + 4 * ratio
    nine = simulate("sqrt", 9, ratio)
    assert nine.checkpoints == (0, 3, 6)
    assert nine.peak == 3 + 2 + 3 * ratio


def test_sqrt_beats_every_layer_for_thin_layers_and_loses_for_transformer_layers():
    assert simulate("sqrt", 16, 1).peak < simulate("every-layer", 16, 1).peak
    assert simulate("sqrt", 16, 16).peak > simulate("every-layer", 16, 16).peak


def test_spacing_and_checkpoints():
    assert [sqrt_spacing(n) for n in (1, 4, 8, 9, 16, 24)] == [1, 2, 3, 3, 4, 5]
    assert checkpoint_indices("recompute-all", 5) == (0,)
    assert checkpoint_indices("every-layer", 3) == (0, 1, 2)
    with pytest.raises(ValueError):
        checkpoint_indices("bogus", 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        simulate("sqrt", 0)
    with pytest.raises(ValueError):
        simulate("sqrt", 4, -1)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("layers", [1, 4, 7])
def test_every_step_is_consistent(strategy, layers):
    ratio = 2.0
    sim = simulate(strategy, layers, ratio)
    forwards = 0
    backward_layers = []
    for index, step in enumerate(sim.steps):
        assert step.index == index
        assert set(step.inputs) <= set(STATES) and set(step.internals) <= set(STATES)
        memory = sum(1 for s in step.inputs if s in IN_MEMORY) + sum(
            ratio for s in step.internals if s in IN_MEMORY)
        assert step.memory == memory
        if step.phase in ("forward", "recompute"):
            forwards += 1
        assert step.forwards == forwards
        if step.phase == "backward":
            backward_layers.append(step.layer)
            # Backward through a layer needs its input and its internals in memory.
            assert step.inputs[step.layer - 1] in IN_MEMORY
            assert step.internals[step.layer - 1] in IN_MEMORY
    assert backward_layers == list(range(layers, 0, -1))
    last = sim.steps[-1]
    assert last.inputs[0] == TRANSIENT and last.internals[0] == TRANSIENT
    assert all(s == FREED for s in last.inputs[1:] + last.internals[1:])
    forward_steps = [s for s in sim.steps if s.phase == "forward"]
    assert [s.layer for s in forward_steps] == list(range(1, layers + 1))


def test_states_during_the_first_steps():
    sim = simulate("every-layer", 4, 1)
    first = sim.steps[0]
    assert first.inputs == (HELD, HELD, NOT_YET, NOT_YET)
    assert first.internals == (TRANSIENT, NOT_YET, NOT_YET, NOT_YET)
    assert sim.steps[1].internals[0] == DROPPED
    recompute = sim.steps[4]  # backward begins by rebuilding layer 4
    assert (recompute.phase, recompute.layer) == ("recompute", 4)
    assert recompute.internals[3] == RECOMPUTED
    assert recompute.text.startswith("Rebuild layer 4 from its checkpointed input")
    segment = simulate("sqrt", 8, 1).steps[8]  # the last segment, layers 7-8, is rebuilt first
    assert (segment.phase, segment.layer) == ("recompute", 7)
    assert "segment of layers 7–8" in segment.text
    assert sim.peak_so_far(0) == 3


def test_summary_rows_cover_all_four_strategies():
    rows = summary_rows(8, 1.0)
    assert [row["forwards"] for row in rows] == [8, 44, 16, 16]
    assert [row["peak"] for row in rows] == [16, 4, 9, 7]
