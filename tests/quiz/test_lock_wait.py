"""A locked database answers "try again in a moment" after one wait, however often a page
run or a click meets the lock: on SQLite (its busy timeout) and on PostgreSQL, where the
issuing click and the page drawn after it met a table locked by hand four times, 5 s each
(a real PostgreSQL server, as in test_postgres.py)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from quiz.service import QuizService
from storage import database as db_module
from storage.database import StorageBusy, db_path, dispose_all, writing
from tests.quiz.test_pages import button
from tests.quiz.test_postgres import _fresh_database, postgres_url  # noqa: F401 (fixture)

RunPage = Callable[..., AppTest]


def test_one_wait_for_a_run_that_meets_a_lock_three_times_on_sqlite(
    service: QuizService, data_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from storage.database import shared_wait

    monkeypatch.setattr(db_module, "BUSY_TIMEOUT_S", 1.0)
    dispose_all()
    with writing(data_dir) as connection:  # the engine, with that timeout, made
        connection.execute(text("SELECT 1"))
    holder = sqlite3.connect(db_path(data_dir), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        with shared_wait():
            for _ in range(3):
                with pytest.raises(StorageBusy, match="try again in a moment"), \
                        writing(data_dir) as connection:
                    connection.execute(text("SELECT 1"))
        waited = time.monotonic() - started
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert 0.9 < waited < 1.7  # one wait of 1 s, not three
    with shared_wait(), writing(data_dir) as connection:  # a free database: no wait at all
        connection.execute(text("SELECT 1"))


@pytest.mark.heavy
@pytest.mark.timeout(300)
def test_issuing_behind_a_table_locked_by_hand_answers_after_one_wait(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
    app_test: RunPage,
) -> None:
    """The click on "Issue my certificate" and the page it draws, behind `LOCK TABLE
    certificates`: "try again in a moment" after one lock wait (PG_LOCK_TIMEOUT_S), where
    each of its four reads waited that long before; then the same click issues it."""
    from sqlalchemy import create_engine

    from quiz.service import open_service

    url = _fresh_database(postgres_url, "issuing-wait")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("APP_BASE_URL", "https://lab.example")
    monkeypatch.delenv("CERT_SIGNING_KEY", raising=False)
    service = open_service()

    def confirming() -> AppTest:
        attempt = service.start_attempt()
        for position, drawn in enumerate(attempt.questions):
            service.answer(attempt.id, position, sorted(drawn.correct))
        at = app_test("pages/take_quiz.py", query={"attempt": attempt.id})
        at.text_input[0].input("Grace Hopper")
        return button(at, "Check the name").click().run()

    free = confirming()  # the same click with the table free: the page's own work
    started = time.monotonic()
    free = button(free, "Issue my certificate").click().run()
    free_s = time.monotonic() - started
    assert any("Your certificate is ready." in s.value for s in free.success)
    at = confirming()
    holder = create_engine(url).connect()
    holder.execute(text("LOCK TABLE certificates IN ACCESS EXCLUSIVE MODE"))
    try:
        started = time.monotonic()
        at = button(at, "Issue my certificate").click().run()
        waited = time.monotonic() - started - free_s
    finally:
        holder.rollback()
        holder.close()
    assert not at.exception
    assert any("try again in a moment" in w.value for w in at.warning)
    assert waited < db_module.PG_LOCK_TIMEOUT_S + 3, waited  # one wait, not four
    at = button(at.run(), "Issue my certificate").click().run()  # the name is still there
    assert any("Your certificate is ready." in s.value for s in at.success)
