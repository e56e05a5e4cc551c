"""A learner's progress kept on the server (lessons read, the open quiz attempt, settings),
keyed by the anonymous learner id the browser keeps in a cookie."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Connection, insert, select, update

from storage.database import ensure_learner, progress, reading, writing

_LEARNER_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
MAX_ITEMS = 500  # per learner: a client cannot grow the table without bound
SETTING = "setting:"  # a widget's remembered value: "setting:<widget key>" = JSON
MAX_SETTINGS = 64  # per learner, within MAX_ITEMS: the lessons' widgets have about 35
MAX_SETTING_CHARS = 300  # a setting's JSON; a widget's value is a number or a short word
MAX_SETTING_NAME = 64


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

    def settings(self, learner_id: str) -> dict[str, object]:
        """The learner's remembered widget settings, decoded; a value that is not short JSON
        is left out (the caller still checks each against its widget's options)."""
        found: dict[str, object] = {}
        for name, text in self.items(learner_id, SETTING).items():
            if len(text) > MAX_SETTING_CHARS:
                continue
            try:
                found[name] = json.loads(text)
            except ValueError:
                continue
        return found

    def keep_setting(self, learner_id: str, name: str, value: object) -> bool:
        """Remember one widget setting (a JSON number, string, bool or null, or a short list
        of them); False when it is refused: too long, not such a value, or the learner
        already keeps MAX_SETTINGS others."""
        if not name or len(name) > MAX_SETTING_NAME or not _plain(value):
            return False
        text = json.dumps(value, allow_nan=False, separators=(",", ":"))
        if len(text) > MAX_SETTING_CHARS:
            return False
        return self.record(learner_id, SETTING + name, text, cap=(SETTING, MAX_SETTINGS))

    def record(self, learner_id: str, item: str, value: str = "1",
               cap: tuple[str, int] | None = None) -> bool:
        """Set one item (insert or update); a new item is refused (False) when the learner
        has MAX_ITEMS items, or `cap` = (prefix, n) and n items with that prefix."""
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
            if changed:
                return True
            names = self._names(connection, learner_id)
            if len(names) >= MAX_ITEMS or cap is not None and \
                    sum(name.startswith(cap[0]) for name in names) >= cap[1]:
                return False
            connection.execute(insert(progress).values(
                learner_id=learner_id, item=item, value=value, updated_at=now))
            return True

    def forget(self, learner_id: str, item: str) -> None:
        with writing(self.data_dir) as connection:
            connection.execute(progress.delete().where(
                progress.c.learner_id == learner_id, progress.c.item == item))

    @staticmethod
    def _names(connection: Connection, learner_id: str) -> list[str]:
        return list(connection.execute(
            select(progress.c.item).where(progress.c.learner_id == learner_id)).scalars())



def _plain(value: object) -> bool:
    """A value a widget holds: None, a bool, a finite number, a string, or a short list of
    these (a multiselect)."""
    if value is None or isinstance(value, bool | int | str):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, list | tuple) and len(value) <= 32 and all(
        not isinstance(item, list | tuple) and _plain(item) for item in value)
