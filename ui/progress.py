"""The learner's progress through the lessons, kept on the server per learner (ui.learner),
so it survives a reload and a second tab of the same browser: the lessons read, and the
lesson widgets' settings (`keep`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress

import streamlit as st

from lessons.catalog import LESSON_PATHS
from quiz import config
from quiz.progress import ProgressStore
from storage.database import StorageUnavailable
from ui.learner import learner_id, made_here

_SETTINGS = "_remembered_settings"  # this session's copy of the stored settings, read once
_SEEN = "_remembered_seen"  # widget key -> its value when last restored or stored
_KEY = "visited_lessons"  # this session's copy, read from the server once per session
_READ = "_visited_lessons_read"  # (when, paths): the last read from the server
READ_EVERY_S = 5.0  # a lesson read in another tab counts here within this time
LESSON = "lesson:"
LOG = logging.getLogger(__name__)


def store() -> ProgressStore:
    return ProgressStore(config.data_dir())


def _stored() -> set[str]:
    """The learner's visited lessons on the server, read at most every READ_EVERY_S per
    session (a run's navigation and sidebar share one read); nothing to read for an id
    this session has just made up."""
    now = time.monotonic()
    last = st.session_state.get(_READ)
    if last is not None and now - last[0] < READ_EVERY_S:
        return last[1]
    try:
        found = (set() if last is None and made_here()
                 else set(store().items(learner_id(), LESSON)))
    except StorageUnavailable as problem:  # the lesson still shows; progress waits
        LOG.warning("progress not read: %s", problem)
        return last[1] if last is not None else set()
    st.session_state[_READ] = (now, found)
    return found


def _session_visited() -> list[str]:
    if _KEY not in st.session_state:
        st.session_state[_KEY] = [path for path in LESSON_PATHS if path in _stored()]
    return st.session_state[_KEY]


def mark_visited(path: str) -> None:
    if path not in LESSON_PATHS:
        raise KeyError(path)
    visited = _session_visited()
    if path not in visited:
        visited.append(path)
        try:
            store().record(learner_id(), LESSON + path)
        except StorageUnavailable as problem:  # kept in this session; the page goes on
            LOG.warning("progress not saved: %s", problem)


def visited_lessons() -> list[str]:
    """Visited lesson paths, in course order: this browser's, from every tab (read from the
    server, so a lesson read in another tab counts too)."""
    seen = _stored() | set(st.session_state.get(_KEY, []))
    return [path for path in LESSON_PATHS if path in seen]


# --------------------------------------------------------------------------------------
# Widget settings
# --------------------------------------------------------------------------------------

Parse = Callable[[object], object]
"""A stored value -> the value the widget takes; raises ValueError when the widget no longer
takes it (outside its range, not one of its options, the wrong type)."""


def one_of(options: Iterable[object]) -> Parse:
    allowed = list(options)

    def parse(value: object) -> object:
        for option in allowed:
            if type(option) is type(value) and option == value:
                return option
        raise ValueError(value)

    return parse


def between(low: float, high: float, integer: bool = True) -> Parse:
    def parse(value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int | float) or \
                (integer and not isinstance(value, int)) or not low <= value <= high:
            raise ValueError(value)
        return value if integer else float(value)

    return parse


def flag(value: object) -> object:
    if not isinstance(value, bool):
        raise ValueError(value)
    return value


def _remembered() -> dict[str, object]:
    """The learner's stored settings, read once per session (nothing to read for an id this
    session has just made up) and kept up to date by this session's writes."""
    found = st.session_state.get(_SETTINGS)
    if found is None:
        found = {} if made_here() else store().settings(learner_id())
        st.session_state[_SETTINGS] = found
    return found


def keep(settings: Mapping[str, tuple[object, Parse]]) -> None:
    """Remember these widgets' values for the learner, across reloads and tabs. `settings`:
    widget key -> (default, parse). Call it before the widgets are drawn, each run.

    A key this session holds no value for (a new session, or Streamlit dropped the widget's
    state when the learner left the page) gets the learner's stored value if `parse` takes
    it, else the default; a value that changed since (the learner moved the widget, on the
    run this causes) is stored. The widgets take their defaults from here, not from their
    own `value`/`index`."""
    stored = _remembered()
    seen = st.session_state.setdefault(_SEEN, {})
    for key, (default, parse) in settings.items():
        if key not in st.session_state:
            value = default
            with suppress(ValueError, TypeError):  # not taken (the widget changed): default
                value = parse(stored[key]) if key in stored else default
            st.session_state[key] = seen[key] = value
            continue
        value = st.session_state[key]
        if key in seen and seen[key] == value:
            continue
        seen[key] = value
        if stored.get(key) != value and store().keep_setting(learner_id(), key, value):
            stored[key] = value
