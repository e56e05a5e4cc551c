"""Attempts, the cooldown and progress belong to
the learner (and, for a learner without a past, to the client address), not to the tab."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from quiz.attempts import Attempt, CooldownActive
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


def test_a_learner_with_a_past_is_judged_by_their_own(
    cooled: QuizService, finish: Finish
) -> None:
    """Classmates behind one address: one's failure does not hold another who has their own
    history."""
    mine = cooled.start_attempt(learner_id=OTHER, client="203.0.113.7")
    finish(cooled, cooled.start_attempt(learner_id=LEARNER, client="203.0.113.7"), 0)
    assert cooled.wait_left(OTHER, "203.0.113.7") == 0
    finish(cooled, mine, 12)
    cooled.start_attempt(learner_id=OTHER, client="203.0.113.7")


def test_the_certificate_records_and_signs_the_attempts_taken(
    service: QuizService, finish: Finish
) -> None:
    for _ in range(2):
        finish(service, service.start_attempt(learner_id=LEARNER), 0)
    third = finish(service, service.start_attempt(learner_id=LEARNER), 12)
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
