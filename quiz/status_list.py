"""Revocation that a standard verifier sees: W3C Bitstring Status List v1.0.

Every certificate's credential gets a position in a list of 131,072 bits (the size the
specification gives for herd privacy), drawn at random the first time its credential is
built and kept in the database (`badge_status_positions`, unique, so two servers never hand
out one position twice). The bit is 1 when the certificate is revoked.

Each signing key publishes its own list, a `BitstringStatusListCredential` signed by that
key (a verifier checks that the list's issuer is the credential's issuer, so a credential
signed before a key rotation points to the list of its own key). The signed lists live in
the database (`badge_status_lists`), so every replica serves the same bytes: each server
copies them to `static/status/<key id>.json` (Streamlit's static file serving:
`<address>/app/static/status/<key id>.json`), and `python -m quiz revoke` signs them again.

A signed list is valid for a day (`validFrom` .. `validUntil`), so a copy someone kept from
before a revocation stops verifying by then; every server's publisher signs a list again
when its signature is an hour old, when a revocation is newer than it, or when its address
is not the configured public one, as soon as it can read the key.
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import (
    Column,
    Connection,
    Float,
    Integer,
    String,
    Table,
    Text,
    inspect,
    select,
    text,
)

from quiz import config
from quiz.config import REPO_ROOT, NoPublicAddress
from quiz.data_integrity import sign
from quiz.did_key import did_of
from quiz.linked_data import CREDENTIALS_V2
from quiz.signing import Signer, SigningKeyError, read_signer
from storage.database import (
    METADATA,
    IntegrityError,
    StorageUnavailable,
    certificates,
    reading,
    writing,
)

LOG = logging.getLogger(__name__)
LIST_BITS = 131_072
# Streamlit serves <app folder>/static/ at /app/static/ (server.enableStaticServing).
STATUS_FOLDER = REPO_ROOT / "static" / "status"
FOLDER_ENV = "OPEN_BADGE_STATUS_DIR"  # elsewhere only for tests: nothing serves it there
PUBLISH_SECONDS = 10.0
# A signed list is valid this long after it is signed (its validUntil): a copy kept from
# before a revocation stops verifying by then.
VALID_SECONDS = 24 * 3600
# A server's publisher signs a list again once its signature is this old, so the list it
# serves is valid for most of a day even when the signing key is unreadable for hours.
RESIGN_SECONDS = 3600
# How long a browser, proxy or verifier may keep a served list (its Cache-Control): a
# revocation reaches outside verifiers within this, plus PUBLISH_SECONDS.
CACHE_SECONDS = 300
_URL_PATH = "/app/static/status/{key_id}.json"
_DRAWS = 20

positions = Table(
    "badge_status_positions",
    METADATA,
    Column("certificate_id", String(32), primary_key=True),
    Column("position", Integer, nullable=False, unique=True),
)

status_lists = Table(
    "badge_status_lists",
    METADATA,
    Column("key_id", String(16), primary_key=True),
    Column("url", Text, nullable=False),
    Column("credential", Text, nullable=False),
    Column("updated_at", Float, nullable=False),
)

_TABLES = (positions, status_lists)


def status_url(base: str, key_id: str) -> str:
    return base.rstrip("/") + _URL_PATH.format(key_id=key_id)


def encode(revoked: Iterable[int], bits: int = LIST_BITS) -> str:
    """The list's `encodedList`: multibase base64url (no padding) of the GZIP of the
    bitstring, bit 0 the first (most significant) bit of the first byte."""
    data = bytearray(bits // 8)
    for position in revoked:
        data[position // 8] |= 0x80 >> (position % 8)
    packed = gzip.compress(bytes(data), mtime=0)
    return "u" + base64.urlsafe_b64encode(packed).decode().rstrip("=")


def decode(encoded: str) -> bytes:
    """The bitstring of an `encodedList` (ValueError when it is not one)."""
    if not encoded.startswith("u"):
        raise ValueError("an encodedList starts with 'u' (multibase base64url)")
    body = encoded[1:]
    return gzip.decompress(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def is_set(bitstring: bytes, position: int) -> bool:
    return bool(bitstring[position // 8] & (0x80 >> (position % 8)))


def _ensure_tables(connection: Connection) -> None:
    """Create this module's tables in a database prepared before they were declared."""
    if connection.dialect.name == "postgresql":  # servers creating them at once queue here
        connection.execute(text("SELECT pg_advisory_xact_lock(74230612)"))
    METADATA.create_all(connection, tables=list(_TABLES))


def position_of(data_dir: Path, certificate_id: str) -> int:
    """The certificate's position in the status lists, drawn at random once and kept."""
    for _ in range(_DRAWS):
        try:
            with writing(data_dir) as connection:
                _ensure_tables(connection)
                found = connection.execute(select(positions.c.position).where(
                    positions.c.certificate_id == certificate_id)).scalar()
                if found is not None:
                    return int(found)
                drawn = secrets.randbelow(LIST_BITS)
                connection.execute(positions.insert().values(certificate_id=certificate_id,
                                                             position=drawn))
                return drawn
        except IntegrityError:  # the position was taken (or another server drew first)
            continue
    raise RuntimeError("no free status list position found")


def _revoked_positions(connection: Connection) -> list[int]:
    rows = connection.execute(
        select(positions.c.position).join(
            certificates, certificates.c.id == positions.c.certificate_id
        ).where(certificates.c.revoked_at.is_not(None))
    )
    return [int(row.position) for row in rows]


def _stamp(moment: float) -> str:
    """An XML Schema dateTime in UTC, to the second (2026-12-03T10:00:00Z)."""
    when = dt.datetime.fromtimestamp(moment, dt.UTC).replace(microsecond=0)
    return when.isoformat().replace("+00:00", "Z")


def list_credential(private_key: Ed25519PrivateKey, url: str, revoked: Iterable[int],
                    now: float) -> dict[str, Any]:
    """The signed BitstringStatusListCredential of one key at `url`, valid from `now` for
    VALID_SECONDS."""
    stamp = _stamp(now)
    did = did_of(private_key.public_key())
    document = {
        "@context": [CREDENTIALS_V2],
        "id": url,
        "type": ["VerifiableCredential", "BitstringStatusListCredential"],
        "issuer": did,
        "validFrom": stamp,
        "validUntil": _stamp(now + VALID_SECONDS),
        "credentialSubject": {
            "id": f"{url}#list",
            "type": "BitstringStatusList",
            "statusPurpose": "revocation",
            "encodedList": encode(revoked),
        },
    }
    return sign(document, private_key, stamp)


def _has_lists(connection: Connection) -> bool:
    """False for a database where no credential was built yet (no table)."""
    return inspect(connection).has_table(status_lists.name)


def stored_list(data_dir: Path, key_id: str) -> dict[str, Any] | None:
    """The signed status list of key `key_id` as stored (None: none yet)."""
    with reading(data_dir) as connection:
        row = connection.execute(select(status_lists.c.credential).where(
            status_lists.c.key_id == key_id)).scalar() if _has_lists(connection) else None
    return json.loads(row) if row else None


def ensure_list(data_dir: Path, signer: Signer, url: str, now: float) -> None:
    """Store `signer`'s signed status list with `url` as its id: signed when there is none,
    or signed again when its id is another address. `url` is always on the public address
    the operator configured (config.public_base_url), never on one a browser reported."""
    with writing(data_dir) as connection:
        _ensure_tables(connection)
        found = connection.execute(select(status_lists.c.url).where(
            status_lists.c.key_id == signer.key_id).with_for_update()).scalar()
        if found == url:
            return
        document = list_credential(signer.private_key, url, _revoked_positions(connection), now)
        values = {"url": url, "credential": json.dumps(document, ensure_ascii=False),
                  "updated_at": now}
        if found:
            connection.execute(status_lists.update().where(
                status_lists.c.key_id == signer.key_id).values(**values))
        else:
            connection.execute(status_lists.insert().values(key_id=signer.key_id, **values))


def retired_signers(data_dir: Path) -> tuple[list[Signer], list[str]]:
    """The keys `python -m quiz new-key --replace` retired beside the key file, whose
    status lists can still be signed again, and a line for each such file that cannot be
    read (damaged or unreadable)."""
    found, problems = [], []
    for path in sorted(data_dir.glob("signing_key.*.retired.pem")):
        try:
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except (OSError, ValueError, TypeError):
            problems.append(f"the retired key file {path} is damaged or unreadable")
            continue
        if isinstance(key, Ed25519PrivateKey):
            found.append(Signer(key))
        else:
            problems.append(f"the retired key file {path} holds no Ed25519 key")
    return found, problems


def available_signers(data_dir: Path, current: Signer | None = None,
                      current_problem: str | None = None) -> tuple[list[Signer], list[str]]:
    """Every key here that can sign a status list (the current key, given or read from
    CERT_SIGNING_KEY or the key file, and the retired key files), and a line for each key
    that is there but cannot be read: its lists are signed once it can be."""
    problems = [current_problem] if current_problem else []
    if current is None and not current_problem:
        try:
            current = read_signer(data_dir, config.signing_key_env())
        except SigningKeyError as problem:
            problems.append(str(problem))
    retired, unreadable = retired_signers(data_dir)
    signers = [current] if current is not None else []
    return signers + [s for s in retired if current is None or s.key_id != current.key_id], \
        problems + unreadable


@dataclass(frozen=True)
class Signing:
    """What a round of signing did: the key ids whose lists were signed again, those
    whose list misses a revocation but whose key is not here (`behind`), and those due for
    signing (its signature old or its address not the public one) whose key is not here
    (`expiring`: outside status checks of their credentials fail once it expires)."""

    signed: tuple[str, ...] = ()
    behind: tuple[str, ...] = ()
    expiring: tuple[str, ...] = ()


def _wanted_url(row: Any, base: str | None) -> str:
    return status_url(base, row.key_id) if base else row.url


def _due(row: Any, encoded: str, now: float, base: str | None) -> tuple[bool, bool]:
    """(whether the list misses a revocation or lifts one, whether it is due for signing
    again at all: that, an old signature, no validUntil, or another address than the
    configured one)."""
    try:
        document = json.loads(row.credential)
        behind = document["credentialSubject"]["encodedList"] != encoded
        expires = "validUntil" not in document
    except (ValueError, KeyError, TypeError):  # not a list this app signed: sign it again
        behind, expires = True, True
    due = (behind or expires or row.updated_at + RESIGN_SECONDS <= now
           or row.url != _wanted_url(row, base))
    return behind, due


def _configured_base() -> str | None:
    try:
        return config.public_base_url()
    except NoPublicAddress:  # the lists keep their addresses
        return None


def due_lists(data_dir: Path, now: float, base: str | None = None) -> dict[str, bool]:
    """The stored lists due for signing again (key id -> whether it misses a revocation),
    from one read: a server asks every few seconds, so this takes no write lock."""
    with reading(data_dir) as connection:
        if not _has_lists(connection):
            return {}
        encoded = encode(_revoked_positions(connection))
        rows = connection.execute(select(status_lists)).all()
    return {row.key_id: behind for row in rows
            for behind, due in [_due(row, encoded, now, base)] if due}


def sign_due(data_dir: Path, signers: Iterable[Signer], now: float,
             base: str | None = None) -> Signing:
    """Sign again, each by its own key, every stored list that is due (it misses a
    revocation or lifts one, its signature is RESIGN_SECONDS old, it has no validUntil, or
    its address is not `base`'s, the configured public address, which it then takes).
    Several servers may do this at once: the rows are locked, and a list another server
    just signed is no longer due."""
    by_id = {signer.key_id: signer for signer in signers}
    signed: list[str] = []
    behind: list[str] = []
    expiring: list[str] = []
    with writing(data_dir) as connection:
        _ensure_tables(connection)
        encoded = encode(revoked := _revoked_positions(connection))
        rows = connection.execute(select(status_lists).order_by(
            status_lists.c.key_id).with_for_update()).all()
        for row in rows:
            late, due = _due(row, encoded, now, base)
            if not due:
                continue
            signer = by_id.get(row.key_id)
            if signer is None:
                (behind if late else expiring).append(row.key_id)
                continue
            url = _wanted_url(row, base)
            document = list_credential(signer.private_key, url, revoked, now)
            connection.execute(status_lists.update().where(
                status_lists.c.key_id == row.key_id).values(
                url=url, credential=json.dumps(document, ensure_ascii=False),
                updated_at=now))
            signed.append(row.key_id)
    return Signing(tuple(signed), tuple(behind), tuple(expiring))


_PUBLISH_LOCK = threading.Lock()


def status_folder() -> Path:
    """Where the status lists are published (OPEN_BADGE_STATUS_DIR, default static/status)."""
    return Path(os.environ.get(FOLDER_ENV) or STATUS_FOLDER)


def publish(data_dir: Path, folder: Path | None = None) -> list[Path]:
    """Copy every stored status list to `folder/<key id>.json` (default: status_folder(),
    the file served at its URL), replacing a file only when its bytes change; the files
    written."""
    folder = folder or status_folder()
    with reading(data_dir) as connection:
        rows = connection.execute(select(
            status_lists.c.key_id, status_lists.c.credential)).all() if _has_lists(
            connection) else []
    written = []
    with _PUBLISH_LOCK:  # one writer per process; os.replace keeps readers whole
        folder.mkdir(parents=True, exist_ok=True)
        for row in rows:
            target = folder / f"{row.key_id}.json"
            data = row.credential.encode()
            try:
                if target.read_bytes() == data:
                    continue
            except FileNotFoundError:
                pass
            part = target.with_name(f".{target.name}.{os.getpid()}.part")
            part.write_bytes(data)
            part.replace(target)
            written.append(target)
    return written


def _key_names(key_ids: Iterable[str]) -> str:
    return ", ".join(key_ids)


class Publisher:
    """One server's round of keeping its status lists current: sign the lists that are due
    (config's public address, the keys it can read) and copy them to the static folder.
    What goes wrong is logged once, in one line, when it starts and once when it is over,
    never every round."""

    def __init__(self, data_dir: Callable[[], Path]) -> None:
        self.data_dir = data_dir
        self._failing: tuple[str, Any] | None = None  # what went wrong last round
        self._waiting: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # keys unsigned

    def round(self, now: float | None = None) -> Signing:
        moment = time.time() if now is None else now
        try:
            folder = self.data_dir()
            signing = self._sign(folder, moment)
            publish(folder)
        except Exception as problem:  # noqa: BLE001 - the thread must go on: said once
            self._failed(problem)
            return Signing()
        if self._failing is not None:
            LOG.warning("status lists: published again (the earlier problem is over)")
            self._failing = None
        return signing

    def _sign(self, folder: Path, now: float) -> Signing:
        base = _configured_base()
        due = due_lists(folder, now, base)
        if not due:
            self._report((), (), [])
            return Signing()
        signers, problems = available_signers(folder)
        signing = Signing()
        if any(signer.key_id in due for signer in signers):
            signing = sign_due(folder, signers, now, base)
            if signing.signed:
                LOG.info("status lists of key(s) %s signed again", _key_names(signing.signed))
        else:
            late = tuple(key for key, behind in due.items() if behind)
            signing = Signing((), late, tuple(key for key in due if key not in late))
        self._report(signing.behind, signing.expiring, problems)
        return signing

    def _report(self, behind: tuple[str, ...], expiring: tuple[str, ...],
                problems: list[str]) -> None:
        """Say once which lists cannot be signed now, and once when they are."""
        state = (behind, expiring)
        if state == self._waiting:
            return
        before, self._waiting = self._waiting, state
        if behind or expiring:
            parts = []
            if behind:
                parts.append(f"key(s) {_key_names(behind)} miss a revocation")
            if expiring:
                parts.append(f"key(s) {_key_names(expiring)} are due (an old signature or "
                             "a new address)")
            why = "; ".join(p.rstrip(".") for p in problems) or "their private keys are not here"
            LOG.log(logging.ERROR if behind else logging.WARNING,
                    "status lists not signed again: %s, and cannot be signed: %s. They are "
                    "signed as soon as the key can be read; until then outside verifiers "
                    "miss those revocations, and a list past its validUntil fails their "
                    "status check.", "; ".join(parts), why)
        elif any(before):
            LOG.warning("status lists: every list due is signed again")

    def _failed(self, problem: Exception) -> None:
        kind = getattr(problem, "kind", None) or getattr(problem, "errno", None)
        failing = (type(problem).__name__, kind)
        if failing == self._failing:
            return
        self._failing = failing
        expected = isinstance(problem, (OSError, StorageUnavailable))
        text = str(problem).splitlines()[0] if str(problem) else type(problem).__name__
        LOG.warning("status lists not published (tried again every %g s; said again only "
                    "when this changes): %s", PUBLISH_SECONDS, text,
                    exc_info=None if expected else problem)


def publish_forever(data_dir: Callable[[], Path], stop: threading.Event,
                    interval: float = PUBLISH_SECONDS) -> None:
    """A server's publisher (its start, then every `interval` seconds): sign again every
    list that is due, as soon as the key can be read (a revocation newer than the list,
    an hour-old signature, a new public address), and copy the database's lists to the
    static folder, so a revocation made anywhere (another replica, the CLI on another
    machine) is served here within that time."""
    publisher = Publisher(data_dir)
    while True:
        publisher.round()
        if stop.wait(interval):
            return


def snapshot(connection: Connection) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """For a backup, in the export's read: every certificate's position, and every key's
    signed list as stored (key id, url, credential, updated_at)."""
    if not _has_lists(connection):
        return {}, []
    found = {row.certificate_id: int(row.position)
             for row in connection.execute(select(positions))}
    lists = [dict(row) for row in connection.execute(
        select(status_lists).order_by(status_lists.c.key_id)).mappings()]
    return found, lists


def restore(connection: Connection, found: dict[str, int],
            lists: Iterable[dict[str, Any]]) -> None:
    """After a restore, in its write: the positions and the signed lists as exported, so
    every credential handed out before keeps its place and its list's address."""
    _ensure_tables(connection)
    for certificate_id, position in found.items():
        connection.execute(positions.insert().values(certificate_id=certificate_id,
                                                     position=position))
    for row in lists:
        connection.execute(status_lists.insert().values(
            key_id=row["key_id"], url=row["url"], credential=row["credential"],
            updated_at=row["updated_at"]))
