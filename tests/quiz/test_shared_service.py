"""shared_service: the pages' QuizService, opened once per configuration and process."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from pathlib import Path

import pytest
from sqlalchemy import delete
from streamlit.testing.v1 import AppTest

import quiz.service as service_module
from quiz.attempts import Attempt
from quiz.certificates import ISSUED_MARKER, StorageError
from quiz.cli import main
from quiz.ids import new_id
from quiz.service import QuizService, open_service, shared_service
from quiz.signing import KEY_FILE
from storage.database import StorageUnavailable, certificates, writing
from tests.helpers import ROOT


class Counter:
    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def wrap(self, function):  # noqa: ANN001, ANN201
        def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            with self.lock:
                self.calls += 1
            return function(*args, **kwargs)

        return counted


@pytest.fixture(autouse=True)
def empty_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service_module, "_SHARED", OrderedDict())


@pytest.fixture
def key_reads(monkeypatch: pytest.MonkeyPatch) -> Counter:
    counter = Counter()
    monkeypatch.setattr(service_module, "read_signer", counter.wrap(service_module.read_signer))
    return counter


@pytest.fixture
def opens(monkeypatch: pytest.MonkeyPatch) -> Counter:
    counter = Counter()
    monkeypatch.setattr(service_module, "_open", counter.wrap(service_module._open))
    return counter


def test_the_second_call_reads_nothing_again(data_dir: Path, key_reads: Counter) -> None:
    first = shared_service()
    assert first.key_id is not None and (data_dir / KEY_FILE).exists()  # created on the way
    reads = key_reads.calls
    assert shared_service() is first
    assert key_reads.calls == reads
    reader = shared_service(create_key=False, strict=False)  # the verify page's
    assert reader is not first and reader.key_id == first.key_id
    assert shared_service(create_key=False, strict=False) is reader
    assert shared_service() is first


def test_another_data_dir_gets_its_own_service(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = shared_service()
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "other"))
    other = shared_service()
    assert other is not first
    assert other.data_dir == tmp_path / "other" and other.key_id != first.key_id
    monkeypatch.setenv("QUIZ_COOLDOWN_SECONDS", "600")
    assert shared_service().attempts.cooldown_seconds == 600


def test_a_rotated_key_gets_a_new_service(data_dir: Path) -> None:
    first = shared_service()
    reader = shared_service(create_key=False, strict=False)
    assert main(["new-key", "--replace"]) == 0
    rotated = shared_service()
    assert rotated is not first and rotated.key_id != first.key_id
    assert shared_service(create_key=False, strict=False).key_id == rotated.key_id
    assert reader.key_id == first.key_id  # unchanged: a session still holding it is fine


def test_a_touched_key_file_is_read_again(data_dir: Path, key_reads: Counter) -> None:
    first = shared_service()
    key = data_dir / KEY_FILE
    stat = key.stat()
    os.utime(key, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    reads = key_reads.calls
    assert shared_service() is not first
    assert key_reads.calls > reads


def test_an_emptied_database_stops_the_quiz_and_no_id_reads_not_found(
    data_dir: Path,
) -> None:
    open_service()  # the key
    (data_dir / ISSUED_MARKER).write_text('{"first_issued": "2026-01-01"}\n')
    for _ in range(2):  # raised again on every call while it lasts, never kept
        with pytest.raises(StorageError, match="is EMPTY"):
            shared_service()
    reader = shared_service(create_key=False, strict=False)  # the verify page's
    with pytest.raises(StorageUnavailable, match="is EMPTY"):
        reader.verify(new_id())


def test_what_no_file_shows_is_found_at_the_next_recheck(
    service: QuizService, passed_attempt: Attempt, data_dir: Path, opens: Counter,
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows emptied by hand (as on PostgreSQL) change no file: the kept service is checked
    again after RECHECK_SECONDS, and its new warning is logged once, not at every check."""
    service.issue(passed_attempt.id, "Ada Lovelace", False)
    kept = shared_service()
    assert not kept.warnings and shared_service() is kept
    with writing(data_dir) as connection:
        connection.execute(delete(certificates))
    assert shared_service() is kept  # within the minute: not opened again
    monkeypatch.setattr(service_module, "RECHECK_SECONDS", 0.0)
    before = opens.calls
    for _ in range(3):
        with pytest.raises(StorageError, match="is EMPTY"):
            shared_service()
    assert opens.calls == before + 3  # every call checks again now


def test_a_storage_problem_is_raised_on_every_call(
    service: QuizService, passed_attempt: Attempt, data_dir: Path, opens: Counter
) -> None:
    service.issue(passed_attempt.id, "Ada Lovelace", False)
    key = data_dir / KEY_FILE
    saved = key.read_bytes()
    key.unlink()
    for calls in (1, 2, 3):
        with pytest.raises(StorageError, match="signing key is missing"):
            shared_service()
        assert opens.calls == calls  # never kept: each call looks again
    assert not key.exists()  # nothing was created in its place
    key.write_bytes(saved)
    assert shared_service().key_id == service.key_id


def test_eight_threads_at_once_open_it_once(
    data_dir: Path, opens: Counter, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_service()  # the key exists, as on a running server
    opens.calls = 0
    slow_open = service_module._open

    def slow(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        time.sleep(0.05)  # long enough for the other threads to arrive meanwhile
        return slow_open(*args, **kwargs)

    monkeypatch.setattr(service_module, "_open", slow)
    start = threading.Barrier(8)
    got: list[QuizService] = []

    def call() -> None:
        start.wait()
        got.append(shared_service())

    threads = [threading.Thread(target=call) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 8 and all(s is got[0] for s in got)
    assert opens.calls == 1


def test_quiz_and_verify_page_runs_read_the_key_once(data_dir: Path, key_reads: Counter) -> None:
    for script in ("pages/take_quiz.py", "pages/verify.py"):
        at = AppTest.from_file(str(ROOT / script), default_timeout=60).run()
        reads = key_reads.calls
        for _ in range(3):
            at.run()
        assert not at.exception
        assert key_reads.calls == reads, script
