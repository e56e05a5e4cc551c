"""Lesson 1's calculator: bytes per parameter, presets, and what checkpointing changes."""

from __future__ import annotations

import pytest

from lessons.checkpoint_math import GB
from lessons.memory_calculator import (
    COMPONENTS,
    PRESETS,
    TrainingSetup,
    breakdown,
    bytes_per_parameter,
    transformer_params,
)


def test_mixed_precision_adamw_is_18_bytes_per_parameter():
    assert bytes_per_parameter("mixed", "adamw") == 18
    assert bytes_per_parameter("fp32", "adamw") == 16
    assert bytes_per_parameter("mixed", "sgd") == 10


def test_presets_cover_the_seed_model_gpt2_small_and_an_8b_model():
    assert set(PRESETS) == {"seed-2b", "gpt2-small", "8b"}
    seed = PRESETS["seed-2b"].setup
    assert (seed.hidden, seed.layers, seed.vocab, seed.batch, seed.tokens) == (
        2_048, 28, 248_000, 2, 1_024)
    assert 1.5e9 < seed.params < 2.5e9  # "2B-class"
    assert PRESETS["gpt2-small"].setup.params == 124_000_000
    assert round(PRESETS["8b"].setup.params / 1e9) == 8


def test_seed_preset_reproduces_the_worked_example():
    parts = breakdown(PRESETS["seed-2b"].setup).in_gb()
    assert round(parts["activations"], 1) == 4.0
    assert round(parts["logits"], 1) == 2.0
    checkpointed = breakdown(PRESETS["seed-2b"].setup, checkpointing=True)
    assert checkpointed.activations == 2 * 2 * 1_024 * 2_048 * 28 + 34 * 2 * 1_024 * 2_048


def test_checkpointing_changes_only_the_activations():
    setup = PRESETS["8b"].setup
    plain, checkpointed = breakdown(setup), breakdown(setup, checkpointing=True)
    for component in COMPONENTS:
        if component == "activations":
            assert checkpointed.parts()[component] < plain.parts()[component] / 5
        else:
            assert checkpointed.parts()[component] == plain.parts()[component]


def test_activations_and_logits_scale_with_the_data_state_with_the_model():
    setup = TrainingSetup(params=1e9)
    double = setup.with_(batch=2 * setup.batch)
    a, b = breakdown(setup), breakdown(double)
    assert b.activations == pytest.approx(2 * a.activations)
    assert b.logits == pytest.approx(2 * a.logits)
    assert b.per_parameter_state == a.per_parameter_state
    assert a.weights == 6e9 and a.gradients == 4e9 and a.optimizer == 8e9


def test_fp32_doubles_the_activations():
    setup = TrainingSetup(params=1e9)
    assert breakdown(setup.with_(precision="fp32")).activations == pytest.approx(
        2 * breakdown(setup).activations)


def test_total_is_the_sum_of_the_parts_and_parameter_estimate():
    result = breakdown(PRESETS["gpt2-small"].setup)
    assert result.total == pytest.approx(sum(result.parts().values()))
    assert transformer_params(768, 12, 50_257) == pytest.approx(123.5e6, rel=0.01)
    assert result.total / GB > 1
