"""`python -m quiz credential <ID> [--out FILE]`, and what `revoke` and `export` do for the
Open Badges credentials: the CLI's part of quiz.badges, registered by quiz.cli."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from quiz.badges import CredentialRefused, NoAddress, after_revocation, badge_for, public_address
from quiz.service import QuizService, open_existing_service


def _write(target: Path, data: bytes) -> None:
    """Write a file whole or not at all (a temporary file renamed into place)."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        temporary.write_bytes(data)
        temporary.replace(target)
    finally:
        temporary.unlink(missing_ok=True)


def require_address(base_url: str | None) -> str | None:
    """The public address a credential will carry, or None after printing why there is
    none (no APP_BASE_URL and no --base-url): the command then exits 2."""
    try:
        return public_address(base_url)
    except NoAddress as refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return None


def cmd_credential(args: argparse.Namespace) -> int:
    if require_address(args.base_url) is None:
        return 2
    service = open_existing_service()  # a missing database: one line, nothing created
    for warning in service.warnings:  # e.g. a damaged key file: why none can be signed
        print(f"warning: {warning}", file=sys.stderr)
    try:
        badge = badge_for(service, args.id, args.base_url)
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


def publish_revocation(service: QuizService, certificate_id: str) -> int:
    """After `revoke`: the status lists signed again and published, warnings printed; 2
    with one line when a list that must carry the revocation could not be signed (the
    revocation itself is recorded), else 0."""
    published = after_revocation(service)
    for warning in published.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if published.error:
        print(f"error: {certificate_id} is revoked here, but {published.error}",
              file=sys.stderr)
        return 2
    return 0


def export_badges(service: QuizService, folder: Path, base_url: str | None = None) -> int:
    """Every valid certificate's credential as `<folder>/open-badge-<ID>.json` (revoked
    ones are skipped: their status lists say so), on the public address (`base_url`, else
    APP_BASE_URL); how many were written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    for certificate in service.all_certificates():
        try:
            badge = badge_for(service, certificate.id, base_url)
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
    add_base_url(credential)
    credential.set_defaults(run=cmd_credential)


def add_base_url(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--base-url", metavar="URL", help="the app's public address that credentials "
        "carry and sign (default: APP_BASE_URL; without either, none is written)")
