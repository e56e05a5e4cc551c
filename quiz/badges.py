"""Where the pages and the CLI get a certificate's Open Badges 3.0 credential: only a valid
certificate gets one (a revoked, unknown or unprovable one is refused with one line that
says why), signed by the key that signs certificates today, with its status list position
and its key's status list in the database (published to the static folder at once).

A credential names the app's address three times (its `id`, the issuer's `url`, the status
list's address), all signed: that address is the public one the operator configured
(APP_BASE_URL, or a command's --base-url), never one a browser reported, which a learner
can choose. Without it no credential is built (NoPublicAddress)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from quiz import config
from quiz.certificate_records import Certificate, Status
from quiz.config import NoPublicAddress
from quiz.ids import file_name_part
from quiz.open_badge import credential
from quiz.service import QuizService
from quiz.signing import KEY_FILE, key_source
from quiz.status_list import (
    available_signers,
    ensure_list,
    position_of,
    publish,
    sign_due,
    status_folder,
    status_url,
    stored_list,
)
from storage.database import StorageUnavailable

LOG = logging.getLogger(__name__)


class CredentialRefused(RuntimeError):
    """No credential for this ID now: the message (one line) says why."""


class NoAddress(CredentialRefused):
    """No credential is built anywhere: the app's public address is not configured."""


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


def public_address(base_url: str | None = None) -> str:
    """The address credentials carry: `base_url` (a command's --base-url) or APP_BASE_URL.
    NoAddress (one line) when neither is set."""
    try:
        return config.public_base_url(base_url)
    except NoPublicAddress as problem:
        raise NoAddress(str(problem)) from problem


def _unreadable_key(service: QuizService) -> str | None:
    """Why the service has no signer although a key is there (damaged or unreadable), or
    None (it has one, or there is none at all)."""
    if service.signer is not None:
        return None
    where = key_source(service.data_dir, config.signing_key_env())
    if where is None and service.warnings:  # it could not be read when the service opened
        where = str(service.data_dir / KEY_FILE)
    return f"the signing key ({where}) is damaged or unreadable" if where else None


def _key_problem(service: QuizService) -> str:
    """Why no credential can be signed by this service."""
    unreadable = _unreadable_key(service)
    if unreadable:
        return f"{unreadable}, so no credential can be signed: restore it from a backup"
    return ("no signing key is configured (no signing_key.pem in the data folder and no "
            "CERT_SIGNING_KEY), so no credential can be signed: restore the key from a backup")


def badge_for(service: QuizService, text: str, base_url: str | None = None) -> Badge:
    """The credential of the certificate with ID `text`, on the public address (`base_url`,
    a command's --base-url, else APP_BASE_URL; see public_address). CredentialRefused when
    there is none to give."""
    base = public_address(base_url)
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
        raise CredentialRefused(_key_problem(service))
    url = status_url(base, signer.key_id)
    ensure_list(service.data_dir, signer, url, time.time())
    position = position_of(service.data_dir, certificate.id)
    try:
        publish(service.data_dir)
    except (OSError, StorageUnavailable) as problem:  # the server's publisher tries again
        LOG.warning("status lists not published to the static folder now: %s", problem)
    return Badge(certificate, credential(certificate, signer.private_key, base, url, position))


@dataclass(frozen=True)
class Published:
    """What a revocation did to the status lists: `error`, one line, when a list that must
    carry it could not be signed: its key is here but damaged or unreadable (a server signs
    the list once it can read the key), or gone while the list it signed last is still
    valid (outside verifiers read 'not revoked' until it expires); the revocation is
    recorded all the same. `warnings` for a gone key's list that has expired (outside
    status checks of its credentials fail already) and for lists that could not be
    copied."""

    warnings: tuple[str, ...] = ()
    error: str | None = None


def _valid_until(service: QuizService, key_id: str) -> float | None:
    """When key `key_id`'s stored list stops verifying (its validUntil, seconds since the
    epoch); None for a list signed with none."""
    stored = stored_list(service.data_dir, key_id) or {}
    until = stored.get("validUntil")
    return dt.datetime.fromisoformat(until).timestamp() if until else None


def _utc(moment: float) -> str:
    return dt.datetime.fromtimestamp(moment, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def after_revocation(service: QuizService, now: float | None = None) -> Published:
    """Sign again every key's status list that misses the revocation (the current key and
    the retired key files in the data folder), and publish them."""
    signers, problems = available_signers(service.data_dir, service.signer,
                                          _unreadable_key(service))
    try:
        base = public_address()
    except NoAddress:
        base = None  # the lists keep their addresses
    try:
        signing = sign_due(service.data_dir, signers, time.time() if now is None else now,
                           base)
    except StorageUnavailable as failure:
        return Published(error=f"the status lists could not be signed again ({failure}); "
                         "the revocation is recorded, and a running app server signs them "
                         "within seconds of the database's recovery")
    warnings = []
    error = None
    if signing.behind and problems:
        error = (f"the status list(s) of key(s) {', '.join(signing.behind)} could not be "
                 f"signed again: {'; '.join(problems)}. The revocation is recorded; outside "
                 "verifiers see it once the key is restored (a running app server signs "
                 "the lists within seconds of that)")
    elif signing.behind:
        moment = time.time() if now is None else now
        until = {key_id: _valid_until(service, key_id) for key_id in signing.behind}
        valid = {key_id: end for key_id, end in until.items() if end is None or end > moment}
        if valid:
            ends = [end for end in valid.values() if end is not None]
            how_long = (f"until the list expires ({_utc(max(ends))})" if len(ends) == len(valid)
                        else "for as long as the list is served (it was signed with no "
                        "validUntil)")
            error = (f"the status list(s) of key(s) {', '.join(valid)} could not be signed "
                     f"again: their private key is not in {service.data_dir}, so credentials "
                     f"they signed read 'not revoked' to other verifiers {how_long}. The "
                     "revocation is recorded (the verify page shows it); restore the key "
                     "file to sign the list now")
        warnings += [
            f"the status list of key {key_id} was not signed again: its private key is not "
            f"in {service.data_dir}, and the list expired on {_utc(end)}, so other "
            "verifiers' status checks of the credentials it signed fail already (the "
            "verify page shows the revocation)"
            for key_id, end in until.items() if key_id not in valid and end is not None]
    try:
        publish(service.data_dir)
    except OSError as failure:
        warnings.append(f"the status lists are signed in the database but could not be "
                        f"copied to {status_folder()} here ({failure.strerror}); every "
                        "running app server copies them within seconds")
    return Published(tuple(warnings), error)
