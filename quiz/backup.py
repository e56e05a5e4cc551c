"""Backup and restore of the certificates as signed, self-verifying JSON lines.

`export` writes one JSON object per line:

    {"type": "header", "format": "gcl-certificates/1", "store_id": ..., ...}
    {"type": "key", "key_id": ..., "public_pem": ..., "added_at": ...}          every key
    {"type": "certificate", "id": ..., "name": ..., "signature": ..., ...}      every one
    {"type": "revocation", "id": ..., "revoked_at": ..., "reason": ...}         every one
    {"type": "status-list", "key_id": ..., "url": ..., "credential": ...}       every one
    {"type": "end", "lines": N, "sha256": ...}                                  the digest

Each certificate carries its own Ed25519 signature (over `canonical_payload` of its signed
fields), so it verifies with the public key its `key_id` names, with or without this app.
Every line also carries `line_signature`: the current signing key's signature over the
line's canonical JSON without that field, so a revocation or a key cannot be added or
removed unnoticed; the end line's digest covers every line before it (a cut-off file is
refused). `check_export` checks all of it, optionally against a public key the reader
trusts; `import_export` restores a checked export into an empty database.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, insert, inspect, select, update

from quiz import config
from quiz.certificate_records import Certificate, Status
from quiz.certificates import CertificateStore
from quiz.signing import (
    Signer,
    SigningKeyError,
    key_id_of,
    load_public_key_pem,
    read_signer,
    verify_signature,
)
from quiz.status_list import restore as restore_status_lists
from quiz.status_list import snapshot as status_snapshot
from quiz.status_list import status_lists
from storage.database import (
    StorageUnavailable,
    certificates,
    describe,
    fresh_reading,
    open_existing,
    reading,
    require_folder,
    set_store_id,
    signing_keys,
    store_id,
    writing,
)

FORMAT = "gcl-certificates/1"
LINE_SIGNATURE = "line_signature"


class ExportError(ValueError):
    """An export that cannot be trusted or restored: the message says which line and why."""


def _canonical(record: dict[str, Any]) -> bytes:
    body = {key: value for key, value in record.items() if key != LINE_SIGNATURE}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _line(record: dict[str, Any], signer: Signer | None) -> str:
    if signer is not None:
        record = {**record, LINE_SIGNATURE: signer.sign(_canonical(record))}
    return json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"


def export_lines(data_dir: Path, signer: Signer | None, now: float) -> Iterator[str]:
    """Every key, certificate and revocation of the database, one signed JSON line each
    (read in one snapshot). Without a signer the lines carry no line signatures (each
    certificate still carries its own)."""
    digest = hashlib.sha256()
    count = 0

    def emit(record: dict[str, Any]) -> str:
        nonlocal count
        text = _line(record, signer)
        digest.update(text.encode())
        count += 1
        return text

    with reading(data_dir) as connection, connection.begin():
        store = store_id(connection)
        keys = connection.execute(select(signing_keys).order_by(signing_keys.c.added_at))
        keys = keys.mappings().all()
        rows = connection.execute(select(certificates).order_by(certificates.c.created_at))
        rows = rows.mappings().all()
        status_positions, status_lists = status_snapshot(connection)  # the Open Badges'
    yield emit({
        "type": "header", "format": FORMAT, "store_id": store,
        "exported_at": dt.datetime.fromtimestamp(now, dt.UTC).isoformat(timespec="seconds"),
        "database": describe(data_dir), "signed_by": signer.key_id if signer else None,
    })
    for key in keys:
        yield emit({"type": "key", "key_id": key["key_id"], "public_pem": key["public_pem"],
                    "added_at": key["added_at"]})
    for row in rows:
        certificate = Certificate.from_row(row)
        yield emit({
            "type": "certificate", "id": certificate.id, "attempt_id": certificate.attempt_id,
            "name": certificate.name, "course": certificate.course,
            "course_version": certificate.course_version, "date": certificate.date,
            "score": certificate.score, "show_score": certificate.show_score,
            "key_id": certificate.key_id, "signature": certificate.signature,
            "attempts": certificate.attempts, "lang": certificate.lang,
            "created_at": row["created_at"],
            "status_position": status_positions.get(certificate.id),
        })
    for row in rows:
        if row["revoked_at"]:
            yield emit({"type": "revocation", "id": row["id"], "revoked_at": row["revoked_at"],
                        "reason": row["revoke_reason"]})
    for status_list in status_lists:
        yield emit({"type": "status-list", **status_list})
    yield _line({"type": "end", "lines": count, "sha256": digest.hexdigest()}, signer)


def certificate_of(record: dict[str, Any], revocation: dict[str, Any] | None) -> Certificate:
    return Certificate(
        id=record["id"], attempt_id=record["attempt_id"], name=record["name"],
        course=record["course"], course_version=record["course_version"],
        date=record["date"], score=record["score"], show_score=bool(record["show_score"]),
        key_id=record["key_id"], signature=record["signature"],
        revoked_at=revocation["revoked_at"] if revocation else None,
        revoke_reason=revocation["reason"] if revocation else None,
        attempts=record.get("attempts"), lang=record.get("lang") or "en",
    )


@dataclass
class Export:
    """A checked export: what it holds, and whether its lines are signed by a trusted key."""

    header: dict[str, Any]
    keys: dict[str, dict[str, Any]] = field(default_factory=dict)
    certificates: dict[str, dict[str, Any]] = field(default_factory=dict)
    revocations: dict[str, dict[str, Any]] = field(default_factory=dict)
    status_lists: list[dict[str, Any]] = field(default_factory=list)  # the Open Badges'
    # Key ids given by the reader: one of them signed every line, the key lines included,
    # so each certificate verifies with a key the reader trusts or one it vouched for.
    trusted_keys: set[str] = field(default_factory=set)

    def certificate(self, certificate_id: str) -> Certificate | None:
        record = self.certificates.get(certificate_id)
        if record is None:
            return None
        return certificate_of(record, self.revocations.get(certificate_id))

    def status(self, certificate_id: str) -> Status:
        """What the verify page would say, from the export alone."""
        certificate = self.certificate(certificate_id)
        if certificate is None:
            return Status.NOT_FOUND
        key = self.keys.get(certificate.key_id)
        if key is None:
            return Status.UNKNOWN_KEY
        if not verify_signature(load_public_key_pem(key["public_pem"]), certificate.payload,
                                certificate.signature):
            return Status.BAD_SIGNATURE
        return Status.REVOKED if certificate.revoked_at else Status.VALID


def check_export(lines: Iterable[str], trusted_pems: Iterable[str]) -> Export:
    """Read and check an export: the digest, every line's signature (by the key the header
    names, which must be among `trusted_pems`: an export is trusted only against a key the
    reader names) and every certificate's own signature. Raises ExportError naming the
    first line that fails."""
    trusted = {key_id_of(load_public_key_pem(pem)) for pem in trusted_pems}
    if not trusted:  # anyone can write a self-consistent export with a key of their own
        raise ExportError(
            "no public key to trust the export against: give the key that signed it with "
            "--public-key FILE (from the verify page, or printed by `python -m quiz "
            "public-key` before the loss; import also trusts the signing key in DATA_DIR)")
    digest = hashlib.sha256()
    records: list[tuple[int, dict[str, Any]]] = []
    end: dict[str, Any] | None = None
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        if end is not None:
            raise ExportError(f"line {number}: text after the end line")
        try:
            record = json.loads(text)
        except ValueError as error:
            raise ExportError(f"line {number}: not JSON ({error})") from error
        if not isinstance(record, dict):
            raise ExportError(f"line {number}: not a JSON object")
        if record.get("type") == "end":
            end = {**record, "number": number}
            records.append((number, record))
            continue
        digest.update((text if text.endswith("\n") else text + "\n").encode())
        records.append((number, record))
    if not records or records[0][1].get("type") != "header":
        raise ExportError("line 1: not an export of this app (no header line)")
    header = records[0][1]
    if header.get("format") != FORMAT:
        raise ExportError(f"line 1: unknown format {header.get('format')!r} (expected {FORMAT})")
    if end is None:
        raise ExportError("the file ends before its end line: it was cut off")
    if end.get("sha256") != digest.hexdigest() or end.get("lines") != len(records) - 1:
        raise ExportError(f"line {end['number']}: the digest does not match the lines "
                          "before it (lines were changed, added or removed)")
    export = Export(header, trusted_keys=trusted)
    for number, record in records[1:]:
        kind = record.get("type")
        if kind == "key":
            if key_id_of(load_public_key_pem(record["public_pem"])) != record["key_id"]:
                raise ExportError(f"line {number}: key {record['key_id']} is not its id")
            export.keys[record["key_id"]] = record
        elif kind == "certificate":
            export.certificates[record["id"]] = record
        elif kind == "revocation":
            export.revocations[record["id"]] = record
        elif kind == "status-list":
            export.status_lists.append(record)
        elif kind != "end":
            raise ExportError(f"line {number}: unknown record type {kind!r}")
    signer_id = header.get("signed_by")
    if signer_id is not None:
        signing = export.keys.get(signer_id)
        if signing is None:
            raise ExportError(f"line 1: the export is signed by key {signer_id}, which it "
                              "does not contain")
        if signer_id not in trusted:
            raise ExportError(f"line 1: the export is signed by key {signer_id}, not by the "
                              "public key given")
        public = load_public_key_pem(signing["public_pem"])
        for number, record in records:
            if not verify_signature(public, _canonical(record),
                                    str(record.get(LINE_SIGNATURE, ""))):
                raise ExportError(f"line {number}: its line signature does not match")
    else:
        raise ExportError("line 1: the export is not signed, so the public key given cannot "
                          "vouch for it")
    for certificate_id in export.certificates:
        if export.status(certificate_id) not in (Status.VALID, Status.REVOKED):
            raise ExportError(f"certificate {certificate_id}: its signature does not verify")
    for certificate_id in export.revocations:
        if certificate_id not in export.certificates:
            raise ExportError(f"revocation of {certificate_id}: no such certificate")
    return export


def trusted_keys(data_dir: Path) -> list[str]:
    """The public keys an import trusts when the operator names none: the configured
    signing key's (the key file or CERT_SIGNING_KEY, when readable) and those the database
    already holds (none when it does not exist yet)."""
    pems: list[str] = []
    try:
        signer = read_signer(data_dir, config.signing_key_env())
    except SigningKeyError:
        signer = None
    if signer is not None:
        pems.append(signer.public_pem)
    with contextlib.suppress(StorageUnavailable):
        open_existing(data_dir)
        with reading(data_dir) as connection:
            pems += connection.execute(select(signing_keys.c.public_pem)).scalars().all()
    return pems


@dataclass(frozen=True)
class Restored:
    keys: int
    certificates: int
    revoked: int


def import_export(data_dir: Path, export: Export) -> Restored:
    """Restore a checked export into the configured database (created when missing, in an
    existing data folder), which must hold no certificate (the keys it holds stay); it
    takes the exported database's store id, so the data folder
    recognises it as the database its certificates were issued into. Every certificate is
    then verified through a new connection (ExportError when one does not come back as it
    was)."""
    require_folder(data_dir)  # a new database, but never a new data folder
    with writing(data_dir) as connection:
        held = connection.execute(select(func.count()).select_from(certificates)).scalar_one()
        if held:
            raise ExportError(f"the database {describe(data_dir)} is not empty ({held} "
                              "certificate(s)): import restores into an empty database only")
        stored = set(connection.execute(select(signing_keys.c.key_id)).scalars())
        for key in export.keys.values():
            if key["key_id"] in stored:  # the same id is the same public key
                continue
            connection.execute(insert(signing_keys).values(
                key_id=key["key_id"], public_pem=key["public_pem"], added_at=key["added_at"]))
        for record in export.certificates.values():
            connection.execute(insert(certificates).values(
                id=record["id"], attempt_id=record["attempt_id"], name=record["name"],
                course=record["course"], course_version=record["course_version"],
                issued_on=record["date"], score=record["score"],
                show_score=bool(record["show_score"]), key_id=record["key_id"],
                signature=record["signature"], created_at=record["created_at"],
                attempts=record.get("attempts"), lang=record.get("lang")))
        for revocation in export.revocations.values():
            connection.execute(update(certificates).where(certificates.c.id == revocation["id"])
                               .values(revoked_at=revocation["revoked_at"],
                                       revoke_reason=revocation["reason"]))
        if inspect(connection).has_table(status_lists.name):  # the export's lists win
            connection.execute(status_lists.delete().where(status_lists.c.key_id.in_(
                [row["key_id"] for row in export.status_lists])))
        restore_status_lists(connection, {
            record["id"]: record["status_position"] for record in export.certificates.values()
            if record.get("status_position") is not None}, export.status_lists)
        if export.header.get("store_id"):
            set_store_id(connection, export.header["store_id"])
    with fresh_reading(data_dir) as connection:
        store = store_id(connection)
    store_check = CertificateStore(data_dir, None)
    for certificate_id in export.certificates:
        expected = Status.REVOKED if certificate_id in export.revocations else Status.VALID
        if store_check.verify(certificate_id).status is not expected:
            raise ExportError(f"certificate {certificate_id} did not come back {expected.value}")
    if store:
        store_check.adopt_store(store)
    return Restored(len(export.keys), len(export.certificates), len(export.revocations))
