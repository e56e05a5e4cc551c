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
from collections.abc import Callable, Iterable
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

from quiz.config import REPO_ROOT
from quiz.data_integrity import sign
from quiz.did_key import did_of
from quiz.linked_data import CREDENTIALS_V2
from quiz.signing import Signer
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


def list_credential(private_key: Ed25519PrivateKey, url: str, revoked: Iterable[int],
                    now: float) -> dict[str, Any]:
    """The signed BitstringStatusListCredential of one key at `url`."""
    moment = dt.datetime.fromtimestamp(now, dt.UTC).replace(microsecond=0)
    stamp = moment.isoformat().replace("+00:00", "Z")
    did = did_of(private_key.public_key())
    document = {
        "@context": [CREDENTIALS_V2],
        "id": url,
        "type": ["VerifiableCredential", "BitstringStatusListCredential"],
        "issuer": did,
        "validFrom": stamp,
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


def ensure_list(data_dir: Path, signer: Signer, url: str, now: float,
                configured: bool) -> None:
    """Store `signer`'s signed status list, with `url` as its id, when there is none. The
    list is one file, served at the same path on every address the app answers on; an
    existing list keeps its id unless `url` is on the configured public address
    (`configured`: APP_BASE_URL) and the id is not, when it is signed again with `url`."""
    with writing(data_dir) as connection:
        _ensure_tables(connection)
        found = connection.execute(select(status_lists.c.url).where(
            status_lists.c.key_id == signer.key_id)).scalar()
        if found == url or (found and not configured):
            return
        document = list_credential(signer.private_key, url, _revoked_positions(connection), now)
        values = {"url": url, "credential": json.dumps(document, ensure_ascii=False),
                  "updated_at": now}
        if found:
            connection.execute(status_lists.update().where(
                status_lists.c.key_id == signer.key_id).values(**values))
        else:
            connection.execute(status_lists.insert().values(key_id=signer.key_id, **values))


def retired_signers(data_dir: Path) -> list[Signer]:
    """The keys `python -m quiz new-key --replace` retired beside the key file (readable
    ones only): their status lists can still be signed again."""
    found = []
    for path in sorted(data_dir.glob("signing_key.*.retired.pem")):
        try:
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except (OSError, ValueError, TypeError):
            LOG.warning("retired key %s cannot be read; its status list stays as it is", path)
            continue
        if isinstance(key, Ed25519PrivateKey):
            found.append(Signer(key))
    return found


def refresh(data_dir: Path, signers: Iterable[Signer], now: float) -> tuple[list[str], list[str]]:
    """Sign every stored status list again with today's revocations, each by its own key:
    (key ids signed, key ids whose private key is not here, whose lists stay as they were)."""
    by_id = {signer.key_id: signer for signer in signers}
    signed: list[str] = []
    with writing(data_dir) as connection:
        _ensure_tables(connection)
        revoked = _revoked_positions(connection)
        stored = connection.execute(select(status_lists.c.key_id, status_lists.c.url)).all()
        for row in stored:
            signer = by_id.get(row.key_id)
            if signer is None:
                continue
            document = list_credential(signer.private_key, row.url, revoked, now)
            connection.execute(status_lists.update().where(
                status_lists.c.key_id == row.key_id).values(
                credential=json.dumps(document, ensure_ascii=False), updated_at=now))
            signed.append(row.key_id)
    missing = [row.key_id for row in stored if row.key_id not in by_id]
    return signed, missing


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


def publish_forever(data_dir: Callable[[], Path], stop: threading.Event,
                    interval: float = PUBLISH_SECONDS) -> None:
    """A server's publisher: copy the database's status lists to the static folder every
    `interval` seconds, so a revocation made anywhere (another replica, the CLI on another
    machine) is served here within that time. A failure is logged and tried again."""
    while True:
        try:
            publish(data_dir())
        except (OSError, StorageUnavailable):
            LOG.warning("status lists not published this time", exc_info=True)
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
