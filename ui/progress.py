"""The learner's progress through the lessons, kept on the server per learner (ui.learner),
so it survives a reload and a second tab of the same browser."""

from __future__ import annotations

import streamlit as st

from lessons.catalog import LESSON_PATHS
from quiz import config
from quiz.progress import ProgressStore
from ui.learner import learner_id

_KEY = "visited_lessons"  # this session's copy, read from the server once per session
LESSON = "lesson:"


def store() -> ProgressStore:
    return ProgressStore(config.data_dir())


def _session_visited() -> list[str]:
    if _KEY not in st.session_state:
        st.session_state[_KEY] = list(store().items(learner_id(), LESSON))
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
    seen = set(store().items(learner_id(), LESSON)) | set(st.session_state.get(_KEY, []))
    return [path for path in LESSON_PATHS if path in seen]
