"""The anonymous learner: an id kept in a first-party cookie, so progress and quiz attempts
follow the learner across reloads and tabs of the same browser without an account.

Streamlit reads cookies (`st.context.cookies`, sent with the websocket's upgrade request)
but cannot set one, so a new id is written by a one-line script (`st.html` with JavaScript)
that runs in the page; the next reload or tab sends it back. The client address is the
fallback that ties a learner without a past (a new tab without the cookie, a script) to
the attempts made from the same address.
"""

from __future__ import annotations

import secrets

import streamlit as st

from quiz.progress import is_learner_id

COOKIE = "gcl_learner"
COOKIE_MAX_AGE_S = 365 * 24 * 3600
_SESSION_KEY = "learner_id"
_MADE_KEY = "learner_id_made_here"


def learner_id() -> str:
    """This browser's learner id: from the session, else the cookie, else a new one."""
    known = st.session_state.get(_SESSION_KEY)
    if is_learner_id(known):
        return known
    cookie = st.context.cookies.get(COOKIE)
    chosen = cookie if is_learner_id(cookie) else secrets.token_urlsafe(18)
    st.session_state[_SESSION_KEY] = chosen
    st.session_state[_MADE_KEY] = chosen != cookie
    return chosen


def made_here() -> bool:
    """Whether this session made the learner's id up (the browser sent none): until the
    cookie reaches another tab, nothing else can have stored anything for it."""
    learner_id()
    return bool(st.session_state.get(_MADE_KEY))


def keep_cookie() -> None:
    """Write the id into the browser's cookie when the browser did not send it (draws
    nothing visible). Called once per run by the sidebar."""
    current = learner_id()
    if st.context.cookies.get(COOKIE) == current:
        return
    st.html(
        f"<script>document.cookie = '{COOKIE}={current}; Max-Age={COOKIE_MAX_AGE_S}; "
        "Path=/; SameSite=Lax';</script>",
        unsafe_allow_javascript=True,
    )


def client_address() -> str | None:
    """The client's address: the first X-Forwarded-For entry (the proxy must set it, see
    docs/HOSTING.md), else the websocket peer (None on localhost)."""
    forwarded = st.context.headers.get("X-Forwarded-For", "")
    first = forwarded.split(",")[0].strip() if isinstance(forwarded, str) else ""
    peer = st.context.ip_address
    return first[:64] if first else peer if isinstance(peer, str) else None
