"""Where the pages and the CLI get a certificate's Open Badges 3.0 credential: only a valid
certificate gets one (a revoked, unknown or unprovable one is refused with one line that
says why), signed by the key that signs certificates today, with its status list position
and its key's status list in the database (published to the static folder at once)."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from quiz import config
from quiz.certificate_records import Certificate, Status
from quiz.ids import file_name_part
from quiz.open_badge import credential
from quiz.service import QuizService
from quiz.status_list import (
    ensure_list,
    position_of,
    publish,
    refresh,
    retired_signers,
    status_folder,
    status_url,
)
from storage.database import StorageUnavailable

LOG = logging.getLogger(__name__)


class CredentialRefused(RuntimeError):
    """No credential for this ID now: the message (one line) says why."""


@dataclass(frozen=True)
class Badge:
    certificate: Certificate
    document: dict[str, Any]

    @property
    def json_bytes(self) -> bytes:
        """The credential as a file: UTF-8 JSON, names in their own letters."""
        return (json.dumps(self.document, ensure_ascii=False, indent=2) + "\n").encode()

    @property
    def filename(self) -> str:
        return f"open-badge-{file_name_part(self.certificate.id)}.json"


def badge_for(service: QuizService, text: str, reached: str | None = None) -> Badge:
    """The credential of the certificate with ID `text`; `reached`: the address the app was
    reached by (APP_BASE_URL wins). CredentialRefused when there is none to give."""
    result = service.verify(text)
    certificate = result.certificate
    if result.status is Status.TYPO:
        raise CredentialRefused(
            f"{text.strip()!r} is not a certificate ID "
            f"({result.problem.value if result.problem else 'malformed'})")
    if result.status is Status.NOT_FOUND or certificate is None:
        raise CredentialRefused(f"no certificate {result.id_text} was issued here")
    if result.status is Status.REVOKED:
        raise CredentialRefused(
            f"certificate {certificate.id} was revoked on {certificate.revoked_at} "
            f"({certificate.revoke_reason}): no credential is issued for it")
    if not result.valid:
        raise CredentialRefused(
            f"certificate {certificate.id} cannot be proven ({result.status.value}): no "
            "credential is issued for it")
    signer = service.signer
    if signer is None:
        raise CredentialRefused(
            "no signing key is configured (no signing_key.pem in the data folder and no "
            "CERT_SIGNING_KEY), so no credential can be signed: restore the key from a backup")
    base = config.base_url(reached)
    url = status_url(base, signer.key_id)
    ensure_list(service.data_dir, signer, url, time.time(),
                configured=config.base_url_configured())
    position = position_of(service.data_dir, certificate.id)
    try:
        publish(service.data_dir)
    except (OSError, StorageUnavailable):  # the server's publisher tries again
        LOG.warning("status lists not published to the static folder now", exc_info=True)
    return Badge(certificate, credential(certificate, signer.private_key, base, url, position))


def after_revocation(service: QuizService) -> list[str]:
    """Sign every key's status list again with the revocations (the current key and the
    retired key files in the data folder) and publish them; warnings for lists whose key
    is not here (their credentials keep showing 'not revoked' to outside verifiers)."""
    signers = [signer for signer in (service.signer,) if signer is not None]
    signers += retired_signers(service.data_dir)
    _, missing = refresh(service.data_dir, signers, time.time())
    warnings = [
        f"the status list of key {key_id} was not signed again: its private key is not in "
        f"{service.data_dir} (credentials it signed still read 'not revoked' to other "
        "verifiers; the verify page shows the revocation)"
        for key_id in missing
    ]
    try:
        publish(service.data_dir)
    except OSError as error:
        warnings.append(f"the status lists are signed in the database but could not be "
                        f"copied to {status_folder()} here ({error.strerror}); every running "
                        "app server copies them within seconds")
    return warnings
