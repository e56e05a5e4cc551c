"""The instructor's command line:
`python -m quiz verify|revoke|list|public-key|new-key|check-bank|export|import|check-export|
credential`.

Only `new-key` creates a signing key; the other commands never do (they read the database
and the public keys stored in it). No command creates a database or a data folder but
`import`, which restores into a new database in an existing folder. A damaged or missing
database, key or input file ends any command with one line that says what is wrong and
what to do (exit status 2)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from quiz import config
from quiz.backup import ExportError, check_export, export_lines, import_export, trusted_keys
from quiz.badge_cli import (
    add_base_url,
    add_commands,
    export_badges,
    publish_revocation,
    require_address,
)
from quiz.bank import BANK_PATH, BankError, cue_report, load_bank
from quiz.certificate_records import Certificate, Status
from quiz.certificates import StorageError
from quiz.did_key import did_of
from quiz.ids import IdError, parse_id
from quiz.service import QuizService, open_existing_service, open_service
from quiz.signing import (
    KEY_FILE,
    SigningKeyError,
    create_key_file,
    load_public_key_pem,
    read_signer,
    set_aside,
)
from storage.database import StorageUnavailable


class InputError(ValueError):
    """A file named on the command line cannot be used: one line says which and why."""


def _read_text(path: Path, what: str) -> str:
    """The text of a file given on the command line (InputError when it cannot be read)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path} is not {what} (it is not UTF-8 text)") from error
    except OSError as error:
        raise InputError(f"cannot read {what} {path}: {error.strerror}") from error


def _public_pems(paths: Sequence[Path]) -> list[str]:
    """The public keys given with --public-key, each checked to be an Ed25519 PEM."""
    pems = [_read_text(path, "a public key file") for path in paths]
    for path, pem in zip(paths, pems, strict=True):
        try:
            load_public_key_pem(pem)
        except ValueError as error:
            raise InputError(f"{path} is not an Ed25519 public key in PEM form (as printed by "
                             "`python -m quiz public-key`)") from error
    return pems


def _describe(certificate: Certificate) -> str:
    state = f"REVOKED {certificate.revoked_at}" if certificate.revoked_at else "valid"
    return (
        f"{certificate.id}  {certificate.date}  {certificate.score:>3}%  {state:<18}  "
        f"{certificate.name}"
    )


def cmd_verify(args: argparse.Namespace) -> int:
    service = open_existing_service()
    for warning in service.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    outcomes = [_verify_one(service, text) for text in args.id]
    return 0 if all(outcomes) else 1


def _verify_one(service: QuizService, text: str) -> bool:
    result = service.verify(text)
    print(result.status.value)
    certificate = result.certificate
    if result.status is Status.TYPO:
        print(f"not a certificate ID: {result.problem.value if result.problem else ''}")
    elif certificate is not None:
        print(
            f"id:     {certificate.id}\nname:   {certificate.name}\n"
            f"course: {certificate.course} {certificate.course_version}\n"
            f"date:   {certificate.date}\nscore:  {certificate.score}%\n"
            f"tries:  {certificate.attempts or 'not recorded'}\n"
            f"key:    {certificate.key_id}"
            f"{' (the current key)' if result.key_current else ''}"
        )
        if result.status is Status.UNKNOWN_KEY:
            print("the public key of this certificate's signing key is not stored here")
        if certificate.revoked_at:
            print(f"revoked {certificate.revoked_at}: {certificate.revoke_reason}")
    return result.valid


def cmd_revoke(args: argparse.Namespace) -> int:
    service = open_existing_service()
    try:
        certificate = service.revoke(args.id, args.reason)
    except IdError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (LookupError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"revoked {certificate.id} on {certificate.revoked_at}: {certificate.revoke_reason}")
    return publish_revocation(service, certificate.id)  # the Open Badges status lists


def cmd_list(args: argparse.Namespace) -> int:
    certificates = open_existing_service().all_certificates()
    for certificate in certificates:
        print(_describe(certificate))
    print(f"{len(certificates)} certificate(s)", file=sys.stderr)
    return 0


def cmd_public_key(args: argparse.Namespace) -> int:
    keys = open_existing_service().public_keys()
    if not keys:
        print("error: no signing key yet (the app creates one on first start)", file=sys.stderr)
        return 1
    for number, (key_id, pem) in enumerate(keys.items()):
        role = "current key" if number == 0 else "earlier key"
        print(f"# Ed25519 public key, key id {key_id} ({role})")
        print(f"# Open Badges issuer: {did_of(load_public_key_pem(pem))}")
        print(pem, end="")
    return 0


def cmd_new_key(args: argparse.Namespace) -> int:
    """Start a new signing key on purpose (after a loss, to rotate, or in place of a damaged
    key file, which is set aside, never deleted): earlier certificates keep verifying with
    their public keys stored in the database."""
    data_dir = config.data_dir()
    if config.signing_key_env():
        print("error: CERT_SIGNING_KEY is set: put the new key there instead", file=sys.stderr)
        return 1
    path = data_dir / KEY_FILE
    try:
        old = read_signer(data_dir)
    except SigningKeyError as damaged:
        if not args.replace:
            print(f"error: {damaged}", file=sys.stderr)
            return 2
        old = None
    if old is not None and not args.replace:
        print(f"error: {path} exists (key {old.key_id}); pass --replace to retire it",
              file=sys.stderr)
        return 1
    service = open_existing_service()  # the database must be there to keep the public keys
    if old is None and path.exists():
        print(f"set the unreadable key file aside as {set_aside(path)}")
    elif old is not None:
        service.certificates.register_key()  # its public half, for earlier certificates
        retired = path.with_name(f"signing_key.{old.key_id}.retired.pem")
        path.rename(retired)
        print(f"retired key {old.key_id} to {retired}")
    signer = create_key_file(data_dir)
    open_service()
    print(f"new signing key {signer.key_id} in {path}")
    return 0


def cmd_check_bank(args: argparse.Namespace) -> int:
    _read_text(args.path, "a question bank")  # missing or not text: one line, exit 2
    try:
        questions = load_bank(args.path)
    except BankError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"{args.path}: {len(questions)} questions, all valid")
    cues = cue_report(questions)
    print(cues.describe())
    for problem in cues.problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if cues.problems else 0


def cmd_export(args: argparse.Namespace) -> int:
    """Every certificate, revocation and public key as signed JSON lines (a backup). A
    database that is missing, or empty where certificates were issued, is refused (never
    an empty backup of it)."""
    if args.open_badges and require_address(args.base_url) is None:
        return 2  # before anything is written
    service = open_existing_service()
    if service.signer is None:
        print("warning: no readable signing key: the lines are not signed (each certificate "
              "still carries its own signature)", file=sys.stderr)
    lines = export_lines(service.data_dir, service.signer, time.time())
    if args.output == "-":
        count = sum(1 for line in lines if sys.stdout.write(line) is not None)
    else:
        target = Path(args.output)
        temporary = target.with_name(f".{target.name}.{os.getpid()}.partial")
        try:
            with temporary.open("w", encoding="utf-8") as handle:
                count = sum(1 for line in lines if handle.write(line) is not None)
                handle.flush()
                os.fsync(handle.fileno())
            temporary.replace(target)  # never a half-written backup under the real name
        except OSError as error:
            temporary.unlink(missing_ok=True)
            raise InputError(f"cannot write the backup {target}: {error.strerror}; nothing "
                             "was written") from error
    print(f"exported {count} line(s) from {len(service.all_certificates())} certificate(s)",
          file=sys.stderr)
    if args.open_badges:
        written = export_badges(service, Path(args.open_badges), args.base_url)
        print(f"wrote {written} Open Badges credential(s) to {args.open_badges}", file=sys.stderr)
    return 0


def _read_export(path: str) -> list[str]:
    text = sys.stdin.read() if path == "-" else _read_text(Path(path), "an export")
    return text.splitlines(keepends=True)


def cmd_import(args: argparse.Namespace) -> int:
    lines = _read_export(args.path)
    given = _public_pems(args.public_key)
    data_dir = config.data_dir()
    try:
        export = check_export(lines, given or trusted_keys(data_dir))
        restored = import_export(data_dir, export)
    except ExportError as error:
        print(f"error: {error}; nothing was imported", file=sys.stderr)
        return 1
    print(f"imported {restored.certificates} certificate(s) ({restored.revoked} revoked) and "
          f"{restored.keys} public key(s); every one verified")
    return 0


def cmd_check_export(args: argparse.Namespace) -> int:
    """Check an export offline (no database, no key file) against the public keys given:
    its lines, and one ID."""
    lines = _read_export(args.path)
    try:
        export = check_export(lines, _public_pems(args.public_key))
    except ExportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.id is None:
        print(f"{len(export.certificates)} certificate(s), {len(export.revocations)} "
              f"revoked, {len(export.keys)} key(s): every signature checks")
        return 0
    try:
        id_text = parse_id(args.id).text
    except IdError as error:
        print(f"{Status.TYPO.value}\nnot a certificate ID: {error.problem.value}")
        return 1
    status = export.status(id_text)
    print(status.value)
    certificate = export.certificate(id_text)
    if certificate is not None:
        print(f"name:   {certificate.name}\ndate:   {certificate.date}\n"
              f"key:    {certificate.key_id}")
        if certificate.revoked_at:
            print(f"revoked {certificate.revoked_at}: {certificate.revoke_reason}")
    return 0 if status is Status.VALID else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m quiz",
        description="Certificates of the Gradient Checkpointing Lab (reads DATA_DIR).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    verify = commands.add_parser("verify", help="check IDs; exit 0 only when all are valid")
    verify.add_argument("id", nargs="+")
    verify.set_defaults(run=cmd_verify)
    revoke = commands.add_parser("revoke", help="revoke a certificate")
    revoke.add_argument("id")
    revoke.add_argument("--reason", required=True)
    revoke.set_defaults(run=cmd_revoke)
    commands.add_parser("list", help="list every certificate").set_defaults(run=cmd_list)
    commands.add_parser("public-key", help="print the public key (PEM)").set_defaults(
        run=cmd_public_key
    )
    new_key = commands.add_parser("new-key", help="create a signing key (after a loss or to "
                                  "rotate); earlier certificates keep verifying")
    new_key.add_argument("--replace", action="store_true",
                         help="retire the current key file (or set a damaged one aside)")
    new_key.set_defaults(run=cmd_new_key)
    check = commands.add_parser("check-bank", help="validate a question bank file")
    check.add_argument("path", nargs="?", type=Path, default=BANK_PATH)
    check.set_defaults(run=cmd_check_bank)
    export = commands.add_parser("export", help="write every certificate, revocation and "
                                 "public key as signed JSON lines (a backup)")
    export.add_argument("output", nargs="?", default="-", help="a file (default: stdout)")
    export.add_argument("--open-badges", metavar="FOLDER", help="also write every valid "
                        "certificate's Open Badges 3.0 credential into FOLDER")
    add_base_url(export)
    export.set_defaults(run=cmd_export)
    restore = commands.add_parser("import", help="restore an export into an empty database")
    restore.add_argument("path", help="the export file (- for stdin)")
    restore.add_argument("--public-key", type=Path, action="append", default=[],
                         help="a public key (PEM) the export must be signed by (default: "
                         "the signing key in DATA_DIR and the keys the database holds)")
    restore.set_defaults(run=cmd_import)
    offline = commands.add_parser("check-export", help="check an export, or one ID in it, "
                                  "offline (no database, no key file)")
    offline.add_argument("path", help="the export file (- for stdin)")
    offline.add_argument("--public-key", type=Path, action="append", default=[],
                         help="a public key (PEM) you trust, e.g. from the verify page "
                         "(required)")
    offline.add_argument("--id", help="a certificate ID to check")
    offline.set_defaults(run=cmd_check_export)
    add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (StorageError, StorageUnavailable, SigningKeyError, InputError) as problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
