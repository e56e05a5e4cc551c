"""The reworked bank under the draw: every lesson asked, options shuffled per attempt and
frozen with it, grading by option identity (never by position or text)."""

from __future__ import annotations

import dataclasses
import random

from quiz.bank import MIN_APPLY_PER_DRAW, TOPICS, load_bank
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


def test_every_draw_holds_two_apply_items() -> None:
    bank = load_bank()
    assert sum(q.applies for q in bank) >= 6
    seen = set()
    for seed in range(200):
        drawn = draw(bank, QUESTIONS_PER_ATTEMPT, random.Random(seed))
        applying = [d.question for d in drawn if d.question.applies]
        assert len(applying) >= MIN_APPLY_PER_DRAW, seed
        assert {d.question.topic for d in drawn} == set(TOPICS)
        assert len({d.question.id for d in drawn}) == QUESTIONS_PER_ATTEMPT
        seen.update(q.id for q in applying)
        again = DrawnQuestion.from_json(drawn[0].to_json())
        assert again.question.tags == drawn[0].question.tags
    assert seen == {q.id for q in bank if q.applies}  # every apply item comes up


def test_the_apply_rule_holds_with_items_added_later() -> None:
    """New untagged items (a teacher's, or a whole new group) neither break the rule nor the
    turns of the lessons; a frozen attempt from before tags existed still reads back."""
    bank = list(load_bank())
    extra = [dataclasses.replace(bank[0], id=f"added-{i}", topic=topic)
             for i, topic in enumerate(TOPICS * 5)]
    for seed in range(100):
        drawn = draw([*bank, *extra], QUESTIONS_PER_ATTEMPT, random.Random(seed))
        assert sum(d.question.applies for d in drawn) >= MIN_APPLY_PER_DRAW
        assert {d.question.topic for d in drawn} == set(TOPICS)
    old = draw(bank, 3, random.Random(1))[0].to_json()
    del old["tags"]
    assert DrawnQuestion.from_json(old).question.tags == frozenset()


def test_a_bank_without_apply_items_still_draws() -> None:
    bank = [dataclasses.replace(q, tags=frozenset()) for q in load_bank()]
    drawn = draw(bank, QUESTIONS_PER_ATTEMPT, random.Random(3))
    assert len(drawn) == QUESTIONS_PER_ATTEMPT
    assert {d.question.topic for d in drawn} == set(TOPICS)


def test_a_new_attempt_asks_none_of_the_previous_attempts_questions() -> None:
    bank = load_bank()
    for seed in range(50):
        first = draw(bank, QUESTIONS_PER_ATTEMPT, random.Random(seed))
        seen = frozenset(d.question.id for d in first)
        second = draw(bank, QUESTIONS_PER_ATTEMPT, random.Random(seed + 1000), avoid=seen)
        again = {d.question.id for d in second} & seen
        # only an apply item, and only when the bank's other apply items are too few
        fresh_apply = sum(q.applies and q.id not in seen for q in bank)
        assert len(again) <= max(0, MIN_APPLY_PER_DRAW - fresh_apply)
        assert {d.question.topic for d in second} == set(TOPICS)  # the rules still hold
        assert sum(d.question.applies for d in second) >= MIN_APPLY_PER_DRAW


def test_a_small_bank_repeats_only_what_it_must() -> None:
    bank = load_bank()
    small = [q for q in bank if q.topic == bank[0].topic][:3]
    first = draw(small, 2, random.Random(1), min_apply=0)
    seen = frozenset(d.question.id for d in first)
    second = draw(small, 2, random.Random(2), min_apply=0, avoid=seen)
    assert len({d.question.id for d in second} & seen) == 1  # one new one left, then one again


def test_the_service_avoids_the_previous_attempts_questions(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    from quiz.service import open_service

    service = open_service()
    first = service.start_attempt(learner_id="learner")
    second = service.start_attempt(first.id, learner_id="learner")
    ids = {d.question.id for d in first.questions}
    fresh_apply = sum(q.applies and q.id not in ids for q in service.bank())
    again = ids & {d.question.id for d in second.questions}
    assert len(again) <= max(0, MIN_APPLY_PER_DRAW - fresh_apply)
