"""Certificates: issuing (once per attempt), looking up, verifying and revoking."""

from __future__ import annotations

import datetime as dt
import sqlite3
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from quiz.db import connect, transaction
from quiz.ids import IdError, new_id, parse_id
from quiz.signing import Signer, canonical_payload


@dataclass(frozen=True)
class Certificate:
    id: str
    attempt_id: str
    name: str
    course: str
    course_version: str
    date: str  # ISO date of issue, UTC
    score: int  # whole percent
    show_score: bool
    key_id: str
    signature: str
    revoked_at: str | None = None
    revoke_reason: str | None = None

    @property
    def signed_fields(self) -> dict[str, Any]:
        fields = asdict(self)
        return {
            name: fields[name]
            for name in ("id", "name", "course", "course_version", "date", "score", "key_id")
        }

    @property
    def payload(self) -> bytes:
        return canonical_payload(self.signed_fields)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Certificate:
        return cls(
            id=row["id"],
            attempt_id=row["attempt_id"],
            name=row["name"],
            course=row["course"],
            course_version=row["course_version"],
            date=row["issued_on"],
            score=row["score"],
            show_score=bool(row["show_score"]),
            key_id=row["key_id"],
            signature=row["signature"],
            revoked_at=row["revoked_at"],
            revoke_reason=row["revoke_reason"],
        )


class Status(Enum):
    VALID = "VALID"
    REVOKED = "REVOKED"
    NOT_FOUND = "NOT FOUND"
    TYPO = "TYPO"
    BAD_SIGNATURE = "BAD SIGNATURE"


@dataclass(frozen=True)
class Verification:
    status: Status
    certificate: Certificate | None = None
    id_text: str | None = None  # the canonical ID, when the text parsed
    problem: str | None = None  # why the text is not an ID (TYPO)

    @property
    def valid(self) -> bool:
        return self.status is Status.VALID


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
_DUMMY_SIGNATURE = Signer(Ed25519PrivateKey.generate()).sign(_DUMMY.payload)


class CertificateStore:
    def __init__(
        self, data_dir: Path, signer: Signer, clock: Callable[[], float] = time.time
    ) -> None:
        self.data_dir = data_dir
        self.signer = signer
        self.clock = clock

    def issue(
        self,
        attempt_id: str,
        name: str,
        course: str,
        course_version: str,
        score: int,
        show_score: bool,
    ) -> Certificate:
        """The certificate of this attempt, signed; issuing again (a double click, a second
        tab) returns the first one unchanged."""
        existing = self.for_attempt(attempt_id)
        if existing is not None:
            return existing
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
                "key_id": self.signer.key_id,
            }
            signature = self.signer.sign(canonical_payload(fields))
            try:
                with connect(self.data_dir) as connection, transaction(connection):
                    connection.execute(
                        "INSERT INTO certificates (id, attempt_id, name, course, course_version,"
                        " issued_on, score, show_score, key_id, signature, created_at)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                        " ON CONFLICT(attempt_id) DO NOTHING",
                        (
                            fields["id"],
                            attempt_id,
                            name,
                            course,
                            course_version,
                            date,
                            fields["score"],
                            int(show_score),
                            fields["key_id"],
                            signature,
                            now,
                        ),
                    )
            except sqlite3.IntegrityError:  # the random ID is taken: draw another
                continue
            certificate = self.for_attempt(attempt_id)
            assert certificate is not None
            return certificate
        raise RuntimeError("could not find a free certificate ID")

    def for_attempt(self, attempt_id: str) -> Certificate | None:
        with connect(self.data_dir) as connection:
            row = connection.execute(
                "SELECT * FROM certificates WHERE attempt_id = ?", (attempt_id,)
            ).fetchone()
        return Certificate.from_row(row) if row else None

    def get(self, certificate_id: str) -> Certificate | None:
        """By canonical ID text (as `format_id` writes it)."""
        with connect(self.data_dir) as connection:
            row = connection.execute(
                "SELECT * FROM certificates WHERE id = ?", (certificate_id,)
            ).fetchone()
        return Certificate.from_row(row) if row else None

    def all(self) -> list[Certificate]:
        with connect(self.data_dir) as connection:
            rows = connection.execute("SELECT * FROM certificates ORDER BY created_at").fetchall()
        return [Certificate.from_row(row) for row in rows]

    def verify(self, text: str) -> Verification:
        """Check a typed ID. A typo is reported without a lookup. Found or not, the same
        work is done (one query, one signature check), so the timing says nothing."""
        try:
            id_text = parse_id(text).text
        except IdError as error:
            return Verification(Status.TYPO, problem=error.problem.value)
        certificate = self.get(id_text)
        if certificate is None:
            self.signer.verify(_DUMMY.payload, _DUMMY_SIGNATURE)
            return Verification(Status.NOT_FOUND, id_text=id_text)
        signed = certificate.key_id == self.signer.key_id and self.signer.verify(
            certificate.payload, certificate.signature
        )
        if not signed:
            return Verification(Status.BAD_SIGNATURE, certificate, id_text)
        if certificate.revoked_at:
            return Verification(Status.REVOKED, certificate, id_text)
        return Verification(Status.VALID, certificate, id_text)

    def revoke(self, text: str, reason: str) -> Certificate:
        """Mark a certificate revoked (LookupError if there is none; IdError for a typo)."""
        reason = " ".join(reason.split())
        if not reason:
            raise ValueError("a revocation needs a reason")
        id_text = parse_id(text).text
        today = dt.datetime.fromtimestamp(self.clock(), dt.UTC).date().isoformat()
        with connect(self.data_dir) as connection, transaction(connection):
            updated = connection.execute(
                "UPDATE certificates SET revoked_at = ?, revoke_reason = ? WHERE id = ?",
                (today, reason, id_text),
            ).rowcount
        if not updated:
            raise LookupError(f"no certificate {id_text}")
        certificate = self.get(id_text)
        assert certificate is not None
        return certificate
