"""The one renderer every lesson page uses.

A lesson page is two lines: ``from ui.lesson_page import render_lesson`` and
``render_lesson("why-memory")``. The text comes from lessons/content/<lang>/<path>.md in the
session's language (English where a translation is missing); each ``{{kind:name}}`` line in
it is drawn here by the widget registered under that name.
"""

from __future__ import annotations

import streamlit as st

from lessons.catalog import LESSONS, lesson, neighbours, number
from lessons.document import DemoLink, LessonDocument, load
from lessons.values import lesson_values
from ui.i18n import current_language, t, with_lang
from ui.lesson_widgets import WIDGETS
from ui.navigation import PAGES
from ui.navigation import page_link as app_page_link
from ui.progress import mark_visited


def _draw_blocks(document: LessonDocument) -> None:
    for block in document.blocks:
        if block.kind == "markdown":
            st.markdown(block.text)
            continue
        draw = WIDGETS.get(block.widget)
        if draw is None:
            st.error(t("This lesson refers to an unknown interactive part: {widget}",
                       widget=block.widget))
            continue
        with st.container(border=True):
            draw()


def _draw_takeaways(takeaways: tuple[str, ...]) -> None:
    if not takeaways:
        return
    with st.container(border=True, key="lesson_takeaways"):
        st.markdown("#### :material/lightbulb: " + t("Key takeaways"))
        st.markdown("\n".join(f"- {item}" for item in takeaways))


def _page_link(url_path: str, label: str, icon: str,
               query: dict[str, str] | None = None) -> None:
    """A link to one of the app's pages by URL path (same tab, same session, so progress
    and the language are kept)."""
    app_page_link(url_path, label=label, icon=icon, query_params=query or None)


def _draw_demo(demo: DemoLink | None) -> None:
    if demo is None:
        return
    st.markdown("#### :material/science: " + t("Try it live"))
    if demo.text:
        st.markdown(demo.text)
    if any(spec.url_path == demo.path for spec in PAGES):
        _page_link(demo.path, demo.label, ":material/play_circle:", demo.query)
    else:  # a demo page not in the router yet (lessons.catalog.PICTURES_DEMO_PATH): a plain link
        st.markdown(f":material/play_circle: [{demo.label}]({with_lang(demo.url)})")


def _draw_navigation(path: str, code: str) -> None:
    before, after = neighbours(path)
    st.divider()
    left, middle, right = st.columns([2, 1, 2])
    with left:
        if before is not None:
            _page_link(before.path, t("Previous: {number}. {title}", number=number(before.path),
                                      title=before.title_in(code)), ":material/arrow_back:")
        else:
            _page_link("", t("Back to the start"), ":material/home:")
    with middle:
        st.caption(t("Lesson {number} of {total}", number=number(path), total=len(LESSONS)))
    with right:
        if after is not None:
            _page_link(after.path, t("Next: {number}. {title}", number=number(after.path),
                                     title=after.title_in(code)), ":material/arrow_forward:")
        else:
            _page_link("quiz", t("Next: take the quiz"), ":material/quiz:")


def render_lesson(path: str) -> None:
    """Draw the lesson at `path` (e.g. "why-memory") in the session's language."""
    code = current_language()
    item = lesson(path)
    mark_visited(path)  # the router draws the sidebar after the page: it counts this one
    document = load(path, lesson_values(code), code)
    st.caption(t("Lesson {number} of {total} · about {minutes} minutes", number=number(path),
                 total=len(LESSONS), minutes=item.minutes))
    st.title(t("{number}. {title}", number=number(path), title=item.title_in(code)))
    _draw_blocks(document)
    _draw_takeaways(document.takeaways)
    _draw_demo(document.demo)
    _draw_navigation(path, code)
