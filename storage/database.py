"""The app's database through SQLAlchemy Core: SQLite in DATA_DIR by default (WAL, a busy
timeout, writers queue on BEGIN IMMEDIATE), PostgreSQL when `DATABASE_URL` is set (several
app servers share it).

SQLite connections are not pooled: every use opens the file at its path again (a fraction
of a millisecond), so a database file deleted, replaced or restored while the server runs is
seen at once, never served from a connection that still holds the old file open. A file
that disappears after this process prepared it is not created again: `StorageUnavailable`
says it is missing until the operator restores it. Every database carries a random store id
(`store_info`), so a different database put in its place is recognised.

Failures of the database come out as `StorageUnavailable` (or `StorageBusy` for a lock held
too long), each with a one-line message that says what is wrong and what to do, naming the
real cause: a full disk (ENOSPC, SQLITE_FULL), a read-only file or folder, a DATA_DIR that
is not a folder. PostgreSQL connections carry a lock and a statement timeout, so a table
locked by hand is reported busy as SQLite's busy timeout is, never waited on for minutes.
Inside `shared_wait` (one page run, one click and the page it draws) every transaction
shares one such wait: a run that meets a lock again and again still answers in time.

Only the app's start creates a database (`engine_for`); the instructor's commands open an
existing one (`open_existing`) and never create a file, a folder or a table.

Every table is declared on `METADATA`; a new store adds its `Table` to it (importing this
module) and `prepare` creates it with the others. Columns added to an existing table are
created on the next start (nullable ones only), so an older database keeps working.
"""

from __future__ import annotations

import errno
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any
from urllib.parse import quote

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
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.pool import NullPool

DB_NAME = "quiz.sqlite3"
BUSY_TIMEOUT_S = 15.0
# PostgreSQL: a statement waits at most this long for a lock (a table locked by hand, a
# row another server holds) and runs at most PG_STATEMENT_TIMEOUT_S, so a page, or a
# command with its start-up, says "busy, try again in a moment" within 15 s even on a
# busy machine (SQLite's busy timeout is 15 s; a lock there is a writer's, held briefly).
PG_LOCK_TIMEOUT_S = 5.0
PG_STATEMENT_TIMEOUT_S = 10.0
# Inside shared_wait, a transaction begun once the shared wait is spent still waits this
# long for a lock (one that is free at once is taken; one that is held answers busy).
LAST_WAIT_S = 0.05
_WAIT_FROM: ContextVar[float | None] = ContextVar("storage_wait_from", default=None)
# Below this much free space, SQLite's "disk I/O error" (it cannot grow its shared-memory
# or WAL file) is a full disk.
FULL_DISK_BYTES = 1 << 20
STORE_ID = "store_id"
__all__ = ["IntegrityError", "METADATA", "reading", "writing", "database_url",
           "StorageUnavailable", "StorageBusy"]


class StorageUnavailable(SQLAlchemyError, RuntimeError):
    """The database cannot be used right now. The message (one line) says what is wrong and
    what to do; `kind` is one of missing, no-folder, not-a-folder, read-only, damaged,
    replaced, empty, full, busy, unreachable, unreadable, unreadable-back. An
    SQLAlchemyError too, so callers that carry on without the database (the demos' result
    store) still catch it."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)

    def __str__(self) -> str:
        return str(self.args[0])


class StorageBusy(StorageUnavailable):
    """Another process held the database's write lock longer than the busy timeout:
    nothing was changed; trying again in a moment works."""

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

store_info = Table(  # facts about this database itself: its store id
    "store_info",
    METADATA,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

signing_keys = Table(
    "signing_keys",
    METADATA,
    Column("key_id", String(16), primary_key=True),
    Column("public_pem", Text, nullable=False),
    Column("added_at", Float, nullable=False),
)

_engines: dict[str, Engine] = {}
_fresh_engines: dict[str, Engine] = {}
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


@contextmanager
def shared_wait(started: float | None = None) -> Iterator[float]:
    """Inside, this thread's transactions share one wait for locks, counted from `started`
    (time.monotonic(); default now): BUSY_TIMEOUT_S on SQLite, PG_LOCK_TIMEOUT_S on
    PostgreSQL, in all. Without it each statement may wait that long, and a page that reads
    four times behind a locked table answered after four waits. Yields the start, for a
    click whose page is drawn in the next run to go on with."""
    begun = time.monotonic() if started is None else started
    token = _WAIT_FROM.set(begun)
    try:
        yield begun
    finally:
        _WAIT_FROM.reset(token)


def _wait_left_ms(budget_s: float) -> int | None:
    """Milliseconds the next transaction may wait for a lock inside shared_wait (None:
    outside one, the connection's own timeout holds)."""
    begun = _WAIT_FROM.get()
    if begun is None:
        return None
    left = max(begun + budget_s - time.monotonic(), LAST_WAIT_S)
    return int(min(left, budget_s) * 1000)


def _sqlite_engine(url: str) -> Engine:
    """Unpooled, and opening the file read-write without creating it (`mode=rw`)."""
    path = make_url(url).database or ""
    engine = create_engine(f"sqlite:///file:{quote(path)}?mode=rw&uri=true", poolclass=NullPool,
                           connect_args={"timeout": BUSY_TIMEOUT_S})

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
        waits = _wait_left_ms(BUSY_TIMEOUT_S)
        if waits is not None:  # connections are not pooled: this one ends with its use
            connection.exec_driver_sql(f"PRAGMA busy_timeout = {waits}")
        immediate = connection.get_execution_options().get("immediate", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _postgres_engine(url: str, **pool: Any) -> Engine:
    """A PostgreSQL engine whose connections give up on a lock after PG_LOCK_TIMEOUT_S and
    on a statement after PG_STATEMENT_TIMEOUT_S (libpq `options`, after any the URL sets)."""
    given = make_url(url).query.get("options") or ""
    given = given if isinstance(given, str) else " ".join(given)
    options = (f"{given} -c lock_timeout={int(PG_LOCK_TIMEOUT_S * 1000)} "
               f"-c statement_timeout={int(PG_STATEMENT_TIMEOUT_S * 1000)}").strip()
    engine = create_engine(url, connect_args={"options": options}, **pool)

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        waits = _wait_left_ms(PG_LOCK_TIMEOUT_S)
        if waits is not None:  # this transaction only (set_config's is_local)
            connection.exec_driver_sql("SELECT set_config('lock_timeout', %s, true)",
                                       (f"{waits}ms",))

    return engine


def _sqlite_file(url: str) -> Path | None:
    return Path(make_url(url).database or "") if url.startswith("sqlite") else None


def _engine(url: str) -> Engine:
    """The process's engine for `url` (made once; call under _lock)."""
    engine = _engines.get(url)
    if engine is None:
        engine = _engines[url] = (
            _sqlite_engine(url) if url.startswith("sqlite")
            else _postgres_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5))
    return engine


def engine_for(data_dir: Path) -> Engine:
    """The engine of the configured database, its tables created once per process (the
    app's start). A SQLite file is created only then: one deleted later is reported
    missing (StorageUnavailable) until it is restored."""
    url = database_url(data_dir)
    with _lock:
        engine = _engine(url)
        if url not in _ready:
            with translated(url):
                _prepare(engine, _sqlite_file(url), create=True)
            _ready.add(url)
    return engine


def open_existing(data_dir: Path) -> Engine:
    """The engine of the configured database when it exists and is this app's (its
    certificates table is there); else StorageUnavailable naming the path and what to
    restore. Creates no folder, file or table, in this call or later ones of this process
    (the instructor's commands)."""
    url = database_url(data_dir)
    sqlite_file = _sqlite_file(url)
    if sqlite_file is not None and not sqlite_file.is_file():
        raise _unavailable(url, FileNotFoundError(errno.ENOENT, "no such file",
                                                  str(sqlite_file)))
    with _lock:
        engine = _engine(url)
        if url not in _ready:
            with translated(url):
                with engine.connect() as connection:
                    present = inspect(connection).has_table(certificates.name)
                if not present:
                    raise StorageUnavailable("missing", (
                        f"The database {describe(data_dir)} holds none of this app's tables "
                        "(it is new, or not the app's database): nothing was created in it. "
                        "Check DATA_DIR or DATABASE_URL, or restore a backup into it "
                        "(`python -m quiz import`, see docs/HOSTING.md)."))
                _prepare(engine, sqlite_file, create=False)  # columns a newer app added
            _ready.add(url)
    return engine


def fresh_engine(data_dir: Path) -> Engine:
    """An engine whose every connection is new (no pool), for reading back what was just
    committed from the database the configuration names, whatever pooled connections hold."""
    engine_for(data_dir)
    url = database_url(data_dir)
    if url.startswith("sqlite"):
        return _engines[url]  # never pooled
    with _lock:
        engine = _fresh_engines.get(url)
        if engine is None:
            engine = _fresh_engines[url] = _postgres_engine(url, poolclass=NullPool)
    return engine


def _prepare(engine: Engine, sqlite_file: Path | None, create: bool) -> None:
    """Create the tables (and with `create`, the SQLite file and its folder) or add the
    columns an older database lacks."""
    if sqlite_file is not None and create:
        folder = sqlite_file.parent
        if folder.exists() and not folder.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(folder))
        folder.mkdir(parents=True, exist_ok=True)
        sqlite3.connect(sqlite_file).close()  # create the file (the engine never does)
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":  # several servers may start at once
            connection.execute(text("SELECT pg_advisory_xact_lock(74230611)"))
        METADATA.create_all(connection)
        _add_missing_columns(connection)
        connection.execute(
            _insert_ignore(connection, store_info).values(key=STORE_ID,
                                                          value=secrets.token_hex(16))
        )
        connection.commit()


def _insert_ignore(connection: Connection, table: Table):  # type: ignore[no-untyped-def]
    """INSERT ... ON CONFLICT DO NOTHING for the connection's dialect."""
    if connection.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    else:
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    return dialect_insert(table).on_conflict_do_nothing()


def store_id(connection: Connection) -> str | None:
    """The random id this database was given when it was created (None: a database from
    before store ids, or not this app's)."""
    return connection.execute(
        select(store_info.c.value).where(store_info.c.key == STORE_ID)
    ).scalar()


def set_store_id(connection: Connection, value: str) -> None:
    """Give a restored database the store id of the one it restores (`import`)."""
    connection.execute(store_info.delete().where(store_info.c.key == STORE_ID))
    connection.execute(insert(store_info).values(key=STORE_ID, value=value))


def quick_check(connection: Connection) -> str | None:
    """SQLite's quick integrity check: None when it passes, else what it found."""
    if connection.dialect.name != "sqlite":
        return None
    rows = [row[0] for row in connection.exec_driver_sql("PRAGMA quick_check").fetchall()]
    return None if rows == ["ok"] else "; ".join(map(str, rows[:3]))


def _free_bytes(folder: Path) -> int | None:
    """Bytes free for this process on the disk holding `folder` (None: unknown)."""
    try:
        found = os.statvfs(folder)
    except OSError:
        return None
    return found.f_bavail * found.f_frsize


def _full(error: BaseException, detail: str, sqlite_file: Path | None) -> bool:
    """Whether `error` is a full disk: ENOSPC or EDQUOT, SQLite's SQLITE_FULL, or SQLite's
    disk I/O error on a disk with (almost) no free space left."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    name = str(getattr(getattr(error, "orig", None) or error, "sqlite_errorname", ""))
    if name == "SQLITE_FULL" or "full" in detail or "no space" in detail:
        return True
    if sqlite_file is not None and (name.startswith("SQLITE_IOERR") or "i/o error" in detail):
        free = _free_bytes(sqlite_file.parent)
        return free is not None and free < FULL_DISK_BYTES
    return False


def _folder_problem(url: str, sqlite_file: Path) -> StorageUnavailable | None:
    """Why the SQLite file's folder cannot hold the database (None: it can)."""
    folder = sqlite_file.parent
    if folder.exists() and not folder.is_dir():
        return StorageUnavailable("not-a-folder", (
            f"DATA_DIR {folder} is a file, not a folder: set DATA_DIR to the folder that "
            "holds (or is to hold) the database and the signing key."))
    if not folder.exists():
        return StorageUnavailable("no-folder", (
            f"The data folder {folder} does not exist (DATA_DIR), so there is no database "
            f"{sqlite_file}: check DATA_DIR; to restore a backup there, create the folder and "
            "run `python -m quiz import` (docs/HOSTING.md). Nothing was created."))
    if not os.access(folder, os.W_OK | os.X_OK):
        return StorageUnavailable("read-only", (
            f"The data folder {folder} is read-only for this process (uid {os.getuid()}): "
            "the database cannot be created or written there. Make DATA_DIR writable by the "
            "app, or point DATA_DIR to a writable folder."))
    return None


def require_folder(data_dir: Path) -> None:
    """StorageUnavailable when the data folder (of the SQLite file, or beside PostgreSQL:
    the key and the issued-marker) is missing, not a folder or read-only (a restore creates
    a database, never a data folder)."""
    url = database_url(data_dir)
    problem = _folder_problem(url, _sqlite_file(url) or data_dir / DB_NAME)
    if problem is not None:
        raise problem


def _unavailable(url: str, error: BaseException) -> StorageUnavailable:
    """The operator's one-line message for a failure of the database at `url`, naming its
    real cause."""
    database = make_url(url).render_as_string(hide_password=True)
    detail = str(getattr(error, "orig", None) or error).strip().splitlines()[0][:200]
    lowered = detail.lower()
    sqlite_file = _sqlite_file(url)
    if ("locked" in lowered or "busy" in lowered or "lock timeout" in lowered
            or "statement timeout" in lowered):
        waited = BUSY_TIMEOUT_S if sqlite_file is not None else PG_LOCK_TIMEOUT_S
        return StorageBusy("busy", (
            f"The database {database} stayed locked for more than {waited:g} s "
            "(another process holds a lock on it); nothing was changed. Please try again in "
            "a moment."))
    if _full(error, lowered, sqlite_file):
        return StorageUnavailable("full", (
            f"The disk holding the database {database} is full (ENOSPC / SQLITE_FULL, or the "
            f"database reached its size limit): nothing was saved ({detail}). Free some "
            "space; the app carries on by itself."))
    if "readonly" in lowered or "read-only" in lowered or (
            isinstance(error, OSError) and error.errno in (errno.EROFS, errno.EACCES)):
        where = sqlite_file or database
        return StorageUnavailable("read-only", (
            f"The database {where} cannot be written: it, its folder or its disk is "
            f"read-only for this process (uid {os.getuid()}); nothing was saved ({detail}). "
            "Make DATA_DIR and its files writable by the app."))
    if sqlite_file is not None and not sqlite_file.exists():
        folder = _folder_problem(url, sqlite_file)
        if folder is not None:
            return folder
        return StorageUnavailable("missing", (
            f"The database file {sqlite_file} is missing (deleted or moved, or DATA_DIR "
            "names another folder): nothing can be issued or verified. Put it back or "
            "restore a backup (`python -m quiz import`, see docs/HOSTING.md); the app "
            "carries on by itself."))
    if ("not a database" in lowered or "malformed" in lowered or "corrupt" in lowered
            or "no such table" in lowered or "integrity" in lowered
            or "does not exist" in lowered):
        return StorageUnavailable("damaged", (
            f"The database {database} is damaged or is not this app's database ({detail}). "
            "Restore it from a backup (`python -m quiz import`, see docs/HOSTING.md); the app "
            "carries on by itself once it can read it."))
    if sqlite_file is not None:
        return StorageUnavailable("unreadable", (
            f"The database file {sqlite_file} cannot be used ({detail}). Check that the file "
            "and its folder can be read and written by the app, or restore a backup."))
    return StorageUnavailable("unreachable", (
        f"The database {database} cannot be reached ({detail}). Check that the database "
        "server runs and that DATABASE_URL is right; the app carries on by itself."))


@contextmanager
def translated(url: str) -> Iterator[None]:
    """Database failures as StorageUnavailable (a duplicate key stays an IntegrityError: the
    callers handle it)."""
    try:
        yield
    except IntegrityError:
        raise
    except (DBAPIError, sqlite3.Error) as error:
        raise _unavailable(url, error) from error
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES,
                           errno.ENOTDIR, errno.EEXIST, errno.ENOENT):
            raise _unavailable(url, error) from error
        raise


def storage_failure(data_dir: Path, error: BaseException) -> StorageUnavailable:
    """`error` (a failure outside the database, such as a full disk) in the same words."""
    return _unavailable(database_url(data_dir), error)


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
    with translated(database_url(data_dir)), engine_for(data_dir).connect() as connection:
        yield connection


@contextmanager
def fresh_reading(data_dir: Path) -> Iterator[Connection]:
    """A new connection (never a pooled one) to the configured database."""
    with translated(database_url(data_dir)), fresh_engine(data_dir).connect() as connection:
        yield connection


@contextmanager
def writing(data_dir: Path) -> Iterator[Connection]:
    """One write transaction: committed at the end, rolled back on error. On SQLite it is
    BEGIN IMMEDIATE (writers queue on the busy timeout); on PostgreSQL lock the rows it
    changes (`with_for_update`)."""
    with translated(database_url(data_dir)):
        engine = engine_for(data_dir)
        with (engine.connect().execution_options(immediate=True) as connection,
              connection.begin()):
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
        for engine in (*_engines.values(), *_fresh_engines.values()):
            engine.dispose()
        _engines.clear()
        _fresh_engines.clear()
        _ready.clear()
