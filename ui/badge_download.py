"""The "Download as Open Badge (JSON)" button of the certificate and verify pages: the
certificate's Open Badges 3.0 credential (quiz.badges), built once per certificate, address
and key for every session. A credential that cannot be made now gets one line saying so;
the PDF and the verify link are not affected.

A credential is signed with the app's public address (APP_BASE_URL), never with the address
the learner's browser reports: without APP_BASE_URL the button stays disabled and says that
the operator has not set it (and the server log says so once).

The status lists a credential points to are served by Streamlit's static file serving
(/app/static/status/<key id>.json); `cache_status_lists` adds how long a cache may keep
them (Cache-Control), installed by the server before it starts."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import streamlit as st

from quiz.badges import CredentialRefused, NoAddress, badge_for, public_address
from quiz.certificate_records import Certificate
from quiz.certificates import StorageError
from quiz.service import QuizService
from quiz.status_list import CACHE_SECONDS
from storage.database import StorageUnavailable
from ui.i18n import t

LOG = logging.getLogger(__name__)
_TOLD = threading.Event()  # the log says once per process that APP_BASE_URL is not set


@st.cache_data(max_entries=64, show_spinner=False)
def _cached_badge(certificate: Certificate, base: str, key_id: str | None,
                  _service: QuizService) -> tuple[bytes, str]:
    """The credential's file and name; `key_id` (the signing key) is part of the cache key:
    after a rotation a new credential is signed by the new key."""
    badge = badge_for(_service, certificate.id)
    return badge.json_bytes, badge.filename


def badge_button(container: Any, service: QuizService,
                 certificate: Certificate | None) -> None:
    """The download button in `container` (a column), or why there is none now; for no
    valid certificate (`None`) or a revoked one the same button, disabled, so every verify
    outcome has the same layout."""
    label = t("Download as Open Badge (JSON)")
    try:
        base = public_address()
    except NoAddress as problem:  # the same for every outcome: one layout
        if not _TOLD.is_set():
            _TOLD.set()
            LOG.warning("no Open Badge is offered: %s", problem)
        why = t("Open Badges are offered once the course's operator sets the app's public "
                "address (APP_BASE_URL). The certificate, its PDF and its verify link are "
                "not affected.")
        container.download_button(label, data=b"", disabled=True, icon=":material/badge:",
                                  help=why, key="open-badge-no-address")
        container.caption(why)
        return
    if certificate is None or certificate.revoked_at:
        container.download_button(label, data=b"", disabled=True, icon=":material/badge:",
                                  help=t("Only a valid certificate has an Open Badge."),
                                  key="open-badge-none")
        return
    try:
        data, filename = _cached_badge(certificate, base, service.key_id, service)
    except (CredentialRefused, StorageError, StorageUnavailable) as problem:
        LOG.warning("no Open Badge for %s: %s", certificate.id, problem)
        container.caption(t("The Open Badge cannot be made right now (the server has logged "
                            "why); the certificate itself is not affected."))
        return
    container.download_button(
        label,
        data=data,
        file_name=filename,
        mime="application/json",
        icon=":material/badge:",
        help=t("A signed Open Badges 3.0 credential of this certificate: add it to a digital "
               "wallet, a learning platform or a profile that reads Open Badges."),
        key=f"open-badge-{certificate.id}",
    )


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]],
                    Callable[[Message], Awaitable[None]]], Awaitable[None]]
_STATUS_PATH = re.compile(r"(^|/)app/static/status/[^/]+\.json$")
CACHE_CONTROL = f"public, max-age={CACHE_SECONDS}".encode()


class CacheStatusLists:
    """ASGI middleware: a status list served at <base path>/app/static/status/<key>.json
    says how long a cache may keep it (`Cache-Control: public, max-age=CACHE_SECONDS`, a
    small part of the day a signed list is valid), in place of none."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope.get("type") != "http" or not _STATUS_PATH.search(scope.get("path", "")):
            await self.app(scope, receive, send)
            return

        async def with_cache_control(message: Message) -> None:
            if message.get("type") == "http.response.start" and message.get("status") == 200:
                headers = [(name, value) for name, value in message.get("headers", [])
                           if name.lower() != b"cache-control"]
                message = {**message, "headers": [*headers, (b"cache-control", CACHE_CONTROL)]}
            await send(message)

        await self.app(scope, receive, with_cache_control)


def cache_status_lists() -> None:
    """Add CacheStatusLists to the middleware of the server Streamlit builds (call before it
    starts: `python -m ui.server` does)."""
    from starlette.middleware import Middleware
    from streamlit.web.server.starlette import starlette_app

    build = starlette_app.create_streamlit_middleware
    if getattr(build, "caches_status_lists", False):
        return

    def with_status_lists() -> list[Middleware]:
        return [*build(), Middleware(CacheStatusLists)]

    with_status_lists.caches_status_lists = True  # type: ignore[attr-defined]
    starlette_app.create_streamlit_middleware = with_status_lists
