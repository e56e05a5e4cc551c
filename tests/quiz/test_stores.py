"""The attempt and certificate stores on one SQLite file: answers lock, attempts expire,
cooldowns hold, certificates are issued once, verified, revoked, and survive 8 threads."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from quiz.attempts import AnswerOutOfTurn, Attempt, AttemptExpired, AttemptStore, CooldownActive
from quiz.certificate_records import Status
from quiz.certificates import CertificateStore
from quiz.config import QUESTIONS_PER_ATTEMPT
from quiz.names import NameError_
from quiz.service import NotEligible, QuizService
from storage.database import db_path, reading

Finish = Callable[[QuizService, Attempt, int], Attempt]


def test_an_attempt_is_frozen_on_the_server(service: QuizService) -> None:
    attempt = service.start_attempt()
    again = service.attempt(attempt.id)
    assert again.questions == attempt.questions
    assert again.next_position == 0 and not again.finished
    assert len(attempt.questions) == QUESTIONS_PER_ATTEMPT == 20  # two from each of 10 lessons


def test_answers_lock_and_a_changed_answer_is_ignored(service: QuizService) -> None:
    attempt = service.start_attempt()
    drawn = attempt.questions[0]
    wrong = next(i for i in range(len(drawn.order)) if i not in drawn.correct)
    first = service.answer(attempt.id, 0, [wrong])
    assert not first.is_correct
    changed = service.answer(attempt.id, 0, sorted(drawn.correct))  # a second tab, a replay
    assert changed == first and not changed.is_correct
    assert service.attempt(attempt.id).answers == {0: frozenset({wrong})}


def test_questions_are_answered_in_order(service: QuizService) -> None:
    attempt = service.start_attempt()
    with pytest.raises(AnswerOutOfTurn):
        service.answer(attempt.id, 3, [0])
    with pytest.raises(ValueError):
        service.answer(attempt.id, 0, [])


def test_finishing_scores_and_passes_at_80_percent(service: QuizService, finish: Finish) -> None:
    passed = finish(service, service.start_attempt(), 16)  # of 20
    assert passed.finished and passed.score.percent == 80 and passed.score.passed
    failed = finish(service, service.start_attempt(), 15)
    assert failed.finished and failed.score.percent == 75 and not failed.score.passed
    with sqlite3.connect(db_path(service.data_dir)) as raw:
        stored = raw.execute(
            "SELECT correct, total, passed FROM attempts WHERE id = ?", (failed.id,)
        ).fetchone()
    assert stored == (15, 20, 0)


def test_attempts_expire(data_dir: Path) -> None:
    now = [1_000_000.0]
    store = AttemptStore(data_dir, ttl_seconds=60, cooldown_seconds=0, clock=lambda: now[0])
    attempt = store.start([])
    assert store.get(attempt.id).id == attempt.id
    now[0] += 61
    with pytest.raises(AttemptExpired):
        store.get(attempt.id)
    for junk in ["", "nope", "x" * 10_000, "'; DROP TABLE attempts; --" + "a" * 20]:
        with pytest.raises(AttemptExpired):
            store.get(junk)


def test_a_failed_attempt_has_a_cooldown(service: QuizService, finish: Finish) -> None:
    now = [5_000.0]
    service.attempts = AttemptStore(
        service.data_dir, ttl_seconds=3600, cooldown_seconds=30, clock=lambda: now[0]
    )
    failed = finish(service, service.start_attempt(), 0)
    assert service.cooldown_left(failed) == 30
    with pytest.raises(CooldownActive) as wait:
        service.start_attempt(failed.id)
    assert wait.value.seconds_left == 30
    now[0] += 31
    retry = service.start_attempt(failed.id)
    assert retry.id != failed.id
    assert [q.question.id for q in retry.questions] != [q.question.id for q in failed.questions]
    passed = finish(service, retry, QUESTIONS_PER_ATTEMPT)
    assert service.cooldown_left(passed) == 0


def test_only_a_passed_attempt_earns_a_certificate(service: QuizService, finish: Finish) -> None:
    attempt = service.start_attempt()
    with pytest.raises(NotEligible):
        service.issue(attempt.id, "Ada", False)
    failed = finish(service, attempt, 12)
    with pytest.raises(NotEligible):
        service.issue(failed.id, "Ada", False)
    with pytest.raises(AttemptExpired):
        service.issue("no-such-attempt-id-at-all", "Ada", False)


def test_issuing_twice_returns_the_same_certificate(
    service: QuizService, passed_attempt: Attempt
) -> None:
    with pytest.raises(NameError_):
        service.issue(passed_attempt.id, "evil\u202eexe", True)
    first = service.issue(passed_attempt.id, "Jürgen Groß", True)
    second = service.issue(passed_attempt.id, "Somebody Else", False)
    assert second == first
    assert first.score == 100 and first.name == "Jürgen Groß"
    assert service.verify(first.id).status is Status.VALID
    assert len(service.all_certificates()) == 1


def test_eight_threads_issuing_at_once(service: QuizService, finish: Finish) -> None:
    attempts = [finish(service, service.start_attempt(), QUESTIONS_PER_ATTEMPT) for _ in range(8)]
    results: dict[int, str] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def issue(index: int) -> None:
        try:
            barrier.wait()
            results[index] = service.issue(attempts[index].id, f"Learner {index}", True).id
        except BaseException as error:  # collected, so a failure in a thread fails the test
            errors.append(error)

    threads = [threading.Thread(target=issue, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(results) == 8 and len(set(results.values())) == 8
    assert all(service.verify(i).status is Status.VALID for i in results.values())


def test_eight_threads_issuing_one_attempt_get_one_certificate(
    service: QuizService, passed_attempt: Attempt
) -> None:
    ids: list[str] = []
    barrier = threading.Barrier(8)

    def issue() -> None:
        barrier.wait()
        ids.append(service.issue(passed_attempt.id, "Double Clicker", False).id)

    threads = [threading.Thread(target=issue) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ids) == 8 and len(set(ids)) == 1
    assert len(service.all_certificates()) == 1


def test_database_uses_wal_and_a_busy_timeout(service: QuizService) -> None:
    with reading(service.data_dir) as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 1000


def test_verify_outcomes(service: QuizService, passed_attempt: Attempt) -> None:
    certificate = service.issue(passed_attempt.id, "Ada Lovelace", False)
    valid = service.verify(certificate.id.lower().replace("-", " "))
    assert valid.status is Status.VALID and valid.certificate == certificate
    typo = certificate.id[:-3] + ("0" if certificate.id[-3] != "0" else "1") + certificate.id[-2:]
    assert service.verify(typo).status is Status.TYPO
    compact = certificate.id.replace("-", "")
    unknown = next(text for text in (f"{compact[:-1]}{c}" for c in "0123456789") if text != compact)
    assert service.verify(unknown).status in {Status.TYPO, Status.NOT_FOUND}
    for junk in ["x" * 10_000, "'; DROP TABLE certificates; --", "", "<script>"]:
        assert service.verify(junk).status is Status.TYPO
    assert service.verify(certificate.id).status is Status.VALID  # the table is still there


def test_not_found_for_a_well_formed_unknown_id(service: QuizService) -> None:
    from quiz.ids import new_id

    result = service.verify(new_id())
    assert result.status is Status.NOT_FOUND and result.certificate is None


def test_not_found_does_the_same_signature_work(
    service: QuizService, passed_attempt: Attempt, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found or not, one signature check runs, so the answer time gives nothing away."""
    from quiz.ids import new_id

    certificate = service.issue(passed_attempt.id, "Ada", False)
    store = service.certificates
    calls: list[int] = []
    import quiz.certificates as certificates_module

    original = certificates_module.verify_signature
    monkeypatch.setattr(
        certificates_module, "verify_signature",
        lambda key, p, s: calls.append(1) or original(key, p, s),
    )
    store.verify(certificate.id)
    store.verify(new_id())
    store.verify("typo")
    assert calls == [1, 1]  # the typo was answered without any lookup


def test_tampered_records_fail_their_signature(
    service: QuizService, passed_attempt: Attempt
) -> None:
    certificate = service.issue(passed_attempt.id, "Ada Lovelace", True)
    path = db_path(service.data_dir)
    for column, value in [("name", "Mallory"), ("score", 99), ("issued_on", "2020-01-01")]:
        with sqlite3.connect(path) as raw:
            original = raw.execute(
                f"SELECT {column} FROM certificates WHERE id = ?", (certificate.id,)
            ).fetchone()[0]
            raw.execute(
                f"UPDATE certificates SET {column} = ? WHERE id = ?", (value, certificate.id)
            )
        assert service.verify(certificate.id).status is Status.BAD_SIGNATURE, column
        with sqlite3.connect(path) as raw:
            raw.execute(
                f"UPDATE certificates SET {column} = ? WHERE id = ?", (original, certificate.id)
            )
    assert service.verify(certificate.id).status is Status.VALID


def test_revoking(service: QuizService, passed_attempt: Attempt) -> None:
    certificate = service.issue(passed_attempt.id, "Ada", False)
    with pytest.raises(ValueError, match="reason"):
        service.revoke(certificate.id, "   ")
    revoked = service.revoke(certificate.id.lower(), "issued by mistake")
    assert revoked.revoked_at and revoked.revoke_reason == "issued by mistake"
    result = service.verify(certificate.id)
    assert result.status is Status.REVOKED
    assert (
        result.certificate is not None and result.certificate.revoke_reason == revoked.revoke_reason
    )
    from quiz.ids import new_id

    with pytest.raises(LookupError):
        service.revoke(new_id(), "nope")


def test_a_new_key_keeps_old_certificates_valid_and_names_their_key(
    service: QuizService, passed_attempt: Attempt, tmp_path: Path
) -> None:
    from quiz.signing import create_key_file

    certificate = service.issue(passed_attempt.id, "Ada", False)
    assert service.verify(certificate.id).key_current
    stranger = CertificateStore(service.data_dir, create_key_file(tmp_path / "other-key"))
    result = stranger.verify(certificate.id)
    assert result.status is Status.VALID and not result.key_current
    assert result.certificate is not None and result.certificate.key_id == service.key_id
