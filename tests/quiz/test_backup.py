"""Backup and restore: `export` writes signed, self-verifying JSON lines; `import` restores
them into an empty database, where every certificate verifies as before; a changed, cut or
foreign export is refused; one certificate is checked offline from the export and the
public key alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from quiz.backup import ExportError, check_export, export_lines, import_export
from quiz.certificate_records import Status
from quiz.service import QuizService, open_service
from quiz.signing import Signer
from storage.database import dispose_all
from tests.quiz.test_faults import pass_and_issue

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def exported(service: QuizService) -> tuple[list[str], list[str]]:
    """Three certificates (the first revoked) and their export."""
    ids = [pass_and_issue(service, f"Learner {n}").id for n in range(3)]
    service.revoke(ids[0], "issued by mistake")
    return ids, list(export_lines(service.data_dir, service.signer, time.time()))


def test_import_into_an_empty_database_keeps_every_status(
    service: QuizService, exported: tuple[list[str], list[str]], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ids, lines = exported
    public = service.public_keys()[service.key_id]
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "restored"))
    dispose_all()
    (tmp_path / "restored").mkdir()  # a restore makes a database, never a data folder
    restored = import_export(tmp_path / "restored", check_export(lines, [public]))
    assert (restored.certificates, restored.revoked, restored.keys) == (3, 1, 1)
    reader = open_service(create_key=False, strict=False)
    assert [reader.verify(i).status for i in ids] == [Status.REVOKED, Status.VALID,
                                                      Status.VALID]
    with pytest.raises(ExportError, match="not empty"):
        import_export(tmp_path / "restored", check_export(lines, [public]))


def _edit(lines: list[str], kind: str, change: dict) -> list[str]:  # type: ignore[type-arg]
    out = []
    for line in lines:
        record = json.loads(line)
        if record["type"] == kind:
            record.update(change)
            line = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
            kind = "done"
        out.append(line)
    return out


def test_a_changed_cut_or_foreign_export_is_refused(
    service: QuizService, exported: tuple[list[str], list[str]]
) -> None:
    _, lines = exported
    public = service.public_keys()[service.key_id]
    check_export(lines, [public])  # the untouched export passes
    revocation = next(i for i, line in enumerate(lines) if '"revocation"' in line)
    for broken, why in [
        (_edit(lines, "certificate", {"name": "Mallory"}), "digest"),
        (lines[:revocation] + lines[revocation + 1:], "digest"),  # a revocation dropped
        (lines[:-1], "cut off"),
        (lines[1:], "header"),
    ]:
        with pytest.raises(ExportError, match=why):
            check_export(broken, [public])
    stranger = Signer(Ed25519PrivateKey.generate()).public_pem
    with pytest.raises(ExportError, match="not by the public key given"):
        check_export(lines, [stranger])


def test_a_certificate_is_checked_offline_from_the_export_and_the_public_key(
    service: QuizService, exported: tuple[list[str], list[str]], tmp_path: Path
) -> None:
    ids, lines = exported
    backup = tmp_path / "backup.jsonl"
    backup.write_text("".join(lines), encoding="utf-8")
    public = tmp_path / "public.pem"
    public.write_text(service.public_keys()[service.key_id])
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    env["DATA_DIR"] = str(tmp_path / "no-data-here")

    def check(certificate_id: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "quiz", "check-export", str(backup), "--public-key",
             str(public), "--id", certificate_id],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    valid = check(ids[1])
    assert valid.returncode == 0 and valid.stdout.startswith("VALID"), valid.stderr
    assert check(ids[0]).stdout.startswith("REVOKED")
    assert not (tmp_path / "no-data-here").exists()  # no database, no key file touched


def test_import_into_a_server_started_first_keeps_its_key(
    service: QuizService, exported: tuple[list[str], list[str]], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new machine with the key from its backup, started before the restore (the database
    holds that key and no certificate): import trusts the key and restores every status."""
    from quiz.cli import main
    from quiz.signing import KEY_FILE

    ids, lines = exported
    restored = tmp_path / "restored"
    restored.mkdir()
    (restored / KEY_FILE).write_bytes((service.data_dir / KEY_FILE).read_bytes())
    monkeypatch.setenv("DATA_DIR", str(restored))
    dispose_all()
    assert open_service().key_id == service.key_id
    backup = tmp_path / "backup.jsonl"
    backup.write_text("".join(lines), encoding="utf-8")
    assert main(["import", str(backup)]) == 0
    reader = open_service(create_key=False, strict=False)
    assert [reader.verify(i).status for i in ids] == [Status.REVOKED, Status.VALID,
                                                      Status.VALID]
