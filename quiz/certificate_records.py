"""What a certificate is and what verifying one answers: the signed record (Certificate), the
verdicts (Status, Verification) and an issue date written out for a language. Issuing,
looking up, verifying and revoking them: quiz.certificates.CertificateStore.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from babel.dates import format_date

from i18n.languages import DEFAULT, language, parse_lang
from quiz.ids import IdProblem
from quiz.signing import OPTIONAL_SIGNED_FIELDS, SIGNED_FIELDS, canonical_payload


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
    attempts: int | None = None  # how many attempts the learner took (None before it was kept)
    # The language the learner took the quiz in: the PDF is drawn in it. Not signed: the
    # signed facts are language-neutral (ISO date, whole percent), and how a certificate is
    # worded changes nothing it attests; every verify page words it in its viewer's language.
    lang: str = DEFAULT

    @property
    def signed_fields(self) -> dict[str, Any]:
        fields = asdict(self)
        return {
            name: fields[name]
            for name in (*SIGNED_FIELDS, *OPTIONAL_SIGNED_FIELDS)
            if name in SIGNED_FIELDS or fields[name] is not None
        }

    @property
    def payload(self) -> bytes:
        return canonical_payload(self.signed_fields)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Certificate:
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
            attempts=row["attempts"],
            lang=parse_lang(row.get("lang")) or DEFAULT,
        )


def long_date(iso: str, code: str) -> str:
    """An ISO date (as signed) written out for language `code`: "November 30, 2026",
    "30. November 2026", "30 tháng 11, 2026"."""
    return format_date(dt.date.fromisoformat(iso), "long", locale=language(code).babel_locale)


class Status(Enum):
    VALID = "VALID"
    REVOKED = "REVOKED"
    NOT_FOUND = "NOT FOUND"
    TYPO = "TYPO"
    BAD_SIGNATURE = "BAD SIGNATURE"
    UNKNOWN_KEY = "UNKNOWN KEY"  # signed by a key whose public half this server lacks


@dataclass(frozen=True)
class Verification:
    status: Status
    certificate: Certificate | None = None
    id_text: str | None = None  # the canonical ID, when the text parsed
    problem: IdProblem | None = None  # why the text is not an ID (TYPO)
    key_current: bool = False  # signed by the key that signs new certificates today

    @property
    def valid(self) -> bool:
        return self.status is Status.VALID
