"""Certificates: issuing (once per attempt), looking up, verifying and revoking. The record
and the verdicts themselves: quiz.certificate_records."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Connection, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from i18n.languages import DEFAULT, language
from quiz import config
from quiz.certificate_records import Certificate, Status, Verification
from quiz.ids import IdError, new_id, parse_id
from quiz.signing import (
    KEY_FILE,
    Signer,
    canonical_payload,
    key_source,
    load_public_key_pem,
    verify_signature,
)
from storage.database import (
    IntegrityError,
    StorageUnavailable,
    certificates,
    describe,
    fresh_reading,
    quick_check,
    reading,
    signing_keys,
    storage_failure,
    store_id,
    writing,
)

LOG = logging.getLogger(__name__)
# Written beside the key when the first certificate is issued: a database found empty later
# (deleted, or DATABASE_URL pointing elsewhere) is then reported instead of silently used.
ISSUED_MARKER = "certificates-issued.json"


_ISSUE_RETRIES = 5
# Stand-ins for the not-found path: a record shaped like a real one and a well-formed
# signature by a throwaway key, so that checking them costs what a real check costs.
_DUMMY = Certificate(
    id="0" * 20 + "-0",
    attempt_id="",
    name="",
    course="",
    course_version="",
    date="",
    score=0,
    show_score=False,
    key_id="",
    signature="",
)
_DUMMY_SIGNER = Signer(Ed25519PrivateKey.generate())
_DUMMY_SIGNATURE = _DUMMY_SIGNER.sign(_DUMMY.payload)
_DUMMY_KEY = _DUMMY_SIGNER.public_key
_DUMMY_PEM = _DUMMY_SIGNER.public_pem


class StorageError(RuntimeError):
    """The key or the database does not match the certificates issued: the message says
    what to restore; the app refuses to issue or verify until it is fixed."""


@dataclass(frozen=True)
class StorageCheck:
    certificates: int
    problems: tuple[str, ...] = ()  # refuse to start


class CertificateStore:
    def __init__(
        self, data_dir: Path, signer: Signer | None, clock: Callable[[], float] = time.time
    ) -> None:
        self.data_dir = data_dir
        self.signer = signer
        self.clock = clock

    def _signer(self) -> Signer:
        if self.signer is None:
            source = key_source(self.data_dir, config.signing_key_env())
            raise StorageError(
                f"the signing key ({source}) is damaged or unreadable: certificates cannot "
                "be issued" if source else
                "no signing key is configured: certificates cannot be issued")
        return self.signer

    # Keys ---------------------------------------------------------------------------------
    def public_keys(self) -> dict[str, str]:
        """Every key that ever signed here: key id -> public key PEM (the current one too)."""
        with reading(self.data_dir) as connection:
            rows = connection.execute(select(signing_keys.c.key_id, signing_keys.c.public_pem))
            keys = {row.key_id: row.public_pem for row in rows}
        if self.signer is not None:
            keys.setdefault(self.signer.key_id, self.signer.public_pem)
        return keys

    def stored_key_ids(self) -> set[str]:
        with reading(self.data_dir) as connection:
            return set(connection.execute(select(signing_keys.c.key_id)).scalars())

    def register_key(self) -> None:
        """Keep the current key's public half in the database, so certificates it signs keep
        verifying after the key is replaced."""
        signer = self._signer()
        with writing(self.data_dir) as connection:
            known = connection.execute(
                select(signing_keys.c.key_id).where(signing_keys.c.key_id == signer.key_id)
            ).first()
            if known is None:
                others = connection.execute(select(func.count()).select_from(signing_keys))
                if others.scalar_one():
                    LOG.warning("a new signing key %s signs certificates from now on; earlier "
                                "ones verify with their stored public keys", signer.key_id)
                connection.execute(
                    _insert(connection, signing_keys)
                    .values(key_id=signer.key_id, public_pem=signer.public_pem,
                            added_at=self.clock())
                    .on_conflict_do_nothing()
                )

    def check(self) -> StorageCheck:
        """What a careful operator must hear before the app runs: certificates whose key is
        missing, an empty database where certificates were issued before (both refuse)."""
        with fresh_reading(self.data_dir) as connection:  # the file as it is now
            damage = quick_check(connection)
            found_store = store_id(connection)
            count = connection.execute(select(func.count()).select_from(certificates)).scalar_one()
            used = {
                row.key_id: row.n
                for row in connection.execute(
                    select(certificates.c.key_id, func.count().label("n")).group_by(
                        certificates.c.key_id
                    )
                )
            }
        problems: list[str] = []
        database = describe(self.data_dir)
        marker = self.data_dir / ISSUED_MARKER
        if damage:
            problems.append(
                f"The database {database} fails SQLite's integrity check ({damage}). Restore "
                "it from a backup (`python -m quiz import`, see docs/HOSTING.md)."
            )
        replaced = self._replaced(found_store) if count else None  # empty: warned below
        if replaced:
            problems.append(replaced)
        if self.signer is None and (count or marker.exists()):
            held = f"holds {count} certificate(s)" if count else (
                f"is empty, but certificates were issued from this data folder ({marker})")
            source = key_source(self.data_dir, config.signing_key_env())
            if source:  # there, but it cannot be read: never call it missing
                what = f"The signing key ({source}) is damaged or unreadable"
                anew = ("put a new key in CERT_SIGNING_KEY" if source == "CERT_SIGNING_KEY"
                        else "run `python -m quiz new-key --replace` (it sets the damaged "
                        "file aside)")
            else:
                what = (f"The signing key is missing (no {self.data_dir / KEY_FILE} and no "
                        "CERT_SIGNING_KEY)")
                anew = "run `python -m quiz new-key`"
            problems.append(
                f"{what}, but the database {database} {held}. Restore the key file from a "
                "backup or set CERT_SIGNING_KEY to it. To start a new key on purpose "
                f"(earlier certificates keep verifying with their stored public keys), {anew}."
            )
        known = self.public_keys()
        for key_id, n in sorted(used.items()):
            if key_id not in known:
                problems.append(
                    f"{n} certificate(s) in {database} were signed by key {key_id}, whose "
                    "public key is neither configured nor stored: they cannot be verified. "
                    "Restore that key (signing_key.pem or CERT_SIGNING_KEY)."
                )
        if count == 0 and marker.exists():  # refuse: the verify page would say NOT FOUND
            problems.append(
                f"The certificate database {database} is EMPTY, but certificates were issued "
                f"from this data folder before ({marker}). The database was probably deleted "
                "or DATABASE_URL points to another one. Restore the database from a backup "
                "(`python -m quiz import`, see docs/HOSTING.md); delete the marker only to "
                "start afresh on purpose."
            )
        return StorageCheck(count, tuple(problems))

    def database_refusal(self) -> StorageUnavailable | None:
        """Why this database is not the one this data folder's certificates are in (an
        empty one where certificates were issued, or another database): None when it is."""
        with fresh_reading(self.data_dir) as connection:
            return self._refusal(connection)

    def _marker(self) -> dict[str, Any] | None:
        """The issued-marker's record (None: no certificate was issued from this folder)."""
        try:
            text = (self.data_dir / ISSUED_MARKER).read_text()
        except FileNotFoundError:
            return None
        try:
            record = json.loads(text)
        except ValueError:
            return {}
        return record if isinstance(record, dict) else {}

    def _replaced(self, found: str | None) -> str | None:
        """Why the database is not the one this data folder issued into (None: it is)."""
        expected = (self._marker() or {}).get("store_id")
        if not expected or found == expected:
            return None
        return (
            f"The database {describe(self.data_dir)} is not the one this data folder issued "
            f"certificates into: its store id is {found or 'missing'}, "
            f"{self.data_dir / ISSUED_MARKER} records {expected}. Put the right database back "
            "or restore a backup (`python -m quiz import`, see docs/HOSTING.md); issuing "
            "resumes by itself."
        )

    def _refusal(self, connection: Connection) -> StorageUnavailable | None:
        """Why nothing may be issued into this database now: another database in its place,
        or an empty one where certificates were issued before (None: issuing is safe)."""
        if self._marker() is not None and connection.execute(
            select(certificates.c.id).limit(1)
        ).first() is None:
            return StorageUnavailable("empty", (
                f"The certificate database {describe(self.data_dir)} is EMPTY, but "
                f"certificates were issued from this data folder before "
                f"({self.data_dir / ISSUED_MARKER}): it was probably deleted or replaced. "
                "Nothing is issued into it: restore the database from a backup (`python -m "
                "quiz import`, see docs/HOSTING.md) and issuing resumes by itself; delete the "
                "marker only to start afresh on purpose."))
        replaced = self._replaced(store_id(connection))
        return StorageUnavailable("replaced", replaced) if replaced else None

    def _mark_issued(self, date: str, store: str | None) -> None:
        """Write the issued-marker (with the database's store id) the first time, and add
        the store id to a marker written before store ids existed."""
        record = self._marker()
        if record is not None and (record.get("store_id") or not store):
            return
        self._write_marker({"first_issued": date, "database": describe(self.data_dir),
                            **(record or {}), "store_id": store})

    def adopt_store(self, store: str) -> None:
        """After a restore: the data folder's certificates now live in the database with
        this store id."""
        today = dt.datetime.fromtimestamp(self.clock(), dt.UTC).date().isoformat()
        self._write_marker({"first_issued": today, **(self._marker() or {}),
                            "database": describe(self.data_dir), "store_id": store})

    def _write_marker(self, record: dict[str, Any]) -> None:
        marker = self.data_dir / ISSUED_MARKER
        temporary = marker.with_name(f".{marker.name}.{os.getpid()}.{os.urandom(4).hex()}")
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(json.dumps(record) + "\n")
            temporary.replace(marker)
        except OSError as error:
            temporary.unlink(missing_ok=True)
            raise storage_failure(self.data_dir, error) from error

    # Certificates -------------------------------------------------------------------------
    def issue(
        self,
        attempt_id: str,
        name: str,
        course: str,
        course_version: str,
        score: int,
        show_score: bool,
        attempts: int | None = None,
        lang: str = DEFAULT,
    ) -> Certificate:
        """The certificate of this attempt, signed; issuing again (a double click, a second
        tab, another server) returns the first one unchanged. `lang`: the language its PDF
        is drawn in (stored, not signed)."""
        language(lang)  # KeyError for an unsupported code
        existing = self.for_attempt(attempt_id)
        if existing is not None:
            return existing
        signer = self._signer()
        now = self.clock()
        date = dt.datetime.fromtimestamp(now, dt.UTC).date().isoformat()
        for _ in range(_ISSUE_RETRIES):
            fields = {
                "id": new_id(),
                "name": name,
                "course": course,
                "course_version": course_version,
                "date": date,
                "score": int(score),
                "key_id": signer.key_id,
                "attempts": attempts,
            }
            signature = signer.sign(canonical_payload(fields))
            try:
                with writing(self.data_dir) as connection:
                    refusal = self._refusal(connection)
                    if refusal is not None:
                        raise refusal
                    store = store_id(connection)
                    connection.execute(  # its public half, for verifying without the key
                        _insert(connection, signing_keys)
                        .values(key_id=signer.key_id, public_pem=signer.public_pem,
                                added_at=now)
                        .on_conflict_do_nothing()
                    )
                    statement = _insert(connection, certificates).values(
                        id=fields["id"],
                        attempt_id=attempt_id,
                        name=name,
                        course=course,
                        course_version=course_version,
                        issued_on=date,
                        score=fields["score"],
                        show_score=bool(show_score),
                        key_id=signer.key_id,
                        signature=signature,
                        created_at=now,
                        attempts=attempts,
                        lang=lang,
                    )
                    connection.execute(
                        statement.on_conflict_do_nothing(index_elements=["attempt_id"])
                    )
            except IntegrityError:  # the random ID is taken: draw another
                continue
            except StorageUnavailable as problem:
                LOG.error("no certificate issued: %s", problem)
                raise
            try:
                self._mark_issued(date, store)
            except StorageUnavailable as problem:  # the certificate is committed: hand it out
                LOG.error("the issued-marker could not be written (a later emptied database "
                          "would not be noticed until it is): %s", problem)
            return self._read_back(attempt_id)
        raise RuntimeError("could not find a free certificate ID")

    def _read_back(self, attempt_id: str) -> Certificate:
        """The certificate just committed, read through a new connection to the configured
        database and checked against its stored public key: only then is it shown. Raises
        StorageUnavailable (and logs it) when the database lost it or cannot prove it."""
        with fresh_reading(self.data_dir) as connection:
            refusal = self._refusal(connection)
            row = connection.execute(
                select(certificates).where(certificates.c.attempt_id == attempt_id)
            ).mappings().first()
            pem = None if row is None else connection.execute(
                select(signing_keys.c.public_pem).where(signing_keys.c.key_id == row["key_id"])
            ).scalar()
        certificate = Certificate.from_row(row) if row else None
        if refusal is None and (certificate is None or pem is None or not verify_signature(
                load_public_key_pem(pem), certificate.payload, certificate.signature)):
            refusal = StorageUnavailable("unreadable-back", (
                f"A certificate committed to {describe(self.data_dir)} could not be read back "
                "and verified through a new connection (the database was deleted, replaced or "
                "is failing), so it was not handed out. Check the database and restore a "
                "backup if needed (docs/HOSTING.md)."))
        if refusal is not None:
            LOG.error("certificate not handed out: %s", refusal)
            raise refusal
        assert certificate is not None
        return certificate

    def for_attempt(self, attempt_id: str) -> Certificate | None:
        with reading(self.data_dir) as connection:
            row = connection.execute(
                select(certificates).where(certificates.c.attempt_id == attempt_id)
            ).mappings().first()
        return Certificate.from_row(row) if row else None

    def get(self, certificate_id: str) -> Certificate | None:
        """By canonical ID text (as `format_id` writes it)."""
        with reading(self.data_dir) as connection:
            row = connection.execute(
                select(certificates).where(certificates.c.id == certificate_id)
            ).mappings().first()
        return Certificate.from_row(row) if row else None

    def all(self) -> list[Certificate]:
        with reading(self.data_dir) as connection:
            rows = connection.execute(
                select(certificates).order_by(certificates.c.created_at)
            ).mappings().all()
        return [Certificate.from_row(row) for row in rows]

    def verify(self, text: str) -> Verification:
        """Check a typed ID. A typo is reported without a lookup. Found or not, the same
        work is done (one query, one signature check), so the timing says nothing. An ID
        not found in a database that is empty where certificates were issued, or that is
        another database, raises that StorageUnavailable: never NOT FOUND for a certificate
        that may well exist. The
        signature is checked with the public key of the key that signed it (old keys are
        kept), and the result names that key."""
        try:
            id_text = parse_id(text).text
        except IdError as error:
            return Verification(Status.TYPO, problem=error.problem)
        with reading(self.data_dir) as connection:
            row = connection.execute(
                select(certificates).where(certificates.c.id == id_text)
            ).mappings().first()
            refusal = self._refusal(connection)  # found or not: the same work
        certificate = Certificate.from_row(row) if row else None
        keys = self.public_keys()
        if certificate is None:
            if refusal is not None:  # not this data folder's database: no verdict from it
                LOG.error("%s", refusal)
                raise refusal
            load_public_key_pem(_DUMMY_PEM)
            verify_signature(_DUMMY_KEY, _DUMMY.payload, _DUMMY_SIGNATURE)
            return Verification(Status.NOT_FOUND, id_text=id_text)
        current = self.signer is not None and certificate.key_id == self.signer.key_id
        pem = keys.get(certificate.key_id)
        if pem is None:
            return Verification(Status.UNKNOWN_KEY, certificate, id_text)
        if not verify_signature(load_public_key_pem(pem), certificate.payload,
                                certificate.signature):
            return Verification(Status.BAD_SIGNATURE, certificate, id_text, key_current=current)
        if certificate.revoked_at:
            return Verification(Status.REVOKED, certificate, id_text, key_current=current)
        return Verification(Status.VALID, certificate, id_text, key_current=current)

    def revoke(self, text: str, reason: str) -> Certificate:
        """Mark a certificate revoked (LookupError if there is none; IdError for a typo)."""
        reason = " ".join(reason.split())
        if not reason:
            raise ValueError("a revocation needs a reason")
        id_text = parse_id(text).text
        today = dt.datetime.fromtimestamp(self.clock(), dt.UTC).date().isoformat()
        with writing(self.data_dir) as connection:
            updated = connection.execute(
                update(certificates)
                .where(certificates.c.id == id_text)
                .values(revoked_at=today, revoke_reason=reason)
            ).rowcount
        if not updated:
            raise LookupError(f"no certificate {id_text}")
        certificate = self.get(id_text)
        assert certificate is not None
        return certificate


def _insert(connection: Connection, table: Any) -> Any:
    """INSERT with ON CONFLICT for the connection's dialect (SQLite or PostgreSQL)."""
    return (pg_insert if connection.dialect.name == "postgresql" else sqlite_insert)(table)
