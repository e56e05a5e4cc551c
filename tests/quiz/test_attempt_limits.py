"""Attempts started in advance cannot skip the cooldown, and starts are limited per learner
and per address."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from quiz.attempts import Attempt, AttemptStore, CooldownActive, TooManyStarts
from quiz.config import QUESTIONS_PER_ATTEMPT
from quiz.service import QuizService

Finish = Callable[[QuizService, Attempt, int], Attempt]


def _clocked(service: QuizService, now: list[float], **limits: int) -> None:
    service.attempts = AttemptStore(service.data_dir, ttl_seconds=3600, cooldown_seconds=60,
                                    clock=lambda: now[0], **limits)


def test_attempts_started_before_a_failure_wait_out_its_cooldown(
    service: QuizService, finish: Finish
) -> None:
    now = [10_000.0]
    _clocked(service, now)
    first, second, third = (service.start_attempt(learner_id="ahead-of-time")
                            for _ in range(3))
    finish(service, first, 0)  # fails
    now[0] += 5
    for waiting in (second, third):
        drawn = waiting.questions[0]
        with pytest.raises(CooldownActive) as wait:
            service.answer(waiting.id, 0, sorted(drawn.correct))
        assert 50 <= wait.value.seconds_left <= 55
    now[0] += 60  # the cooldown is over: the attempt goes on
    passed = finish(service, second, QUESTIONS_PER_ATTEMPT)
    assert passed.score.passed


def test_an_attempt_started_after_the_cooldown_is_not_held(
    service: QuizService, finish: Finish
) -> None:
    now = [10_000.0]
    _clocked(service, now)
    finish(service, service.start_attempt(learner_id="patient"), 0)
    now[0] += 61
    attempt = service.start_attempt(learner_id="patient")
    assert finish(service, attempt, QUESTIONS_PER_ATTEMPT).score.passed


def test_attempts_without_a_learner_are_held_by_their_address(
    service: QuizService, finish: Finish
) -> None:
    now = [10_000.0]
    _clocked(service, now)
    first = service.start_attempt(client="203.0.113.9")
    second = service.start_attempt(client="203.0.113.9")
    other = service.start_attempt(client="198.51.100.1")
    finish(service, first, 0)
    with pytest.raises(CooldownActive):
        service.answer(second.id, 0, sorted(second.questions[0].correct))
    assert finish(service, other, QUESTIONS_PER_ATTEMPT).score.passed  # another address is not held


def test_unfinished_starts_are_limited_per_learner_and_per_address(
    service: QuizService, finish: Finish
) -> None:
    now = [10_000.0]
    _clocked(service, now, open_per_learner=3, open_per_address=5)
    held = [service.start_attempt(learner_id="hoarder", client="192.0.2.1") for _ in range(3)]
    with pytest.raises(TooManyStarts):
        service.start_attempt(learner_id="hoarder", client="192.0.2.1")
    finish(service, held[0], QUESTIONS_PER_ATTEMPT)  # a finished attempt frees its place
    service.start_attempt(learner_id="hoarder", client="192.0.2.1")
    # Fresh learner ids from one address (a script without the cookie) meet the address's.
    service.start_attempt(learner_id="new-1", client="192.0.2.1")
    service.start_attempt(learner_id="new-2", client="192.0.2.1")
    with pytest.raises(TooManyStarts) as wait:
        service.start_attempt(learner_id="new-3", client="192.0.2.1")
    assert 0 < wait.value.seconds_left <= 3600
    service.start_attempt(learner_id="new-3", client="192.0.2.2")  # another address
    now[0] += 3601  # the window has passed (the old attempts are expired too)
    service.start_attempt(learner_id="new-4", client="192.0.2.1")


def test_two_hundred_starts_from_one_address_are_not_all_accepted(
    service: QuizService
) -> None:
    accepted = 0
    for number in range(200):
        try:
            service.start_attempt(learner_id=f"script-{number}", client="192.0.2.50")
        except TooManyStarts:
            continue
        accepted += 1
    assert accepted == 100
