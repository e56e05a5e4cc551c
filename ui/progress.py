"""The learner's progress through the lessons, kept on the server per learner (ui.learner),
so it survives a reload and a second tab of the same browser."""

from __future__ import annotations

import time

import streamlit as st

from lessons.catalog import LESSON_PATHS
from quiz import config
from quiz.progress import ProgressStore
from ui.learner import learner_id, made_here

_KEY = "visited_lessons"  # this session's copy, read from the server once per session
_READ = "_visited_lessons_read"  # (when, paths): the last read from the server
READ_EVERY_S = 5.0  # a lesson read in another tab counts here within this time
LESSON = "lesson:"


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
    found = set() if last is None and made_here() else set(store().items(learner_id(), LESSON))
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
        store().record(learner_id(), LESSON + path)


def visited_lessons() -> list[str]:
    """Visited lesson paths, in course order: this browser's, from every tab (read from the
    server, so a lesson read in another tab counts too)."""
    seen = _stored() | set(st.session_state.get(_KEY, []))
    return [path for path in LESSON_PATHS if path in seen]
