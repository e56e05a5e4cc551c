"""Every page of the app, with the URL path learners share, in navigation order."""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from i18n import N_
from i18n.catalog import gettext
from lessons.catalog import LESSONS
from ui.i18n import current_language, t
from ui.progress import visited_lessons

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class PageSpec:
    section: str
    file: str  # relative to the app root
    url_path: str  # "" for the home page
    title: str
    icon: str


PAGES: tuple[PageSpec, ...] = (
    PageSpec(N_("Start"), "pages/home.py", "", N_("Home"), ":material/home:"),
    *(
        PageSpec(N_("Lessons"), item.page_file, item.path, f"{number}. {item.title}", item.icon)
        for number, item in enumerate(LESSONS, start=1)
    ),
    PageSpec(N_("Live demos"), "pages/demos/compare.py", "compare", N_("Compare strategies"),
             ":material/compare_arrows:"),
    PageSpec(N_("Live demos"), "pages/demos/timeline.py", "timeline", N_("Memory timeline"),
             ":material/timeline:"),
    PageSpec(N_("Live demos"), "pages/demos/curves.py", "curves", N_("Memory & time curves"),
             ":material/show_chart:"),
    PageSpec(N_("Live demos"), "pages/demos/what_fits.py", "what-fits", N_("What fits in memory"),
             ":material/straighten:"),
    PageSpec(N_("Live demos"), "pages/demos/same_result.py", "same-result", N_("Same result"),
             ":material/check_circle:"),
    PageSpec(N_("Live demos"), "pages/demos/mistakes.py", "mistakes", N_("Why didn't it help?"),
             ":material/bug_report:"),
    PageSpec(N_("Live demos"), "pages/demos/compiler_budget.py", "compiler-budget",
             N_("Compiler memory budget"), ":material/tune:"),
    PageSpec(N_("Live demos"), "pages/demos/placement.py", "placement",
             N_("Best placement for this budget"), ":material/view_timeline:"),
    PageSpec(N_("Live demos"), "pages/demos/real_model.py", "real-model", N_("The real model"),
             ":material/memory:"),
    PageSpec(N_("Live demos"), "pages/demos/pictures.py", "pictures",
             N_("Pictures at high resolution"), ":material/image:"),
    PageSpec(N_("Plan"), "pages/plan.py", "plan", N_("Plan your own run"), ":material/calculate:"),
    PageSpec(N_("Quiz & certificate"), "pages/take_quiz.py", "quiz", N_("Quiz"), ":material/quiz:"),
    PageSpec(N_("Quiz & certificate"), "pages/verify.py", "verify", N_("Verify a certificate"),
             ":material/verified:"),
)


def page_title(spec: PageSpec) -> str:
    """The page's title in the session's language; a lesson's keeps its number."""
    return page_title_in(spec, current_language())


def page_title_in(spec: PageSpec, code: str) -> str:
    """The page's title in the language `code`; a lesson's keeps its number."""
    number, dot, title = spec.title.partition(". ")
    if spec.section == "Lessons" and dot and number.isdigit():
        return gettext(code, "{number}. {title}", number=int(number),
                       title=gettext(code, title))
    return gettext(code, spec.title)


def as_page(spec: PageSpec, visited: bool = False) -> st.Page:
    """The st.Page for a spec; built the same way everywhere, so its hash matches (a lesson
    the learner has read shows a check mark; the hash depends on the URL path only).

    Building one checks its file on disk (a dozen system calls, each a wait for the GIL
    when other sessions are busy), so each (spec, title, icon) is built once per process
    and copied per call: st.navigation marks the object it returns runnable for one run,
    so two sessions must never share one."""
    icon = ":material/task_alt:" if visited else spec.icon
    if get_script_run_ctx() is None:  # bare Python: st.Page records no file then
        return _build_page(spec, page_title(spec), icon)
    return copy.copy(_page_template(spec, page_title(spec), icon))


def _build_page(spec: PageSpec, title: str, icon: str) -> st.Page:
    return st.Page(ROOT / spec.file, title=title, icon=icon, url_path=spec.url_path or None,
                   default=not spec.url_path)


_page_template = functools.lru_cache(maxsize=1024)(_build_page)


def build_navigation() -> dict[str, list[st.Page]]:
    """st.Page objects grouped by section, for st.navigation. Called on every run. An
    address that names no page gets a hidden "page not found" page at that address
    (Streamlit would run the home page under an English dialog)."""
    sections: dict[str, list[st.Page]] = {}
    done = set(visited_lessons())  # marked in the navigation
    for spec in PAGES:
        sections.setdefault(t(spec.section), []).append(as_page(spec, spec.url_path in done))
    missing = unknown_page_name()
    if missing is not None:
        sections[t(PAGES[0].section)].append(
            st.Page(page_not_found, title=t("Page not found"), url_path=missing,
                    icon=":material/explore_off:", visibility="hidden"))
    return sections


def unknown_page_name() -> str | None:
    """The page name this run's address asks for when no page has it, else None."""
    ctx = get_script_run_ctx()
    if ctx is None or ctx.pages_manager.intended_page_script_hash:
        return None  # a click in the app names a page by its hash: it exists
    name = (ctx.pages_manager.intended_page_name or "").strip().strip("/")
    if not name or "/" in name or name in {spec.url_path for spec in PAGES}:
        return None
    return name


def page_not_found() -> None:
    """What an address that names no page shows: where to go instead (the address itself
    is not repeated: it is the visitor's text)."""
    st.title(t("Page not found"))
    st.markdown(t("This address leads to no page of the course. Perhaps the link was cut "
                  "short, or the page has moved. Here is where to go:"))
    for url_path in ("", LESSONS[0].path, "compare", "plan", "quiz", "verify"):
        page_link(url_path)


def page_link(
    url_path: str,
    label: str | None = None,
    icon: str | None = None,
    query_params: dict[str, str] | None = None,
) -> None:
    """A link to one of the app's pages ("" is home), by its URL path.

    It links through the st.Page object rather than a file path, so it also works
    when a page script runs on its own (AppTest.from_file, AppTest.switch_page).
    """
    spec = next(spec for spec in PAGES if spec.url_path == url_path)
    st.page_link(
        as_page(spec), label=label or page_title(spec), icon=icon or spec.icon,
        query_params=query_params,
    )
