"""Attempts, the cooldown and progress belong to the learner, not to the tab; the cooldown
after a failure holds the learner and every attempt from the same client address."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from quiz.attempts import Attempt, CooldownActive
from quiz.config import QUESTIONS_PER_ATTEMPT
from quiz.progress import MAX_ITEMS, ProgressStore
from quiz.service import QuizService, open_service
from quiz.signing import canonical_payload

LEARNER = "learner-aaaaaaaaaaaaaaaa"
OTHER = "learner-bbbbbbbbbbbbbbbb"
Finish = Callable[[QuizService, Attempt, int], Attempt]


@pytest.fixture
def cooled(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> QuizService:
    monkeypatch.setenv("QUIZ_COOLDOWN_SECONDS", "60")
    return open_service()


def test_a_new_tab_does_not_skip_the_cooldown(cooled: QuizService, finish: Finish) -> None:
    attempt = cooled.start_attempt(learner_id=LEARNER)
    finish(cooled, attempt, 0)
    # A new tab: no previous attempt id, the same learner (cookie).
    with pytest.raises(CooldownActive) as wait:
        cooled.start_attempt(learner_id=LEARNER)
    assert 55 <= wait.value.seconds_left <= 60
    assert cooled.wait_left(LEARNER) == wait.value.seconds_left
    cooled.start_attempt(learner_id=OTHER)  # another learner is not held


def test_a_learner_without_a_past_is_judged_by_the_address(
    cooled: QuizService, finish: Finish
) -> None:
    finish(cooled, cooled.start_attempt(learner_id=LEARNER, client="203.0.113.7"), 0)
    with pytest.raises(CooldownActive):  # a script dropping the cookie
        cooled.start_attempt(learner_id=OTHER, client="203.0.113.7")
    with pytest.raises(CooldownActive):
        cooled.start_attempt(client="203.0.113.7")
    cooled.start_attempt(learner_id=OTHER, client="198.51.100.1")


def test_every_attempt_from_an_address_that_failed_waits(
    cooled: QuizService, finish: Finish
) -> None:
    """A new cookie is a new learner to the server, so a failure from an address holds
    every attempt from it, a classmate's behind the same proxy too (docs/HOSTING.md);
    another address is not held."""
    mine = cooled.start_attempt(learner_id=OTHER, client="203.0.113.7")
    finish(cooled, cooled.start_attempt(learner_id=LEARNER, client="203.0.113.7"), 0)
    assert 55 <= cooled.wait_left(OTHER, "203.0.113.7") <= 60
    with pytest.raises(CooldownActive):
        cooled.answer(mine.id, 0, sorted(mine.questions[0].correct))
    with pytest.raises(CooldownActive):
        cooled.start_attempt(learner_id=OTHER, client="203.0.113.7")
    cooled.start_attempt(learner_id=OTHER, client="198.51.100.1")


def test_attempts_started_in_advance_under_fresh_cookies_wait_out_a_failure(
    cooled: QuizService, finish: Finish
) -> None:
    """Attempts started before a failure, each under a new cookie from one address, cannot
    be answered at once after it (a certificate 6.8 s after the failure, before)."""
    ahead = [cooled.start_attempt(learner_id=f"fresh-cookie-{number:04d}", client="192.0.2.8")
             for number in range(3)]
    finish(cooled, ahead[0], 0)
    for attempt in ahead[1:]:
        with pytest.raises(CooldownActive) as wait:
            cooled.answer(attempt.id, 0, sorted(attempt.questions[0].correct))
        assert wait.value.seconds_left >= 55
        assert cooled.attempt(attempt.id).answers == {}  # nothing was locked


def test_the_certificate_records_and_signs_the_attempts_taken(
    service: QuizService, finish: Finish
) -> None:
    for _ in range(2):
        finish(service, service.start_attempt(learner_id=LEARNER), 0)
    third = finish(service, service.start_attempt(learner_id=LEARNER), QUESTIONS_PER_ATTEMPT)
    assert third.ordinal == 3
    certificate = service.issue(third.id, "Ada Lovelace", False)
    assert certificate.attempts == 3 and b'"attempts":3' in certificate.payload
    result = service.verify(certificate.id)
    assert result.valid and result.certificate is not None
    assert result.certificate.attempts == 3
    forged = canonical_payload({**certificate.signed_fields, "attempts": 1})
    assert not service.signer.verify(forged, certificate.signature)  # type: ignore[union-attr]


def test_progress_is_kept_per_learner(data_dir: Path) -> None:
    store = ProgressStore(data_dir)
    store.record(LEARNER, "lesson:why-memory")
    store.record(LEARNER, "lesson:recompute")
    store.record(LEARNER, "quiz:attempt", "abc")
    store.record(LEARNER, "quiz:attempt", "def")
    assert store.items(LEARNER, "lesson:") == {"why-memory": "1", "recompute": "1"}
    assert store.items(LEARNER, "quiz:attempt") == {"": "def"}
    assert store.items(OTHER) == {}
    store.forget(LEARNER, "quiz:attempt")
    assert store.items(LEARNER, "quiz:") == {}
    with pytest.raises(ValueError):
        store.record("no", "x")
    assert store.items("'; DROP TABLE progress; --") == {}


def test_progress_items_are_bounded(data_dir: Path) -> None:
    store = ProgressStore(data_dir)
    for number in range(MAX_ITEMS + 20):
        store.record(LEARNER, f"setting:{number}", "x")
    assert len(store.items(LEARNER)) == MAX_ITEMS
