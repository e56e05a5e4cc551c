"""The reworked bank under the draw: every lesson asked, options shuffled per attempt and
frozen with it, grading by option identity (never by position or text)."""

from __future__ import annotations

import random

from quiz.bank import TOPICS, load_bank
from quiz.config import QUESTIONS_PER_ATTEMPT
from quiz.draw import DrawnQuestion, draw


def test_every_draw_covers_every_lesson() -> None:
    bank = load_bank()
    for seed in range(50):
        drawn = draw(bank, QUESTIONS_PER_ATTEMPT, random.Random(seed))
        assert {d.question.topic for d in drawn} == set(TOPICS)


def test_options_are_shuffled_per_attempt_and_grading_follows_identity() -> None:
    bank = load_bank()
    orders = set()
    for seed in range(30):
        for drawn in draw(bank, QUESTIONS_PER_ATTEMPT, random.Random(seed)):
            orders.add(drawn.order)
            shown_right = {drawn.options[i] for i in drawn.correct}
            assert shown_right == {drawn.question.options[i] for i in drawn.question.correct}
            # A reload reads the frozen draw back: same order, same right answers.
            again = DrawnQuestion.from_json(drawn.to_json())
            assert again.options == drawn.options and again.correct == drawn.correct
    assert len({order[0] for order in orders}) > 1  # the right option is not always first


def test_the_right_option_lands_anywhere() -> None:
    bank = load_bank()
    positions = {i for seed in range(30)
                 for d in draw(bank, QUESTIONS_PER_ATTEMPT, random.Random(seed))
                 for i in d.correct}
    assert positions >= {0, 1, 2, 3}
