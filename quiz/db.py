"""The SQLite database in the data folder: WAL, a busy timeout, one schema for both stores."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DB_NAME = "quiz.sqlite3"
BUSY_TIMEOUT_S = 15.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    questions TEXT NOT NULL,
    finished_at REAL,
    correct INTEGER,
    total INTEGER,
    passed INTEGER
);
CREATE TABLE IF NOT EXISTS answers (
    attempt_id TEXT NOT NULL REFERENCES attempts(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    chosen TEXT NOT NULL,
    is_correct INTEGER NOT NULL,
    answered_at REAL NOT NULL,
    PRIMARY KEY (attempt_id, position)
);
CREATE TABLE IF NOT EXISTS certificates (
    id TEXT PRIMARY KEY,
    attempt_id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    course TEXT NOT NULL,
    course_version TEXT NOT NULL,
    issued_on TEXT NOT NULL,
    score INTEGER NOT NULL,
    show_score INTEGER NOT NULL,
    key_id TEXT NOT NULL,
    signature TEXT NOT NULL,
    created_at REAL NOT NULL,
    revoked_at TEXT,
    revoke_reason TEXT
);
"""

_ready: set[Path] = set()
_ready_lock = threading.Lock()


def db_path(data_dir: Path) -> Path:
    return data_dir / DB_NAME


def _open(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    connection.row_factory = sqlite3.Row
    connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    connection.execute("PRAGMA foreign_keys = ON")
    connection.execute("PRAGMA synchronous = NORMAL")  # safe with WAL; no fsync per commit
    return connection


def _prepare(path: Path) -> None:
    with _ready_lock:
        if path in _ready and path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = _open(path)
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            connection.executescript(SCHEMA)
        finally:
            connection.close()
        _ready.add(path)


@contextmanager
def connect(data_dir: Path) -> Iterator[sqlite3.Connection]:
    """A connection in autocommit mode; use `transaction` for writes."""
    path = db_path(data_dir)
    _prepare(path)
    connection = _open(path)
    try:
        yield connection
    finally:
        connection.close()


@contextmanager
def transaction(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error): writers queue on the busy timeout."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
