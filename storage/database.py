"""The app's database through SQLAlchemy Core: SQLite in DATA_DIR by default (WAL, a busy
timeout, writers queue on BEGIN IMMEDIATE), PostgreSQL when `DATABASE_URL` is set (several
app servers share it).

Every table is declared on `METADATA`; a new store adds its `Table` to it (importing this
module) and `prepare` creates it with the others. Columns added to an existing table are
created on the next start (nullable ones only), so an older database keeps working.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import (
    Boolean,
    Column,
    Connection,
    Engine,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    insert,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError

DB_NAME = "quiz.sqlite3"
BUSY_TIMEOUT_S = 15.0
__all__ = ["IntegrityError", "METADATA", "reading", "writing", "database_url"]

METADATA = MetaData()

learners = Table(
    "learners",
    METADATA,
    Column("id", String(64), primary_key=True),
    Column("created_at", Float, nullable=False),
    Column("attempts_started", Integer, nullable=False, server_default="0"),
)

progress = Table(
    "progress",
    METADATA,
    Column("learner_id", String(64), primary_key=True),
    Column("item", String(200), primary_key=True),  # "lesson:<path>", "setting:<name>", ...
    Column("value", Text, nullable=False),
    Column("updated_at", Float, nullable=False),
)

attempts = Table(
    "attempts",
    METADATA,
    Column("id", String(64), primary_key=True),
    Column("created_at", Float, nullable=False),
    Column("questions", Text, nullable=False),
    Column("finished_at", Float),
    Column("correct", Integer),
    Column("total", Integer),
    Column("passed", Boolean),
    Column("learner_id", String(64), index=True),
    Column("client", String(64), index=True),  # the client's address, for learners without a past
    Column("ordinal", Integer),  # the learner's n-th attempt
)

answers = Table(
    "answers",
    METADATA,
    Column("attempt_id", String(64), ForeignKey("attempts.id", ondelete="CASCADE"),
           primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("chosen", Text, nullable=False),
    Column("is_correct", Boolean, nullable=False),
    Column("answered_at", Float, nullable=False),
)

certificates = Table(
    "certificates",
    METADATA,
    Column("id", String(32), primary_key=True),
    Column("attempt_id", String(64), nullable=False, unique=True),
    Column("name", Text, nullable=False),
    Column("course", Text, nullable=False),
    Column("course_version", Text, nullable=False),
    Column("issued_on", String(10), nullable=False),
    Column("score", Integer, nullable=False),
    Column("show_score", Boolean, nullable=False),
    Column("key_id", String(16), nullable=False),
    Column("signature", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("revoked_at", String(10)),
    Column("revoke_reason", Text),
    Column("attempts", Integer),  # signed when present (certificates before it have none)
    Column("lang", String(8)),  # the language of the PDF; not signed (None: English)
)

signing_keys = Table(
    "signing_keys",
    METADATA,
    Column("key_id", String(16), primary_key=True),
    Column("public_pem", Text, nullable=False),
    Column("added_at", Float, nullable=False),
)

_engines: dict[str, Engine] = {}
_ready: set[str] = set()
_lock = threading.Lock()


def db_path(data_dir: Path) -> Path:
    return data_dir / DB_NAME


def database_url(data_dir: Path) -> str:
    """`DATABASE_URL` (for example postgresql+psycopg://user:pass@host/db), else the SQLite
    file in the data folder."""
    return os.environ.get("DATABASE_URL") or f"sqlite:///{db_path(data_dir)}"


def describe(data_dir: Path) -> str:
    """The database for messages: the URL without its password."""
    return make_url(database_url(data_dir)).render_as_string(hide_password=True)


def _sqlite_engine(url: str) -> Engine:
    engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None  # SQLAlchemy's BEGIN below, not pysqlite's
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA journal_mode = WAL")  # persistent; a no-op once set
        cursor.execute("PRAGMA synchronous = NORMAL")  # safe with WAL; no fsync per commit
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        immediate = connection.get_execution_options().get("immediate", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def engine_for(data_dir: Path) -> Engine:
    """The engine of the configured database, its tables created (once per process, and
    again when the SQLite file was deleted)."""
    url = database_url(data_dir)
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            if url.startswith("sqlite"):
                engine = _sqlite_engine(url)
            else:
                engine = create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)
            _engines[url] = engine
        sqlite_file = engine.url.database if engine.dialect.name == "sqlite" else None
        if url not in _ready or (sqlite_file and not Path(sqlite_file).exists()):
            _prepare(engine)
            _ready.add(url)
    return engine


def _prepare(engine: Engine) -> None:
    if engine.dialect.name == "sqlite":
        Path(engine.url.database or "").parent.mkdir(parents=True, exist_ok=True)
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":  # several servers may start at once
            connection.execute(text("SELECT pg_advisory_xact_lock(74230611)"))
        METADATA.create_all(connection)
        _add_missing_columns(connection)
        connection.commit()


def _add_missing_columns(connection: Connection) -> None:
    """ALTER TABLE ... ADD COLUMN for nullable columns an older database lacks."""
    inspector = inspect(connection)
    for table in METADATA.sorted_tables:
        present = {column["name"] for column in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in present and column.nullable:
                kind = column.type.compile(dialect=connection.dialect)
                connection.execute(
                    text(f'ALTER TABLE {table.name} ADD COLUMN "{column.name}" {kind}')
                )


@contextmanager
def reading(data_dir: Path) -> Iterator[Connection]:
    """A connection for reads (one consistent snapshot)."""
    with engine_for(data_dir).connect() as connection:
        yield connection


@contextmanager
def writing(data_dir: Path) -> Iterator[Connection]:
    """One write transaction: committed at the end, rolled back on error. On SQLite it is
    BEGIN IMMEDIATE (writers queue on the busy timeout); on PostgreSQL lock the rows it
    changes (`with_for_update`)."""
    engine = engine_for(data_dir)
    with engine.connect().execution_options(immediate=True) as connection, connection.begin():
        yield connection


def ensure_learner(connection: Connection, learner_id: str, now: float) -> None:
    """Lock the learner's row inside a write transaction, creating it when new (two servers
    creating it at once: the loser's insert is rolled back to a savepoint)."""
    exists = connection.execute(
        select(learners.c.id).where(learners.c.id == learner_id).with_for_update()
    ).first()
    if exists is None:
        try:
            with connection.begin_nested():
                connection.execute(
                    insert(learners).values(id=learner_id, created_at=now, attempts_started=0)
                )
        except IntegrityError:
            connection.execute(
                select(learners.c.id).where(learners.c.id == learner_id).with_for_update()
            )


def dispose_all() -> None:
    """Close every pooled connection (tests, and before a fork)."""
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()
        _ready.clear()
