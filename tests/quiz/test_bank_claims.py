"""Quiz items an independent review found wrong, ambiguous or cued: each test
fails on the old bank (English, answer key and wording)."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from quiz.bank import Question, load_bank


@pytest.fixture(scope="module")
def bank() -> dict[str, Question]:
    return {q.id: q for q in load_bank()}


def _all_text(q: Question) -> str:
    return " ".join((q.prompt, *q.options, *q.explanations))


def test_use_cache_off_is_keyed_on_the_cache_being_state(bank):
    q = bank["use-cache-off"]
    assert q.correct == frozenset({0})
    assert "recomputed forward would append again" in q.options[0]
    assert "only costs memory" in q.options[1]  # the old key is now the distractor
    assert "not correctness of recomputation" not in _all_text(q)
    assert "CheckpointError" not in q.explanations[0]  # nothing fails: the cache doubles
    assert "each position twice" in q.explanations[0]


def test_fsdp_item_asks_where_the_checkpoint_sits_not_the_call_order(bank):
    q = bank["fsdp-order"]
    assert q.correct == frozenset({0})
    assert "Where should" in q.prompt and "order" not in q.prompt
    assert q.options[0].startswith("Inside that block's shard unit")
    assert "fully_shard" in q.explanations[1] and "FSDP1" in q.explanations[1]


def test_hf_switch_teaches_the_current_release_and_what_changed(bank):
    """transformers 5 renamed the switch and made use_reentrant=False its default; the item
    once taught 4.57.1's gradient_checkpointing_enable() and its reentrant default."""
    from lessons import facts

    installed = version("transformers")
    q = bank["hf-switch"]
    assert q.correct == frozenset({0})
    assert installed == facts.HF_TRANSFORMERS_VERSION
    assert f"transformers {installed}" in q.prompt
    assert "activation_checkpointing_enable()" in q.prompt
    assert "gradient_checkpointing_enable() with no arguments" not in q.prompt
    assert "use_reentrant=False" in q.explanations[0]
    assert facts.HF_TRANSFORMERS_OLD_VERSION in q.explanations[0]  # what changed from 4.x
    assert "use_reentrant=True" in q.options[1] or "Reentrant" in q.options[1]


def test_compiler_budget_is_not_a_share_of_activations_to_keep(bank):
    text = _all_text(bank["compiler-decides"])
    assert "share of activations to keep" not in text
    assert "fraction of its default activations" not in text
    assert "saves only the compiled graph's inputs" in text


def test_layer_boundaries_no_longer_claims_a_megatron_default(bank):
    q = bank["layer-boundaries"]
    assert "Megatron" not in q.prompt and "by default" not in q.prompt
    assert "--recompute-granularity full" in q.explanations[0]


def test_reworded_items_have_one_defensible_answer(bank):
    assert "layers 5 and 6" not in bank["recompute-from-nearest"].options[0]
    assert "shorter segments" in bank["win-back-time"].options[3]
    assert "log N times" not in _all_text(bank["recursive-variant"])
    assert "½·log₂N + 1" in _all_text(bank["recursive-variant"])
    assert "sequence parallelism" not in bank["accumulation-vs-checkpointing"].explanations[0]
    assert "side stream" in bank["offload-or-recompute"].explanations[2]


@pytest.mark.parametrize("qid", ["activations-vs-weights", "recursive-variant",
                                 "transformer-sqrt-flip", "vocab-sizes",
                                 "logits-vs-activations"])
def test_the_right_option_is_not_the_only_one_with_a_number(bank, qid):
    q = bank[qid]
    with_digit = {i for i, text in enumerate(q.options) if any(c.isdigit() for c in text)}
    assert with_digit - q.correct, qid


@pytest.mark.parametrize("qid", ["sdpa-fused-condition", "recursive-variant",
                                 "inference-effect"])
def test_no_option_leans_on_an_absolute(bank, qid):
    for option in bank[qid].options:
        assert not option.startswith(("Always", "Never", "Nothing")), option
        assert "strictly" not in option, option


def test_the_overhead_items_follow_what_torch_counts(bank):
    """Early stop, reentrant and frozen weights, worded with the lesson's counts (which a
    lessons test checks against torch's FLOP counter)."""
    from lessons.values import lesson_values

    values = lesson_values()
    early = _all_text(bank["early-stop"])
    assert values["demo_counted_overhead"] in early and "early" in early.lower()
    assert bank["early-stop"].correct == {0}
    assert "last linear" in bank["early-stop"].options[0]
    assert values["demo_counted_reentrant"] in bank["reentrant-reruns-all"].prompt
    assert "whole function" in bank["reentrant-reruns-all"].options[0]
    frozen = bank["frozen-weights-overhead"]
    assert values["frozen_overhead"] in frozen.options[0] and frozen.correct == {0}
    assert "+" + values["plan_every_extra"] in frozen.explanations[0]

THROW_AWAYS = ("It turns off the dataset cache on disk", "A copy of the block's weights on disk",
               "The model switches to 8-bit", "It disables checkpointing", "Stores them in 8-bit",
               "reused as the starting point of the next batch",
               "The LoRA weights are checkpointed to disk")


def test_no_throw_away_distractor_is_left(bank):
    """Options nobody who read the lesson would pick measure reading, not understanding."""
    options = " | ".join(o for q in bank.values() for o in q.options)
    for text in THROW_AWAYS:
        assert text not in options, text


def test_peak_at_loss_uses_the_lessons_crossover(bank):
    from lessons.values import lesson_values

    text = _all_text(bank["peak-at-loss"])
    assert "8k" not in text
    assert lesson_values()["loss_peak_vocab"] in text


def test_segments_tradeoff_uses_k_as_lesson_3_does(bank):
    """Lesson 3 defines k as the layers per segment; the item once used k for the number of
    segments (memory k + n/k)."""
    q = bank["segments-tradeoff"]
    assert "segments of k layers" in q.prompt
    assert "k checkpointed segments" not in q.prompt
    assert "n/k of them" in q.explanations[0] and "(k layers)" in q.explanations[0]


def test_expert_parallelism_next_to_fsdp_keys_what_it_changes_not_a_smaller_share(bank):
    """Lesson 8: with FSDP over all GPUs each GPU stores the same share of the experts
    either way; expert parallelism changes which experts' full weights a GPU computes
    with, and FSDP no longer gathers the others."""
    q = bank["ep-and-fsdp-divide"]
    assert q.correct == frozenset({0, 1})
    assert "its own experts only" in q.options[0]
    assert "stored share" in q.options[2] and "same share either way" in q.explanations[2]
    assert "Expert parallelism divides the experts' weights." not in q.options
