"""The persistent result store: one row per (request, device kind and name, torch version,
engine code version), in the app's database (`storage.database`: SQLite in DATA_DIR, PostgreSQL
with DATABASE_URL), shared by every session, every server process and every restart.

A row is either `ready` (the result, as JSON) or `claimed`: one process is measuring it
and holds a lease it renews while the run lasts. Another process asking for the same key
waits for the row to become ready instead of measuring again; a lease that ran out (its
process died) may be claimed anew. Each ready row also keeps the run's measured seconds
and its CPU-estimate work, so wait estimates learn this device's speed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Column,
    Float,
    Integer,
    String,
    Table,
    Text,
    delete,
    insert,
    inspect,
    select,
    update,
)
from sqlalchemy.exc import SQLAlchemyError

from serving.jobs import decode_result, encode_result
from storage.database import METADATA, IntegrityError, engine_for, reading, writing
from storage.location import data_dir as default_data_dir

LEASE_SECONDS = 30.0
_created: set[tuple[object, str]] = set()

demo_results = Table(
    "demo_results",
    METADATA,
    Column("key", String(64), primary_key=True),
    Column("status", String(16), nullable=False),  # claimed | ready
    Column("owner", String(64)),  # the claiming process (and run)
    Column("lease_until", Float),
    Column("kind", String(16), nullable=False),
    Column("device", String(200), nullable=False),  # kind:name
    Column("request", Text, nullable=False),  # Job.request() as JSON
    Column("result", Text),
    Column("seconds", Float),  # measured wall time of the run
    Column("work", Float),  # its CPU-estimate seconds (memory.theory.cpu_seconds)
    Column("created_at", Float, nullable=False),
    Column("hits", Integer, nullable=False, server_default="0"),
)


@dataclass(frozen=True)
class Claim:
    """What `ResultStore.claim` found: the result (ready), our claim (mine), or another
    process's live claim (neither)."""

    result: Any = None
    mine: bool = False

    @property
    def ready(self) -> bool:
        return self.result is not None


class ResultStore:
    """The demo_results table. `data_dir` None: the app's DATA_DIR at each call."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self._data_dir = data_dir

    @property
    def data_dir(self) -> Path:
        """The folder, with the table created (storage.database creates the tables once per
        process: this one may be declared after that)."""
        folder = self._data_dir or default_data_dir()
        engine = engine_for(folder)
        if (engine, str(folder)) not in _created:
            try:
                demo_results.create(engine, checkfirst=True)
            except SQLAlchemyError:
                # Another thread (the warm-up and a page at start) or server found it
                # missing too and created it between our check and our CREATE.
                if not inspect(engine).has_table(demo_results.name):
                    raise
            _created.add((engine, str(folder)))
        return folder

    def get(self, key: str) -> Any:
        """The stored result, or None."""
        with reading(self.data_dir) as connection:
            row = connection.execute(
                select(demo_results.c.result).where(demo_results.c.key == key,
                                                    demo_results.c.status == "ready")
            ).first()
        return decode_result(row.result) if row is not None else None

    def claim(self, key: str, owner: str, kind: str, device: str, request: str,
              lease_s: float = LEASE_SECONDS) -> Claim:
        """Take the key for measuring, unless it is ready or another owner's lease runs."""
        now = time.time()
        with writing(self.data_dir) as connection:
            row = connection.execute(
                select(demo_results).where(demo_results.c.key == key).with_for_update()
            ).first()
            if row is not None and row.status == "ready":
                return Claim(result=decode_result(row.result))
            if row is not None and row.owner != owner and (row.lease_until or 0) > now:
                return Claim()
            values = {"status": "claimed", "owner": owner, "lease_until": now + lease_s,
                      "kind": kind, "device": device, "request": request, "created_at": now}
            if row is None:
                try:
                    with connection.begin_nested():
                        connection.execute(insert(demo_results).values(key=key, **values))
                except IntegrityError:  # another server inserted it just now
                    return Claim()
            else:
                connection.execute(update(demo_results).where(demo_results.c.key == key)
                                   .values(**values))
        return Claim(mine=True)

    def renew(self, key: str, owner: str, lease_s: float = LEASE_SECONDS) -> None:
        with writing(self.data_dir) as connection:
            connection.execute(
                update(demo_results)
                .where(demo_results.c.key == key, demo_results.c.owner == owner,
                       demo_results.c.status == "claimed")
                .values(lease_until=time.time() + lease_s))

    def put(self, key: str, owner: str, result: Any, seconds: float, work: float, *,
            kind: str, device: str, request: str) -> None:
        """Store a finished result (ours, or anyone's: a finished result is never lost).
        Its claim row may be gone: a failed run of the same key in this process released
        it after the new run claimed it again (the same owner), or another process that
        took the lease over gave it up. Then the row is inserted anew."""
        values = {"status": "ready", "owner": owner, "lease_until": None,
                  "result": encode_result(result), "seconds": seconds, "work": work}
        replace = update(demo_results).where(demo_results.c.key == key).values(**values)
        with writing(self.data_dir) as connection:
            if connection.execute(replace).rowcount:
                return
            try:
                with connection.begin_nested():
                    connection.execute(insert(demo_results).values(
                        key=key, kind=kind, device=device, request=request,
                        created_at=time.time(), **values))
            except IntegrityError:  # another server claimed it just now: ours is finished
                connection.execute(replace)

    def release(self, key: str, owner: str) -> None:
        """Give a claim up (the run failed or was cancelled): the next asker measures."""
        with writing(self.data_dir) as connection:
            connection.execute(
                delete(demo_results).where(demo_results.c.key == key,
                                           demo_results.c.owner == owner,
                                           demo_results.c.status == "claimed"))

    def pending(self, key: str) -> bool:
        """True while someone holds a live claim on the key."""
        with reading(self.data_dir) as connection:
            row = connection.execute(
                select(demo_results.c.status, demo_results.c.lease_until)
                .where(demo_results.c.key == key)).first()
        return row is not None and row.status == "claimed" and (row.lease_until or 0) > time.time()

    def speed_history(self, device: str, limit: int = 50) -> list[tuple[float, float]]:
        """(work, seconds) of the latest finished runs on this device."""
        with reading(self.data_dir) as connection:
            rows = connection.execute(
                select(demo_results.c.work, demo_results.c.seconds)
                .where(demo_results.c.device == device, demo_results.c.status == "ready",
                       demo_results.c.work > 0, demo_results.c.seconds > 0)
                .order_by(demo_results.c.created_at.desc()).limit(limit)).all()
        return [(row.work, row.seconds) for row in rows]

    def count(self, status: str = "ready") -> int:
        with reading(self.data_dir) as connection:
            return len(connection.execute(
                select(demo_results.c.key).where(demo_results.c.status == status)).all())
