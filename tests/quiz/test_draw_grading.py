"""The draw (spread over the lessons, shuffled, frozen) and the grading."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from quiz.bank import TOPICS, default_bank
from quiz.config import QUESTIONS_PER_ATTEMPT, QUESTIONS_PER_LESSON
from quiz.draw import DrawnQuestion, draw
from quiz.grading import Score, check_choice, feedback


def test_a_draw_spreads_over_every_lesson() -> None:
    for seed in range(20):
        drawn = draw(default_bank(), 12, random.Random(seed))
        assert len(drawn) == 12
        assert len({d.question.id for d in drawn}) == 12
        counts = Counter(d.question.topic for d in drawn)
        assert set(counts) == set(TOPICS)
        assert max(counts.values()) <= 2


def test_an_attempt_asks_every_lesson_twice() -> None:
    """The service's count: each lesson, the last one (many GPUs) included, gets exactly
    QUESTIONS_PER_LESSON questions, with the previous attempt avoided too."""
    assert QUESTIONS_PER_LESSON == 2 and 2 * len(TOPICS) == QUESTIONS_PER_ATTEMPT
    bank = default_bank()
    for seed in range(200):
        drawn = draw(bank, QUESTIONS_PER_ATTEMPT, random.Random(seed))
        assert Counter(d.question.topic for d in drawn) == dict.fromkeys(TOPICS, 2), seed
        seen = frozenset(d.question.id for d in drawn)
        again = draw(bank, QUESTIONS_PER_ATTEMPT, random.Random(seed + 7), avoid=seen)
        assert Counter(d.question.topic for d in again) == dict.fromkeys(TOPICS, 2), seed


def test_one_seed_one_draw() -> None:
    bank = default_bank()
    first = draw(bank, QUESTIONS_PER_ATTEMPT, random.Random(11))
    assert draw(bank, QUESTIONS_PER_ATTEMPT, random.Random(11)) == first
    assert draw(bank, QUESTIONS_PER_ATTEMPT, random.Random(12)) != first


def test_draws_differ_and_shuffle_the_options() -> None:
    first = draw(default_bank(), 12, random.Random(1))
    second = draw(default_bank(), 12, random.Random(2))
    assert [d.question.id for d in first] != [d.question.id for d in second]
    orders = [d.order for d in first]
    assert any(order != tuple(range(len(order))) for order in orders)
    for d in first:
        assert sorted(d.order) == list(range(len(d.question.options)))


def test_the_shown_options_map_back_to_the_bank() -> None:
    for d in draw(default_bank(), 12, random.Random(7)):
        shown_right = {d.options[i] for i in d.correct}
        bank_right = {d.question.options[i] for i in d.question.correct}
        assert shown_right == bank_right
        for shown in range(len(d.options)):
            bank_index = d.question.options.index(d.options[shown])
            assert d.explanation(shown) == d.question.explanations[bank_index]


def test_a_frozen_draw_survives_json() -> None:
    for d in draw(default_bank(), 12, random.Random(3)):
        assert DrawnQuestion.from_json(d.to_json()) == d


def test_feedback_marks_exact_choice_only() -> None:
    multi = next(d for d in draw(default_bank(), 38, random.Random(4)) if d.question.multiple)
    right = sorted(multi.correct)
    assert feedback(multi, right).is_correct
    assert not feedback(multi, right[:1]).is_correct  # a partial answer is not right
    wrong = next(i for i in range(len(multi.order)) if i not in multi.correct)
    assert not feedback(multi, [*right, wrong]).is_correct


def test_impossible_answers_are_refused() -> None:
    single = next(d for d in draw(default_bank(), 38, random.Random(5)) if not d.question.multiple)
    with pytest.raises(ValueError, match="at least one"):
        check_choice(single, [])
    with pytest.raises(ValueError, match="does not exist"):
        check_choice(single, [99])
    with pytest.raises(ValueError, match="one answer"):
        check_choice(single, [0, 1])


@pytest.mark.parametrize(
    ("correct", "total", "percent", "passed"),
    [
        (12, 12, 100, True),
        (10, 12, 83, True),
        (9, 12, 75, False),
        (8, 10, 80, True),
        (7, 10, 70, False),
        (0, 12, 0, False),
        (0, 0, 0, False),
    ],
)
def test_score_and_pass_mark(correct: int, total: int, percent: int, passed: bool) -> None:
    score = Score(correct, total)
    assert score.percent == percent
    assert score.passed is passed
