"""The instructor's command line: `python -m quiz verify|revoke|list|public-key|check-bank`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from quiz.bank import BANK_PATH, BankError, load_bank
from quiz.certificates import Certificate, Status
from quiz.ids import IdError
from quiz.service import open_service


def _describe(certificate: Certificate) -> str:
    state = f"REVOKED {certificate.revoked_at}" if certificate.revoked_at else "valid"
    return (
        f"{certificate.id}  {certificate.date}  {certificate.score:>3}%  {state:<18}  "
        f"{certificate.name}"
    )


def cmd_verify(args: argparse.Namespace) -> int:
    result = open_service().verify(args.id)
    print(result.status.value)
    certificate = result.certificate
    if result.status is Status.TYPO:
        print(f"not a certificate ID: {result.problem}")
    elif certificate is not None:
        print(
            f"id:     {certificate.id}\nname:   {certificate.name}\n"
            f"course: {certificate.course} {certificate.course_version}\n"
            f"date:   {certificate.date}\nscore:  {certificate.score}%\n"
            f"key:    {certificate.key_id}"
        )
        if certificate.revoked_at:
            print(f"revoked {certificate.revoked_at}: {certificate.revoke_reason}")
    return 0 if result.valid else 1


def cmd_revoke(args: argparse.Namespace) -> int:
    try:
        certificate = open_service().revoke(args.id, args.reason)
    except IdError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (LookupError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"revoked {certificate.id} on {certificate.revoked_at}: {certificate.revoke_reason}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    certificates = open_service().all_certificates()
    for certificate in certificates:
        print(_describe(certificate))
    print(f"{len(certificates)} certificate(s)", file=sys.stderr)
    return 0


def cmd_public_key(args: argparse.Namespace) -> int:
    service = open_service()
    print(f"# Ed25519 public key, key id {service.key_id}")
    print(service.public_key_pem, end="")
    return 0


def cmd_check_bank(args: argparse.Namespace) -> int:
    try:
        questions = load_bank(args.path)
    except BankError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"{args.path}: {len(questions)} questions, all valid")
    return 0


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
    check = commands.add_parser("check-bank", help="validate a question bank file")
    check.add_argument("path", nargs="?", type=Path, default=BANK_PATH)
    check.set_defaults(run=cmd_check_bank)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args))
