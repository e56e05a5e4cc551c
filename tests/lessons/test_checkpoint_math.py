"""The formulas behind the lessons, checked against the figures in FACTS.md."""

from __future__ import annotations

import math

import pytest

from lessons import checkpoint_math as cm
from lessons.values import SEED


@pytest.fixture
def worked() -> cm.TransformerActivations:
    return cm.transformer_activations(SEED["batch"], SEED["seq"], SEED["hidden"], SEED["layers"])


def test_worked_example_all_kept_is_4_0_gb(worked):
    assert worked.all_kept == 34 * 2 * 1_024 * 2_048 * 28
    assert round(worked.all_kept / cm.GB, 1) == 4.0


def test_worked_example_checkpointed_inputs_are_0_23_gb(worked):
    assert worked.checkpoint_inputs == 2 * 2 * 1_024 * 2_048 * 28
    assert round(worked.checkpoint_inputs / cm.GB, 2) == 0.23


def test_worked_example_one_layer_rebuilt_is_0_14_gb(worked):
    assert worked.one_layer_rebuilt == 34 * 2 * 1_024 * 2_048
    assert round(worked.one_layer_rebuilt / cm.GB, 2) == 0.14
    assert worked.checkpointed == worked.checkpoint_inputs + worked.one_layer_rebuilt


def test_logits_of_the_worked_example_are_2_0_gb():
    size = cm.logits_bytes(2, 1_024, 248_000, 4)
    assert size == 2 * 1_024 * 248_000 * 4
    assert round(size / cm.GB, 1) == 2.0


def test_korthikanti_parts_add_up_to_the_full_formula():
    b, s, h, a = 2, 1_024, 2_048, 16
    parts = cm.layer_activation_parts(b, s, h, a, efficient_attention=False)
    assert sum(parts.values()) == pytest.approx(s * b * h * (34 + 5 * a * s / h))
    assert cm.layer_activation_bytes(b, s, h, a, efficient_attention=True) == 34 * s * b * h


def test_selective_recomputation_saves_about_70_percent_on_gpt3():
    saving = cm.selective_saving(seq=2_048, hidden=12_288, heads=96)
    assert saving == pytest.approx(80 / 114)
    assert round(saving * 100) == 70


@pytest.mark.parametrize("layers", [4, 9, 16, 25, 100, 1_024])
def test_segment_memory_is_smallest_at_sqrt_n(layers):
    root = math.isqrt(layers)
    assert cm.best_segment_count(layers) == root
    assert cm.optimal_segments(layers) == pytest.approx(root)
    assert cm.segment_memory(layers, root) == pytest.approx(2 * root)
    assert cm.minimum_memory(layers) == pytest.approx(2 * math.sqrt(layers))
    for k in range(1, layers + 1):
        assert cm.segment_memory(layers, k) >= cm.segment_memory(layers, root)


def test_segment_memory_is_k_plus_n_over_k():
    assert cm.segment_memory(16, 2) == 2 + 8
    assert cm.segment_memory(16, 4, boundary=1, layer=17) == 4 + 4 * 17
    with pytest.raises(ValueError):
        cm.segment_memory(16, 0)


@pytest.mark.parametrize("layers", [8, 16, 28, 32])
def test_a_transformer_layer_is_best_checkpointed_every_layer(layers):
    # A checkpoint is 2·sbh, the layer keeps 34·sbh: the best whole segment is one layer.
    assert cm.best_segment_length(layers, boundary=2, layer=34) == 1
    assert cm.internals_ratio() == 16


def test_a_simple_chain_prefers_longer_segments():
    assert cm.best_segment_length(16, 1, 1) == 4
    assert cm.optimal_segment_length(28, 2, 34) == pytest.approx(math.sqrt(28 / 17))


@pytest.mark.parametrize("power", [1, 2, 4, 6, 10])
def test_recursive_variant_is_logarithmic_in_memory(power):
    layers = 2**power
    cost = cm.recursive_cost(layers)
    # Forward pass + (n/2)·log2(n) to reach the midpoints + one rebuild per layer.
    assert cost.forwards == layers + layers * power // 2 + layers
    assert cost.peak_boundaries == power + 2


def test_recursive_variant_handles_odd_lengths_and_rejects_zero():
    assert cm.recursive_cost(1) == cm.RecursiveCost(1, 2, 2)
    assert cm.recursive_cost(7).forwards > 7
    with pytest.raises(ValueError):
        cm.recursive_cost(0)


def test_budget_walk_places_a_checkpoint_when_the_running_size_passes_the_budget():
    plan = cm.budget_placement([1.0] * 10, 2.0)
    assert plan.checkpoints == (2, 5, 8)
    assert plan.stored == 3
    assert plan.largest_segment == 3
    assert plan.memory == 6
    assert plan.segments(10) == [(0, 2), (3, 5), (6, 8), (9, 9)]


def test_budget_walk_follows_the_sizes():
    sizes = [4.0] * 4 + [1.0] * 8
    plan = cm.budget_placement(sizes, 5.0)
    assert plan.checkpoints == (1, 3, 9)  # dense where outputs are large
    assert cm.budget_placement(sizes, 100.0).checkpoints == ()
    best = cm.best_budget(sizes, [float(b) for b in range(1, 25)])
    assert best.memory == min(cm.budget_placement(sizes, float(b)).memory for b in range(1, 25))


def test_recomputation_costs_at_most_a_third_of_a_step():
    assert cm.recompute_overhead() == pytest.approx(1 / 3)
    assert cm.recompute_overhead(backward_ratio=2, extra_forwards=0) == 0
    assert cm.percent_change(19.6, 27.2) == pytest.approx(0.3878, abs=1e-4)


@pytest.mark.parametrize(("size", "text"), [
    (4.0e9, "4.0 GB"), (0.23e9, "0.23 GB"), (0, "0.00 GB"),  # the sources' style
    (38_853_467.7e9, "39 PB"), (536_870.9e9, "537 TB"),  # a calculator at its maxima
    (3.2e6, "3.2 MB"), (4_096, "4.1 kB"), (64, "64 bytes"),  # and at its minima
])
def test_format_gb_stays_readable_at_the_extremes(size: float, text: str) -> None:
    assert cm.format_gb(size) == text
