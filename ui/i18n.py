"""The session's language on the Streamlit side: which one, the picker, and `t()`.

Every run resolves the language again (`current_language`): the URL's ``?lang=`` first,
then the choice this session made earlier (a page change through the navigation may drop
the query), then the browser's language (`st.context.locale`), then English. Nothing is
installed process-wide: `t()` asks the per-language translation (shared, read-only) for
this session's language each time. The language is resolved once per run and kept on the
run's context (a page calls `t()` hundreds of times); the picker's callback drops it.

    from ui.i18n import t, tn
    st.header(t("Compare strategies"))
    st.caption(t("Peak memory {size:.1f} GB, measured on {device}", size=4.0, device=name))
    st.markdown(tn("{count:,} token", "{count:,} tokens", count=1024))   # 1.024 Tokens
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from i18n import catalog, numbers
from i18n.languages import (
    CODES,
    QUERY_KEY,
    language,
    match_locale,
    parse_lang,
    resolve_language,
)
from i18n.languages import with_lang as _with_lang

_CHOSEN = "i18n_language"  # session_state: the language the URL or the picker chose
PICKER_KEY = "i18n_picker"
_RUN_CACHE = "_i18n_run_language"  # on the ScriptRunContext: (that run's cursors, code)


def current_language() -> str:
    """This session's language code for this run ("en", "de", "vi").

    A language chosen in the URL or the picker is kept in the session and written back
    to ``?lang=`` when a page change dropped it, so a reload or a copied URL keeps it. A
    language taken from the browser is not written into the URL, so a shared link opens
    in its reader's own language.
    """
    ctx = get_script_run_ctx()
    cached = getattr(ctx, _RUN_CACHE, None)
    # `reset()` gives every run a new `cursors` dict: a value from an earlier run never matches.
    if cached is not None and cached[0] is ctx.cursors:
        return cached[1]
    code = _resolve_language()
    if ctx is not None:
        setattr(ctx, _RUN_CACHE, (ctx.cursors, code))
    return code


def _resolve_language() -> str:
    raw = st.query_params.get(QUERY_KEY)
    chosen = st.session_state.get(_CHOSEN)
    code = resolve_language(raw, chosen, st.context.locale)
    if parse_lang(raw) is not None:
        st.session_state[_CHOSEN] = code
    explicit = st.session_state.get(_CHOSEN) is not None
    if explicit and raw != code:
        st.query_params[QUERY_KEY] = code
    elif raw is not None and not explicit:
        del st.query_params[QUERY_KEY]  # ?lang=xx names no language we have
    return code


def slider_format() -> str | None:
    """The format of a slider's numbers: the browser's own number format ("localized":
    1,024 in English, 1.024 in German and Vietnamese) when the session's language is the
    browser's, else Streamlit's plain default (1024), never another language's separators
    (a German reader must not see 1,024 for a thousand and twenty-four)."""
    if match_locale(st.context.locale) == current_language():
        return "localized"
    return None


GROUPED_FROM = 1000  # from here on a number's digits are grouped (1,024 / 1.024)


def number_label(label: str, value: float | None, high: float, *,
                 localized: bool = False) -> str:
    """A number widget's label, with its value in the session's format where the widget
    cannot show it so. Streamlit writes a slider's numbers in the browser's format
    ("localized": only when that is the session's language, `slider_format`) or by a
    printf-style string, which groups no digits, and a number input's by printf only: a
    German session would read 8192 where it writes 8.192. A widget whose range reaches
    GROUPED_FROM, and whose own numbers are not `localized`, so carries its value in its
    label: "Vokabular · 8.192"."""
    if localized or value is None or abs(high) < GROUPED_FROM:
        return label
    shown = fmt_number(int(value)) if float(value).is_integer() else fmt_decimal(value)
    return f"{label} · {shown}"


def enter_hint() -> None:
    """Under a form's text field, in the session's language: Streamlit's own hint ("Press
    Enter to submit form") has no translations and is hidden (ui.sidebar's CSS)."""
    st.caption(t("Press Enter or the button below to send."))


def babel_locale() -> str:
    """The session's Babel locale ("de_DE"), for formatters that take one."""
    return language(current_language()).babel_locale


def t(msgid: str, **params: Any) -> str:
    """`msgid` in the session's language, {named} placeholders filled (numbers localized)."""
    return catalog.gettext(current_language(), msgid, **params)


def tn(singular: str, plural: str, count: int, **params: Any) -> str:
    """The singular or plural form for `count` by the session language's rule; `{count}`
    is the number itself."""
    return catalog.ngettext(current_language(), singular, plural, count, **params)


def pt(context: str, msgid: str, **params: Any) -> str:
    """`t` for a short message whose translation depends on where it is shown."""
    return catalog.pgettext(current_language(), context, msgid, **params)


def fmt_decimal(value: float, digits: int | None = None, grouping: bool = True) -> str:
    """A number in the session's style with `digits` decimals: 4,0 in German."""
    return numbers.format_decimal(value, current_language(), digits, grouping)


def fmt_number(value: int) -> str:
    """A whole number with the session's thousands separator: 1.024 in German."""
    return numbers.format_number(value, current_language())


def fmt_percent(value: float, digits: int = 0) -> str:
    """A fraction as a percentage in the session's style: 30 % in German."""
    return numbers.format_percent(value, current_language(), digits)


def with_lang(target: str | Mapping[str, str]) -> str | dict[str, str]:
    """A URL, path, query string or query dict carrying the session's language, for links
    learners share (demo links, certificate links): see `i18n.languages.with_lang`."""
    return _with_lang(target, current_language())


def _picked() -> None:
    code = st.session_state[PICKER_KEY]
    st.session_state[_CHOSEN] = code
    st.query_params[QUERY_KEY] = code
    ctx = get_script_run_ctx()
    if ctx is not None and hasattr(ctx, _RUN_CACHE):
        delattr(ctx, _RUN_CACHE)  # another callback of this run may have resolved the old one


def language_picker() -> None:
    """The language select box (English / Deutsch / Tiếng Việt), drawn where it is called.

    Switching reruns the same page in the same session: the page, its other query
    parameters and everything in session_state (a quiz attempt) stay as they were.
    """
    # Set on every run, not only when it differs: a run stopped early (st.rerun before the
    # sidebar) lets Streamlit forget the widget, and the picker then fell back to English.
    st.session_state[PICKER_KEY] = current_language()
    st.selectbox(
        ":material/translate: " + t("Language"),
        options=CODES,
        format_func=lambda item: language(item).native_name,
        key=PICKER_KEY,
        on_change=_picked,
    )
