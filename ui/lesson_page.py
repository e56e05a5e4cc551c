"""The one renderer every lesson page uses.

A lesson page is two lines: ``from ui.lesson_page import render_lesson`` and
``render_lesson("why-memory")``. The text comes from lessons/content/<path>.md; each
``{{kind:name}}`` line in it is drawn here by the widget registered under that name.
"""

from __future__ import annotations

import streamlit as st

from lessons.catalog import LESSON_PATHS, LESSONS, Lesson, lesson, neighbours
from lessons.document import DemoLink, LessonDocument, load
from lessons.values import lesson_values
from ui.lesson_widgets import WIDGETS
from ui.navigation import page_link as app_page_link
from ui.progress import mark_visited


def _number(item: Lesson) -> int:
    return LESSON_PATHS.index(item.path) + 1


def _draw_blocks(document: LessonDocument) -> None:
    for block in document.blocks:
        if block.kind == "markdown":
            st.markdown(block.text)
            continue
        draw = WIDGETS.get(block.widget)
        if draw is None:
            st.error(f"This lesson refers to an unknown interactive part: {block.widget}")
            continue
        with st.container(border=True):
            draw()


def _draw_takeaways(takeaways: tuple[str, ...]) -> None:
    if not takeaways:
        return
    with st.container(border=True, key="lesson_takeaways"):
        st.markdown("#### :material/lightbulb: Key takeaways")
        st.markdown("\n".join(f"- {item}" for item in takeaways))


def _page_link(url_path: str, label: str, icon: str,
               query: dict[str, str] | None = None) -> None:
    """A link to one of the app's pages by URL path (same tab, same session, so progress
    is kept)."""
    app_page_link(url_path, label=label, icon=icon, query_params=query or None)


def _draw_demo(demo: DemoLink | None) -> None:
    if demo is None:
        return
    st.markdown("#### :material/science: Try it live")
    if demo.text:
        st.markdown(demo.text)
    _page_link(demo.path, demo.label, ":material/play_circle:", demo.query)


def _draw_navigation(path: str) -> None:
    before, after = neighbours(path)
    st.divider()
    left, middle, right = st.columns([2, 1, 2])
    with left:
        if before is not None:
            _page_link(before.path, f"Previous: {_number(before)}. {before.title}",
                       ":material/arrow_back:")
        else:
            _page_link("", "Back to the start", ":material/home:")
    with middle:
        st.caption(f"Lesson {_number(lesson(path))} of {len(LESSONS)}")
    with right:
        if after is not None:
            _page_link(after.path, f"Next: {_number(after)}. {after.title}",
                       ":material/arrow_forward:")
        else:
            _page_link("quiz", "Next: take the quiz", ":material/quiz:")


def render_lesson(path: str) -> None:
    """Draw the lesson at `path` (e.g. "why-memory")."""
    item = lesson(path)
    mark_visited(path)  # the router draws the sidebar after the page: it counts this one
    document = load(path, lesson_values())
    st.caption(f"Lesson {_number(item)} of {len(LESSONS)} · about {item.minutes} minutes")
    st.title(f"{_number(item)}. {item.title}")
    _draw_blocks(document)
    _draw_takeaways(document.takeaways)
    _draw_demo(document.demo)
    _draw_navigation(path)
