"""What the lesson widgets share: the language-fixed labels of a widget's options, sizes and
units as text, number inputs that clamp what they are given and say so, the metric delta
of a memory change, and a measurement on this server shown or asked for. The widgets
themselves: ui.lesson_calculators, ui.lesson_figures and ui.lesson_toolbox.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import streamlit as st

from i18n import gettext
from lessons.checkpoint_math import format_gb
from ui.i18n import babel_locale, fmt_decimal, fmt_number, number_label, t

CHART = {"config": {"displayModeBar": False}}


def option_words(code: str, labels: Mapping[Any, str]) -> Callable[[Any], str]:
    """A widget's format_func: an option id -> its label in language `code`. The language
    is fixed when the widget is drawn (Streamlit may call format_func outside the run)."""
    return lambda key: gettext(code, labels[key])


def gb(size: float) -> str:
    """Decimal GB in the session's number style: 4.0 GB / 4,0 GB."""
    return format_gb(size, locale=babel_locale())


def units(value: float) -> str:
    return t("{value} units", value=fmt_decimal(value))


def bounded_number(label: str, key: str, low: float, high: float, step: float = 1,
                    integer: bool = True, on_change: Callable[[], None] | None = None,
                    **kwargs: object) -> None:
    """A number input that takes any value, then clamps it into [low, high] itself and says
    so: the box then shows the value actually used (Streamlit's own bounds would leave a
    rejected entry on screen while the last valid one is used)."""
    def clamp() -> None:
        raw = st.session_state[key]
        if raw is None:
            raw = low
        value = min(max(raw, low), high)
        value = int(round(value)) if integer else float(value)
        if value != raw:
            shown = fmt_number(int(raw)) if integer and float(raw).is_integer() else \
                fmt_decimal(float(raw))
            st.session_state[f"{key}_notice"] = t(
                "{label}: {entered} is outside {low}–{high}; using {used}.", label=label,
                entered=shown, low=fmt_decimal(low), high=fmt_decimal(high),
                used=fmt_decimal(value))
        else:
            st.session_state.pop(f"{key}_notice", None)
        st.session_state[key] = value
        if on_change is not None:
            on_change()

    st.number_input(number_label(label, st.session_state.get(key), high),
                    step=step if not integer else int(step), key=key, on_change=clamp,
                    **kwargs)


def notices(keys: list[str]) -> None:
    """The clamping notices of these inputs, each shown on the run after the entry."""
    for key in keys:
        notice = st.session_state.pop(f"{key}_notice", None)
        if notice:
            st.warning(notice, icon=":material/edit_note:")


def saving_delta(before: float, after: float) -> tuple[str | None, str]:
    """A metric delta for a memory change: "-0.3 GB" (less, green, arrow down) or
    "+128 bytes" (more, red, arrow up); None when nothing changes. Memory is a cost, so the
    colours are inverted. The sign is an ASCII "-": Streamlit reads the arrow from it."""
    change = after - before
    if change == 0:
        return None, "off"
    sign = "-" if change < 0 else "+"
    return f"{sign}{gb(abs(change))}", "inverse"


def measured_or_ask(job: Any, key: str, run: Callable[[Any], Any]) -> Any:
    """A demo-service job's stored result, or the learner's click to run it now (`run(job)`:
    the run, with its place in the queue, progress and Cancel), or None. The demo runner
    (and with it torch) is imported only here, when a measurement is drawn."""
    from ui import demo_runner as runner

    found = runner.cached(job)
    if found is not None:
        return found
    if runner.collecting():
        return None
    ask = st.empty()  # the button goes once clicked: the run's progress takes its place
    with ask.container():
        clicked = st.button(
            t("Measure it on this server"),
            key=key,
            icon=":material/play_arrow:",
        )
        st.caption(
            t(
                "Not measured on this server for this setting yet: one click runs it "
                "(about {duration}) and stores it for every learner.",
                duration=runner.duration_text(runner.estimated_seconds(job)),
            )
        )
    if not clicked:
        return None
    ask.empty()
    return run(job)
