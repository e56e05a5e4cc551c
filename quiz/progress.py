"""A learner's progress kept on the server (lessons read, the open quiz attempt, settings),
keyed by the anonymous learner id the browser keeps in a cookie."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Connection, insert, select, update

from quiz.db import ensure_learner, progress, reading, writing

_LEARNER_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
MAX_ITEMS = 500  # per learner: a client cannot grow the table without bound


def is_learner_id(text: object) -> bool:
    return isinstance(text, str) and bool(_LEARNER_ID.match(text))


class ProgressStore:
    def __init__(self, data_dir: Path, clock: Callable[[], float] = time.time) -> None:
        self.data_dir = data_dir
        self.clock = clock

    def items(self, learner_id: str, prefix: str = "") -> dict[str, str]:
        """The learner's items whose name starts with `prefix` (prefix removed)."""
        if not is_learner_id(learner_id):
            return {}
        with reading(self.data_dir) as connection:
            rows = connection.execute(
                select(progress.c.item, progress.c.value).where(
                    progress.c.learner_id == learner_id, progress.c.item.startswith(prefix)
                )
            )
            return {row.item[len(prefix):]: row.value for row in rows}

    def record(self, learner_id: str, item: str, value: str = "1") -> None:
        """Set one item (insert or update)."""
        if not is_learner_id(learner_id):
            raise ValueError("not a learner id")
        now = self.clock()
        with writing(self.data_dir) as connection:
            ensure_learner(connection, learner_id, now)
            changed = connection.execute(
                update(progress)
                .where(progress.c.learner_id == learner_id, progress.c.item == item)
                .values(value=value, updated_at=now)
            ).rowcount
            if not changed and len(self._names(connection, learner_id)) < MAX_ITEMS:
                connection.execute(insert(progress).values(
                    learner_id=learner_id, item=item, value=value, updated_at=now))

    def forget(self, learner_id: str, item: str) -> None:
        with writing(self.data_dir) as connection:
            connection.execute(progress.delete().where(
                progress.c.learner_id == learner_id, progress.c.item == item))

    @staticmethod
    def _names(connection: Connection, learner_id: str) -> list[str]:
        return list(connection.execute(
            select(progress.c.item).where(progress.c.learner_id == learner_id)).scalars())

