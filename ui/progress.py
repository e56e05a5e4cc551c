"""The learner's progress through the lessons, kept for the browser session."""

from __future__ import annotations

import streamlit as st

from lessons.catalog import LESSON_PATHS

_KEY = "visited_lessons"


def mark_visited(path: str) -> None:
    if path not in LESSON_PATHS:
        raise KeyError(path)
    visited: list[str] = st.session_state.setdefault(_KEY, [])
    if path not in visited:
        visited.append(path)


def visited_lessons() -> list[str]:
    """Visited lesson paths, in course order."""
    seen = set(st.session_state.get(_KEY, []))
    return [path for path in LESSON_PATHS if path in seen]
