"""The instructor's command line:
`python -m quiz verify|revoke|list|public-key|new-key|check-bank`.

Only `new-key` creates a signing key; the other commands never do (they read the database
and the public keys stored in it)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from quiz import config
from quiz.bank import BANK_PATH, BankError, cue_report, load_bank
from quiz.certificates import Certificate, Status
from quiz.ids import IdError
from quiz.service import open_service
from quiz.signing import KEY_FILE, create_key_file, read_signer


def _describe(certificate: Certificate) -> str:
    state = f"REVOKED {certificate.revoked_at}" if certificate.revoked_at else "valid"
    return (
        f"{certificate.id}  {certificate.date}  {certificate.score:>3}%  {state:<18}  "
        f"{certificate.name}"
    )


def cmd_verify(args: argparse.Namespace) -> int:
    result = open_service(create_key=False, strict=False).verify(args.id)
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
    return 0 if result.valid else 1


def cmd_revoke(args: argparse.Namespace) -> int:
    try:
        certificate = open_service(create_key=False, strict=False).revoke(args.id, args.reason)
    except IdError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (LookupError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"revoked {certificate.id} on {certificate.revoked_at}: {certificate.revoke_reason}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    certificates = open_service(create_key=False, strict=False).all_certificates()
    for certificate in certificates:
        print(_describe(certificate))
    print(f"{len(certificates)} certificate(s)", file=sys.stderr)
    return 0


def cmd_public_key(args: argparse.Namespace) -> int:
    keys = open_service(create_key=False, strict=False).public_keys()
    if not keys:
        print("error: no signing key yet (the app creates one on first start)", file=sys.stderr)
        return 1
    for number, (key_id, pem) in enumerate(keys.items()):
        role = "current key" if number == 0 else "earlier key"
        print(f"# Ed25519 public key, key id {key_id} ({role})")
        print(pem, end="")
    return 0


def cmd_new_key(args: argparse.Namespace) -> int:
    """Start a new signing key on purpose (after a loss, or to rotate): earlier certificates
    keep verifying with their public keys stored in the database."""
    data_dir = config.data_dir()
    if config.signing_key_env():
        print("error: CERT_SIGNING_KEY is set: put the new key there instead", file=sys.stderr)
        return 1
    path = data_dir / KEY_FILE
    old = read_signer(data_dir)
    if old is not None:
        if not args.replace:
            print(f"error: {path} exists (key {old.key_id}); pass --replace to retire it",
                  file=sys.stderr)
            return 1
        open_service(create_key=False, strict=False).certificates.register_key()
        retired = path.with_name(f"signing_key.{old.key_id}.retired.pem")
        path.rename(retired)
        print(f"retired key {old.key_id} to {retired}")
    signer = create_key_file(data_dir)
    open_service()
    print(f"new signing key {signer.key_id} in {path}")
    return 0


def cmd_check_bank(args: argparse.Namespace) -> int:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m quiz",
        description="Certificates of the Gradient Checkpointing Lab (reads DATA_DIR).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    verify = commands.add_parser("verify", help="check an ID; exit 0 only when valid")
    verify.add_argument("id")
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
    new_key.add_argument("--replace", action="store_true", help="retire the current key file")
    new_key.set_defaults(run=cmd_new_key)
    check = commands.add_parser("check-bank", help="validate a question bank file")
    check.add_argument("path", nargs="?", type=Path, default=BANK_PATH)
    check.set_defaults(run=cmd_check_bank)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))
