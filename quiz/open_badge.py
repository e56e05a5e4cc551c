"""A certificate as an Open Badges 3.0 `OpenBadgeCredential` (a W3C Verifiable Credential,
Data Model 2.0), signed with a Data Integrity proof (`eddsa-rdfc-2022`) by the Ed25519 key
that signs certificates, the issuer named by that key's `did:key`.

What it says: the learner's name as they chose it (`credentialSubject.name`, and as an
`IdentityObject` of type "name", the form 1EdTech's schema knows), the course as an
`Achievement` (name, description, criteria: the lessons and the pass mark, in the language
of the certificate, `inLanguage`), the score only when the learner chose to show it (a
`Result` against the achievement's `ResultDescription`), `validFrom` (the signed issue
date), the issuer `Profile` (name, the app's address), the verify page as the credential's
`id`, and a `BitstringStatusListEntry` that points at the key's status list (revocation).

Building is deterministic: the same certificate, address, status position and key give the
same bytes (Ed25519 signatures are deterministic; the proof's `created` is the issue date).
The other languages are not embedded as alternates: 1EdTech's JSON schema types the texts
as plain strings, and wallets show one text; the verify page words it in every language.
"""

from __future__ import annotations

import uuid
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from i18n import N_, gettext
from i18n.numbers import format_percent
from lessons.catalog import LESSONS
from quiz import config
from quiz.certificate_records import Certificate
from quiz.data_integrity import sign
from quiz.did_key import did_of
from quiz.linked_data import CREDENTIALS_V2, OPEN_BADGES_V3

SCHEMA_URL = ("https://purl.imsglobal.org/spec/ob/v3p0/schema/json/"
              "ob_v3p0_achievementcredential_schema.json")
_NAMESPACE = uuid.UUID("6f0c1d59-3f43-4a0e-9d3c-8a5f1b6a2e10")  # this app's achievements

DESCRIPTION = N_(
    "A web course on gradient (activation) checkpointing for machine-learning engineers "
    "and students: why activations dominate training memory, how checkpointing drops and "
    "recomputes them, where the checkpoints go, language models and their large "
    "vocabularies' logits, what it costs and why the result does not change, selective and "
    "compiler-driven checkpointing, how to switch it on in PyTorch and Hugging Face, how it "
    "works with sharding and tensor, sequence, context, pipeline and expert parallelism "
    "across many GPUs, and vision and diffusion models, with live measurements of a real "
    "model.")
CRITERIA = N_(
    "Passed the course's final quiz with at least {pass_mark} of the answers correct. The "
    "quiz draws its questions from the course's lessons:")


def achievement_id(course: str, version: str) -> str:
    """The course's stable identifier (the same on every host and in every language)."""
    return f"urn:uuid:{uuid.uuid5(_NAMESPACE, f'{course}/{version}')}"


def timestamp(iso_date: str) -> str:
    """An ISO date as the dateTime the credential carries (midnight UTC of that day)."""
    return f"{iso_date}T00:00:00Z"


def criteria(code: str) -> str:
    """What earned it, in Markdown: the pass mark and the lessons, in language `code`."""
    lines = [gettext(code, CRITERIA, pass_mark=format_percent(config.PASS_MARK, code))]
    lines += [f"{n}. {lesson.title_in(code)}" for n, lesson in enumerate(LESSONS, 1)]
    return "\n".join(lines)


def issuer_profile(did: str, base: str) -> dict[str, Any]:
    return {"id": did, "type": ["Profile"], "name": config.COURSE_NAME, "url": base}


def status_entry(status_url: str, position: int) -> dict[str, Any]:
    return {
        "id": f"{status_url}#{position}",
        "type": "BitstringStatusListEntry",
        "statusPurpose": "revocation",
        "statusListIndex": str(position),
        "statusListCredential": status_url,
    }


def unsigned_credential(certificate: Certificate, did: str, base: str, verify_link: str,
                        status_url: str, position: int) -> dict[str, Any]:
    """The credential before its proof (see the module's docstring)."""
    code = certificate.lang
    achievement_uri = achievement_id(certificate.course, certificate.course_version)
    score_id = f"{achievement_uri}#score"
    subject: dict[str, Any] = {
        "type": ["AchievementSubject"],
        "name": certificate.name,
        "identifier": [{"type": "IdentityObject", "identityType": "name", "hashed": False,
                        "identityHash": certificate.name}],
        "achievement": {
            "id": achievement_uri,
            "type": ["Achievement"],
            "achievementType": "CertificateOfCompletion",
            "name": certificate.course,
            "description": gettext(code, DESCRIPTION),
            "criteria": {"narrative": criteria(code)},
            "inLanguage": code,
            "version": certificate.course_version,
            "creator": issuer_profile(did, base),
            "resultDescription": [{
                "id": score_id,
                "type": ["ResultDescription"],
                "name": gettext(code, "Final quiz score"),
                "resultType": "Percent",
                "valueMin": "0",
                "valueMax": "100",
                "requiredValue": str(round(config.PASS_MARK * 100)),
            }],
        },
    }
    if certificate.show_score:
        subject["result"] = [{"type": ["Result"], "resultDescription": score_id,
                              "value": str(certificate.score)}]
    return {
        "@context": [CREDENTIALS_V2, OPEN_BADGES_V3],
        "id": verify_link,
        "type": ["VerifiableCredential", "OpenBadgeCredential"],
        "name": gettext(code, "{course}: certificate {id}", course=certificate.course,
                        id=certificate.id),
        "issuer": issuer_profile(did, base),
        "validFrom": timestamp(certificate.date),
        "credentialSubject": subject,
        "credentialStatus": status_entry(status_url, position),
        "credentialSchema": [{"id": SCHEMA_URL, "type": "JsonSchema"}],
    }


def credential(certificate: Certificate, private_key: Ed25519PrivateKey, base: str,
               status_url: str, position: int) -> dict[str, Any]:
    """The signed OpenBadgeCredential of `certificate`; `base`: the app's public address."""
    did = did_of(private_key.public_key())
    document = unsigned_credential(certificate, did, base, config.verify_url(certificate.id,
                                   base), status_url, position)
    return sign(document, private_key, timestamp(certificate.date))
