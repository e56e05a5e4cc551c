"""Storage faults under a running service: the database deleted, replaced, corrupted,
locked or full, the key file garbled. After each, learners go on passing: a certificate is
either shown (and then verifies in a fresh process after a restart) or not handed out with a
clear message; once the operator restores the database, issuing resumes by itself."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import event

from quiz.certificate_records import Certificate
from quiz.certificates import CertificateStore, StorageError
from quiz.service import QuizService, open_service, shared_service, startup_check
from quiz.signing import KEY_FILE
from storage import database as db_module
from storage.database import StorageBusy, StorageUnavailable, db_path, dispose_all, engine_for

ROOT = Path(__file__).resolve().parents[2]
_learners = iter(range(10**6))


def pass_and_issue(service: QuizService, name: str = "Ada Lovelace") -> Certificate:
    """A learner passes and asks for a certificate: what they are shown (or the error)."""
    attempt = service.start_attempt(learner_id=f"fault-learner-{next(_learners):06d}")
    for position, drawn in enumerate(attempt.questions):
        service.answer(attempt.id, position, sorted(drawn.correct))
    return service.issue(attempt.id, name, True)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m quiz ...` in a fresh process (as after a restart)."""
    return subprocess.run([sys.executable, "-m", "quiz", *args], cwd=ROOT, env=os.environ,
                          capture_output=True, text=True, timeout=120)


def verified_after_restart(shown: list[Certificate]) -> None:
    """Every certificate a learner was shown verifies in a fresh process."""
    dispose_all()
    result = cli("verify", *(certificate.id for certificate in shown))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("VALID") == len(shown)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


def sqlite_files(data_dir: Path) -> list[Path]:
    return sorted(data_dir.glob("quiz.sqlite3*"))


def backup_copy(data_dir: Path, target: Path) -> Path:
    """A consistent copy of the database (SQLite's online backup)."""
    with sqlite3.connect(db_path(data_dir)) as source, sqlite3.connect(target) as copy:
        source.backup(copy)
    return target


def test_a_database_deleted_under_the_service_stops_issuing_until_it_is_restored(
    service: QuizService, data_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shown = [pass_and_issue(service)]
    export = tmp_path / "backup.jsonl"
    assert cli("export", str(export)).returncode == 0
    running = shared_service()
    for path in sqlite_files(data_dir):
        path.unlink()
    with caplog.at_level(logging.ERROR), pytest.raises(StorageUnavailable) as refused:
        pass_and_issue(running)
    assert refused.value.kind == "missing" and "restore" in str(refused.value)
    assert not db_path(data_dir).exists()  # not silently created again
    with pytest.raises(StorageUnavailable, match="missing"):
        shared_service()  # the pages say so too
    # The operator restores the export; the running service carries on by itself.
    restored = cli("import", str(export))
    assert restored.returncode == 0, restored.stderr
    shown.append(pass_and_issue(shared_service()))
    verified_after_restart(shown)


def test_a_database_lost_between_commit_and_read_back_is_not_handed_out(
    service: QuizService, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read-back through a new connection is what decides: the database vanishing
    right after the commit leaves the learner without a certificate, not with a lost one."""
    def vanish(self: CertificateStore, date: str, store: str | None) -> None:
        for path in sqlite_files(data_dir):
            path.unlink()

    monkeypatch.setattr(CertificateStore, "_mark_issued", vanish)
    with pytest.raises(StorageUnavailable):
        pass_and_issue(service)


def test_a_replaced_database_stops_issuing_until_the_right_one_is_back(
    service: QuizService, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = [pass_and_issue(service)]
    saved = backup_copy(data_dir, tmp_path / "saved.sqlite3")
    # Another server's database (its own certificates) copied over this one.
    other_dir = tmp_path / "other"
    monkeypatch.setenv("DATA_DIR", str(other_dir))
    pass_and_issue(open_service(), "Someone Else")
    monkeypatch.setenv("DATA_DIR", str(data_dir))
    foreign = backup_copy(other_dir, tmp_path / "foreign.sqlite3")
    os.replace(foreign, db_path(data_dir))
    with pytest.raises(StorageUnavailable, match="not the one") as refused:
        pass_and_issue(service)
    assert refused.value.kind == "replaced"
    with pytest.raises(StorageError, match="not the one"):
        open_service()  # a restart refuses too, with the same words
    os.replace(saved, db_path(data_dir))
    shown.append(pass_and_issue(shared_service()))
    verified_after_restart(shown)


def test_a_corrupted_database_is_noticed_and_every_command_says_so_in_one_line(
    service: QuizService, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = [pass_and_issue(service)]
    saved = backup_copy(data_dir, tmp_path / "saved.sqlite3")
    dispose_all()
    for path in sqlite_files(data_dir):
        if path != db_path(data_dir):
            path.unlink()
    db_path(data_dir).write_bytes(b"this is not a database\n" * 4096)  # in place
    with pytest.raises(StorageUnavailable, match="damaged") as refused:
        pass_and_issue(service)
    assert "\n" not in str(refused.value)
    assert startup_check() == 2
    assert "REFUSING TO START" in capsys.readouterr().err
    for command in (["verify", shown[0].id], ["list"], ["public-key"], ["export"]):
        result = cli(*command)
        assert result.returncode == 2 and "damaged" in one_line_error(result), command
    shutil.copyfile(saved, db_path(data_dir))
    shown.append(pass_and_issue(shared_service()))
    verified_after_restart(shown)


def test_a_database_locked_too_long_asks_to_try_again_and_loses_nothing(
    service: QuizService, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = [pass_and_issue(service)]
    attempt = service.start_attempt(learner_id="locked-out")
    for position, drawn in enumerate(attempt.questions):
        service.answer(attempt.id, position, sorted(drawn.correct))
    monkeypatch.setattr(db_module, "BUSY_TIMEOUT_S", 0.2)
    dispose_all()
    holder = sqlite3.connect(db_path(data_dir), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StorageBusy, match="try again in a moment"):
            service.issue(attempt.id, "Grace Hopper", True)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    shown.append(service.issue(attempt.id, "Grace Hopper", True))  # the same attempt
    verified_after_restart(shown)


def test_a_full_disk_saves_nothing_and_issuing_resumes_when_there_is_room(
    service: QuizService, data_dir: Path
) -> None:
    """The database may not grow (SQLite's max_page_count, as on a full disk): learners go
    on asking until a certificate needs a new page; that one is refused, the rest verify."""
    shown = [pass_and_issue(service)]
    waiting = []
    for number in range(40):  # passed before the disk fills up
        attempt = service.start_attempt(learner_id=f"full-disk-{number}")
        for position, drawn in enumerate(attempt.questions):
            service.answer(attempt.id, position, sorted(drawn.correct))
        waiting.append(attempt.id)
    raw = sqlite3.connect(db_path(data_dir), isolation_level=None)
    raw.execute("CREATE TABLE filler (x BLOB)")
    pages = raw.execute("PRAGMA page_count").fetchone()[0]
    raw.execute(f"PRAGMA max_page_count = {pages}")
    for size in (4000, 400, 40, 1):  # take every free page
        with pytest.raises(sqlite3.OperationalError, match="full"):
            for _ in range(10_000):
                raw.execute("INSERT INTO filler VALUES (zeroblob(?))", (size,))
    raw.close()
    engine = engine_for(data_dir)

    def cap(connection, _record) -> None:  # noqa: ANN001 - the DB-API connection
        connection.execute(f"PRAGMA max_page_count = {pages}")

    event.listen(engine, "connect", cap)
    refused: StorageUnavailable | None = None
    try:
        for attempt_id in waiting:
            try:
                shown.append(service.issue(attempt_id, "Katherine Johnson " + "x" * 60, True))
            except StorageUnavailable as problem:
                refused = problem
                break
        assert refused is not None and refused.kind == "full", "the disk never filled up"
        assert service.certificate_for(attempt_id) is None  # nothing half-saved
    finally:
        event.remove(engine, "connect", cap)
    shown.append(service.issue(attempt_id, "Katherine Johnson", True))  # room again
    verified_after_restart(shown)


def test_a_garbled_key_file_stops_issuing_but_verifying_goes_on(
    service: QuizService, data_dir: Path
) -> None:
    shown = [pass_and_issue(service)]
    key = data_dir / KEY_FILE
    saved = key.read_bytes()
    key.write_bytes(b"-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n")
    with pytest.raises(StorageError, match="is damaged") as refused:
        shared_service()
    assert "\n" not in str(refused.value) and "new-key" in str(refused.value)
    assert cli("list").returncode == 0
    result = cli("verify", shown[0].id)  # from the stored public key
    assert result.returncode == 0 and result.stdout.startswith("VALID"), result.stderr
    assert "is damaged" in result.stderr and "Traceback" not in result.stderr
    assert b"garbage" in key.read_bytes()  # no new key was made in its place
    key.write_bytes(saved)
    shown.append(pass_and_issue(shared_service()))
    verified_after_restart(shown)


def test_a_damaged_page_fails_the_quick_check_and_stops_issuing(
    service: QuizService, data_dir: Path, tmp_path: Path
) -> None:
    """Damage inside the file (the header intact) is found by the integrity check at the
    next opening or recheck; restoring the file brings issuing back."""
    shown = [pass_and_issue(service)]
    saved = backup_copy(data_dir, tmp_path / "saved.sqlite3")
    with sqlite3.connect(db_path(data_dir)) as raw:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = raw.execute("PRAGMA page_size").fetchone()[0]
        roots = [row[0] for row in raw.execute("SELECT rootpage FROM sqlite_master "
                                                "WHERE name IN ('answers', 'progress')")]
    with db_path(data_dir).open("r+b") as handle:
        for root in roots:
            handle.seek((root - 1) * page)
            handle.write(b"\xff" * 64)
    with pytest.raises((StorageError, StorageUnavailable)) as refused:
        open_service()
    assert "integrity check" in str(refused.value) or "damaged" in str(refused.value)
    assert "\n" not in str(refused.value)
    shutil.copyfile(saved, db_path(data_dir))
    shown.append(pass_and_issue(open_service()))
    verified_after_restart(shown)
