"""The "Download as Open Badge (JSON)" button of the certificate and verify pages: the
certificate's Open Badges 3.0 credential (quiz.badges), built once per certificate, address
and key for every session. A credential that cannot be made now gets one line saying so;
the PDF and the verify link are not affected."""

from __future__ import annotations

import logging
from typing import Any

import streamlit as st

from quiz import config
from quiz.badges import CredentialRefused, badge_for
from quiz.certificate_records import Certificate
from quiz.certificates import StorageError
from quiz.service import QuizService
from storage.database import StorageUnavailable
from ui.i18n import t

LOG = logging.getLogger(__name__)


@st.cache_data(max_entries=64, show_spinner=False)
def _cached_badge(certificate: Certificate, base: str, key_id: str | None,
                  _service: QuizService) -> tuple[bytes, str]:
    """The credential's file and name; `key_id` (the signing key) is part of the cache key:
    after a rotation a new credential is signed by the new key."""
    badge = badge_for(_service, certificate.id, base)
    return badge.json_bytes, badge.filename


def badge_button(container: Any, service: QuizService, certificate: Certificate | None,
                 reached: str | None) -> None:
    """The download button in `container` (a column), or why there is none now; for no
    valid certificate (`None`) or a revoked one the same button, disabled, so every verify
    outcome has the same layout."""
    label = t("Download as Open Badge (JSON)")
    if certificate is None or certificate.revoked_at:
        container.download_button(label, data=b"", disabled=True, icon=":material/badge:",
                                  help=t("Only a valid certificate has an Open Badge."),
                                  key="open-badge-none")
        return
    base = config.base_url(reached)
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
