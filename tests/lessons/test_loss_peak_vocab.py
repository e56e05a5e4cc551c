"""Lesson 5 says from which vocabulary up the demo model's peak under every-layer
checkpointing sits at the loss. The number comes from the theory (lessons.values.
loss_peak_vocab); here the engine measures the model of the lesson's demo link one slider
step below that vocabulary and at it, and the peak must move from the layers to the loss
exactly there."""

from __future__ import annotations

import pytest

from demos.measure import compare
from i18n import format_decimal
from lessons.document import load
from lessons.values import LOGITS_DEMO, lesson_values, loss_peak_vocab
from memory.config import ModelConfig, slider_ranges
from memory.strategies import parse_strategies
from memory.theory import peak_cause

LESSON = "large-vocabularies"
AT_THE_LOSS = {"loss", "loss-backward"}  # memory.theory.peak_where's places in the loss


def measured_where(cfg: ModelConfig) -> str:
    comparison = compare(cfg, parse_strategies("every-layer"), device="cpu", time_steps=False,
                         limit_bytes=None)
    (result,) = [r for r in comparison.results if r.strategy == "every-layer"]
    cause = peak_cause(result)
    assert cause is not None, result.error
    return cause.where


def test_the_value_is_computed_for_the_model_of_the_lesson_s_demo_link() -> None:
    query = load(LESSON, lesson_values()).demo.query
    assert query["strategy"] == "every-layer"
    demo = {"layers": LOGITS_DEMO.layers, "hidden": LOGITS_DEMO.hidden,
            "heads": LOGITS_DEMO.heads, "seq": LOGITS_DEMO.seq_len,
            "batch": LOGITS_DEMO.batch, "dtype": LOGITS_DEMO.dtype}
    assert {name: query[name] for name in demo} == {k: str(v) for k, v in demo.items()}
    # and the link's own vocabulary is past the threshold: its peak is the one the text names
    assert int(query["vocab"]) >= loss_peak_vocab()


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_the_lesson_states_the_threshold_in_every_language(code: str) -> None:
    vocab = loss_peak_vocab()
    assert lesson_values(code)["loss_peak_vocab"] == format_decimal(vocab, code, 0)
    text = "".join(block.text for block in load(LESSON, lesson_values(code), code).blocks)
    assert format_decimal(vocab, code, 0) in text


def test_the_engine_moves_the_peak_to_the_loss_at_the_lesson_s_vocabulary() -> None:
    vocab = loss_peak_vocab()
    step = slider_ranges("cpu")["vocab"][2]
    assert measured_where(LOGITS_DEMO.replace(vocab=vocab - step)) not in AT_THE_LOSS
    assert measured_where(LOGITS_DEMO.replace(vocab=vocab)) in AT_THE_LOSS
