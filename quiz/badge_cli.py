"""`python -m quiz credential <ID> [--out FILE]`, and what `revoke` and `export` do for the
Open Badges credentials: the CLI's part of quiz.badges, registered by quiz.cli."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from quiz.badges import CredentialRefused, after_revocation, badge_for
from quiz.service import QuizService, open_existing_service


def _write(target: Path, data: bytes) -> None:
    """Write a file whole or not at all (a temporary file renamed into place)."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        temporary.write_bytes(data)
        temporary.replace(target)
    finally:
        temporary.unlink(missing_ok=True)


def cmd_credential(args: argparse.Namespace) -> int:
    service = open_existing_service()  # a missing database: one line, nothing created
    for warning in service.warnings:  # e.g. a damaged key file: why none can be signed
        print(f"warning: {warning}", file=sys.stderr)
    try:
        badge = badge_for(service, args.id)
    except CredentialRefused as refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 1
    if args.out in (None, "-"):
        sys.stdout.buffer.write(badge.json_bytes)
        return 0
    target = Path(args.out)
    try:
        _write(target, badge.json_bytes)
    except OSError as error:
        print(f"error: cannot write {target}: {error.strerror}", file=sys.stderr)
        return 1
    print(f"wrote the Open Badges 3.0 credential of {badge.certificate.id} to {target}",
          file=sys.stderr)
    return 0


def publish_revocation(service: QuizService) -> None:
    """After `revoke`: the status lists signed again and published, warnings printed."""
    for warning in after_revocation(service):
        print(f"warning: {warning}", file=sys.stderr)


def export_badges(service: QuizService, folder: Path) -> int:
    """Every valid certificate's credential as `<folder>/open-badge-<ID>.json` (revoked
    ones are skipped: their status lists say so); how many were written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    for certificate in service.all_certificates():
        try:
            badge = badge_for(service, certificate.id)
        except CredentialRefused as refusal:
            print(f"skipped: {refusal}", file=sys.stderr)
            continue
        _write(folder / badge.filename, badge.json_bytes)
        written += 1
    return written


def add_commands(commands: argparse._SubParsersAction) -> None:
    credential = commands.add_parser(
        "credential", help="write a certificate's Open Badges 3.0 credential (JSON)")
    credential.add_argument("id")
    credential.add_argument("--out", help="a file (default: stdout)")
    credential.set_defaults(run=cmd_credential)
