"""Widgets bound to the URL query, so a link reproduces a demo.

`?layers=16&hidden=256&heads=4&seq=256&batch=4&vocab=8192&dtype=float32&strategy=every-layer`:
each query name is also the widget's key. A widget takes its first value from the query
(validated and clamped, with a clear warning for a bad value such as ?layers=99999 or
?layers=abc) and writes its value back to the query on every run.

The parse_* functions are pure (no Streamlit), so they are unit-tested directly.

Every warning echoes the link's text, which anyone can write: it is shown as literal text
(quiz.markdown.escape_markdown), never as a link, an image or coloured text. A query over
Streamlit's limits (512 Ki characters or 1,000 parameters), which Streamlit drops before the
page runs, is reported instead of silently replaced by the defaults
(`install_limit_notice`, called before the server starts).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from i18n import DEFAULT, N_, gettext, ngettext
from quiz.markdown import escape_markdown
from ui.i18n import current_language, fmt_number, number_label, slider_format, t

LOG = logging.getLogger(__name__)
# Put in place of a query Streamlit drops for being over its limits (install_limit_notice).
DROPPED = "_query_dropped"

T = TypeVar("T")

# Query name -> ModelConfig field. The query uses the short `seq`.
CONFIG_FIELDS: dict[str, str] = {
    "layers": "layers", "hidden": "hidden", "heads": "heads", "seq": "seq_len",
    "batch": "batch", "vocab": "vocab",
}


@dataclass(frozen=True)
class Parsed(Generic[T]):
    value: T
    warning: str | None = None


# The warnings, catalog messages worded in the language the parse functions are given
# (the widgets below pass the session's): `{raw}` is the link's text, shortened and quoted.
NOT_A_NUMBER = N_("?{name}={raw} is not a number; using {default}.")
OUTSIDE = N_("?{name}={raw} is outside the range {lo}–{hi} {where}; using {value}.")
OFF_GRID = N_("?{name}={raw} is not one of the allowed values (steps of {step} from {lo}); "
              "using {value}.")
NOT_AVAILABLE = N_("?{name}={raw} is not available {where} (choose from {choices}); using "
                   "{default}.")
NONE_AVAILABLE = N_("?{name}={raw}: none of these is available (choose from {choices}); "
                    "using {default}.")
HERE = N_("here")


SHOWN_CHARACTERS = 40  # of a query value a page echoes


def shown(raw: str) -> str:
    """A query value as a page echoes it: quoted, cut to SHOWN_CHARACTERS."""
    text = raw if len(raw) <= SHOWN_CHARACTERS else raw[:SHOWN_CHARACTERS - 3] + "..."
    return repr(text)


def _where(where: str | None, lang: str) -> str:
    return where if where is not None else gettext(lang, HERE)


def _number(raw: str | None, *, name: str, default: T, lang: str) -> float | Parsed[T]:
    """The finite number `raw` holds, or the default to use instead (with a warning when
    `raw` is text that is not a number)."""
    if raw is None or raw.strip() == "":
        return Parsed(default)
    try:
        number = float(raw.strip())
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        return Parsed(default, gettext(lang, NOT_A_NUMBER, name=name, raw=shown(raw),
                                       default=default))
    return number


def parse_int(raw: str | None, *, name: str, lo: int, hi: int, default: int, step: int = 1,
              where: str | None = None, lang: str = DEFAULT) -> Parsed[int]:
    """A whole number within lo..hi on the step grid from lo; else the nearest allowed value
    (or the default for text that is not a number), with a warning that says why, in the
    language `lang` (`where`: "on this CPU" in that language; None: "here")."""
    number = _number(raw, name=name, default=default, lang=lang)
    if isinstance(number, Parsed):
        return number
    value = min(max(number, lo), hi)
    value = lo + round((value - lo) / step) * step
    value = int(min(max(value, lo), hi))
    if number < lo or number > hi:
        return Parsed(value, gettext(lang, OUTSIDE, name=name, raw=shown(raw), lo=lo, hi=hi,
                                     where=_where(where, lang), value=value))
    if value != number:
        return Parsed(value, gettext(lang, OFF_GRID, name=name, raw=shown(raw), step=step,
                                     lo=lo, value=value))
    return Parsed(value)


def parse_float(raw: str | None, *, name: str, lo: float, hi: float, default: float,
                where: str | None = None, lang: str = DEFAULT) -> Parsed[float]:
    number = _number(raw, name=name, default=default, lang=lang)
    if isinstance(number, Parsed):
        return number
    value = min(max(number, lo), hi)
    if value != number:
        return Parsed(value, gettext(lang, OUTSIDE, name=name, raw=shown(raw), lo=lo, hi=hi,
                                     where=_where(where, lang), value=value))
    return Parsed(value)


def parse_choice(raw: str | None, *, name: str, choices: Sequence[str], default: str,
                 where: str | None = None, lang: str = DEFAULT) -> Parsed[str]:
    if raw is None or raw.strip() == "":
        return Parsed(default)
    value = raw.strip()
    if value in choices:
        return Parsed(value)
    return Parsed(default, gettext(lang, NOT_AVAILABLE, name=name, raw=shown(raw),
                                   where=_where(where, lang), choices=", ".join(choices),
                                   default=default))


def parse_list(raw: Sequence[str] | str | None, *, name: str, choices: Sequence[str],
               default: Sequence[str], implied: Sequence[str] = (),
               lang: str = DEFAULT) -> Parsed[tuple[str, ...]]:
    """Comma-separated (or repeated) names, each one of `choices`; unknown names are
    dropped with a warning, duplicates removed, and the choices' order kept. `implied`
    names (always included anyway, such as the `none` baseline) are dropped silently."""
    if raw is None:
        return Parsed(tuple(default))
    items = [raw] if isinstance(raw, str) else list(raw)
    names = [part.strip() for item in items for part in item.split(",")
             if part.strip() and part.strip() not in implied]
    if not names:
        return Parsed(tuple(default))
    unknown = [n for n in names if n not in choices]
    known = tuple(c for c in choices if c in names)
    if not known:
        return Parsed(tuple(default), gettext(lang, NONE_AVAILABLE, name=name,
                                              raw=shown(",".join(names)),
                                              choices=", ".join(choices),
                                              default=",".join(default)))
    if unknown:
        return Parsed(known, ngettext(
            lang, "?{name}: {names} is not available (choose from {choices}); ignored.",
            "?{name}: {names} are not available (choose from {choices}); ignored.",
            len(unknown), name=name, names=", ".join(map(shown, unknown)),
            choices=", ".join(choices)))
    return Parsed(known)


def format_list(values: Sequence[str]) -> str:
    return ",".join(values)


# ---------------------------------------------------------------- Streamlit widgets


_PAGE = "_query_page"
_BOUND = "_query_bound"


def _current_page() -> str:
    ctx = get_script_run_ctx()
    return ctx.page_script_hash if ctx is not None else ""


def _enter_page() -> None:
    """Arriving from another page, forget the values its query-bound widgets left behind.

    Two pages use the same keys (`layers`, `strategy`, ...) for different widgets; the old
    page's stale value would otherwise block this page's seeding from the URL, and its
    widget would start at its minimum. The URL, which still carries the settings, seeds
    the new page's widgets instead, so settings follow the learner from demo to demo."""
    page = _current_page()
    if st.session_state.get(_PAGE) == page:
        return
    for name in st.session_state.get(_BOUND, ()):
        if name in st.session_state:
            del st.session_state[name]
    st.session_state[_PAGE] = page
    st.session_state[_BOUND] = []


def _needs_seed(name: str) -> bool:
    """True the first time a widget is drawn on this page, and when it comes back after a
    run without it (Streamlit then dropped its state)."""
    _enter_page()
    return name not in st.session_state.get(_BOUND, ()) or name not in st.session_state


def _first_value(name: str, parsed: Parsed[T]) -> None:
    """Seed the widget's state from the query when it needs a value."""
    if _needs_seed(name):
        bound = st.session_state.setdefault(_BOUND, [])
        if name not in bound:
            bound.append(name)
        if parsed.warning:
            show_warning(parsed.warning)
        st.session_state[name] = parsed.value


def show_warning(text: str) -> None:
    """A warning about the link: its text (which echoes what anyone can put in a link) as
    literal text, never Markdown."""
    st.warning(escape_markdown(text), icon=":material/link_off:")


def install_limit_notice() -> None:
    """Make a query that Streamlit drops for its size (over 512 Ki characters or 1,000
    parameters) arrive as ?_query_dropped=1, so the page says why the link's settings were
    not used (`limit_notice`) instead of showing the defaults silently."""
    from streamlit.runtime import app_session
    from streamlit.runtime.state import query_params

    original = query_params.sanitize_query_string
    if getattr(app_session.sanitize_query_string, "reports_drop", False):
        return

    def sanitize(query_string: str) -> str:
        kept = original(query_string)
        return f"{DROPPED}=1" if query_string and not kept else kept

    sanitize.reports_drop = True  # type: ignore[attr-defined]
    app_session.sanitize_query_string = sanitize


def limit_notice() -> None:
    """Say so, once, when the link's query was dropped for its size (install_limit_notice)."""
    if st.query_params.get(DROPPED) is None:
        return
    del st.query_params[DROPPED]
    from streamlit.runtime.state.query_params import (
        CLIENT_STATE_QUERY_STRING_MAX_FIELDS,
        CLIENT_STATE_QUERY_STRING_MAX_LENGTH,
    )
    LOG.info("a query over Streamlit's limits was dropped; the page uses its defaults")
    st.warning(t("The link's settings were not used: the link is longer than the server "
                 "accepts ({characters} characters or {fields} settings), so the defaults are "
                 "shown.", characters=fmt_number(CLIENT_STATE_QUERY_STRING_MAX_LENGTH),
                 fields=fmt_number(CLIENT_STATE_QUERY_STRING_MAX_FIELDS)),
               icon=":material/link_off:")


def _write_back(name: str, text: str) -> None:
    if st.query_params.get(name) != text:
        st.query_params[name] = text


def _shown(name: str, fallback: T) -> T:
    """The widget's value this run, passed to Streamlit as its default too. A widget whose
    value was set through the Session State API otherwise carries its bare default (a
    slider's minimum, a radio's first option) in the page; a browser that draws it again
    before it took the set value (a busy tab, its row re-created in the next run) showed
    that default and sent it back on the next click."""
    return st.session_state.get(name, fallback)


def _query_text(name: str) -> str | None:
    """The query's text for `name` when the widget is about to be seeded, else None."""
    return st.query_params.get(name) if _needs_seed(name) else None


def int_slider(name: str, label: str, lo: int, hi: int, step: int, default: int, *,
               help: str | None = None, where: str | None = None) -> int:
    """A slider whose key and query name are `name`."""
    default = int(min(max(default, lo), hi))
    _first_value(name, parse_int(_query_text(name), name=name, lo=lo, hi=hi, default=default,
                                 step=step, where=where, lang=current_language()))
    shape = slider_format()
    label = number_label(label, st.session_state.get(name), hi,
                         localized=shape == "localized")
    value = int(st.slider(label, min_value=lo, max_value=hi, value=_shown(name, default),
                          step=step, key=name, help=help, format=shape))
    _write_back(name, str(value))
    return value


def float_slider(name: str, label: str, lo: float, hi: float, step: float, default: float, *,
                 help: str | None = None, where: str | None = None) -> float:
    _first_value(name, parse_float(_query_text(name), name=name, lo=lo, hi=hi,
                                   default=default, where=where, lang=current_language()))
    shape = slider_format()
    label = number_label(label, st.session_state.get(name), hi,
                         localized=shape == "localized")
    value = float(st.slider(label, min_value=lo, max_value=hi, value=_shown(name, default),
                            step=step, key=name, help=help, format=shape))
    _write_back(name, f"{value:g}")
    return value


def choice(name: str, label: str, options: Sequence[str], default: str, *,
           help: str | None = None, where: str | None = None, horizontal: bool = True,
           format_func: Callable[[str], str] = str) -> str:
    """A radio whose key and query name are `name` (the URL holds the option, the radio
    shows format_func(option))."""
    options = list(options)
    default = default if default in options else options[0]
    _first_value(name, parse_choice(_query_text(name), name=name, choices=options,
                                    default=default, where=where, lang=current_language()))
    # The labels are made now, in this run's language: Streamlit (and AppTest) may call
    # format_func later, outside the run, where the session's language is unknown.
    labels = {option: format_func(option) for option in options}
    shown = _shown(name, default)
    value = st.radio(label, options, key=name, help=help, horizontal=horizontal,
                     index=options.index(shown if shown in options else default),
                     format_func=lambda option: labels.get(option, str(option)))
    if value not in options:  # a value the radio never offered (a forged message)
        LOG.info("refused a value that is not an option of %s: %.40r", name, value)
        value = default
    _write_back(name, str(value))
    return str(value)


def multi_choice(name: str, label: str, options: Sequence[str], default: Sequence[str], *,
                 help: str | None = None, implied: Sequence[str] = (),
                 format_func: Callable[[str], str] = str) -> tuple[str, ...]:
    """A multiselect written to the query as comma-separated names (?strategy=a,b); it
    shows format_func(option) (the URL keeps the names)."""
    options = list(options)
    raw = st.query_params.get_all(name) if _needs_seed(name) else None
    parsed = parse_list(raw or None, name=name, choices=options,
                        default=[d for d in default if d in options], implied=implied,
                        lang=current_language())
    _first_value(name, Parsed(list(parsed.value), parsed.warning))
    labels = {option: format_func(option) for option in options}  # in this run's language
    shown = [o for o in _shown(name, parsed.value) if o in options]
    values = tuple(st.multiselect(label, options, default=shown, key=name, help=help,
                                  format_func=labels.__getitem__))
    ordered = tuple(o for o in options if o in values)
    _write_back(name, format_list(ordered))
    return ordered
