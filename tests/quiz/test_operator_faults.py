"""What an operator does by mistake on a bad day never makes a genuine certificate look fake:
a command run on a deleted database or a mistyped DATA_DIR, a restart on a lost database, a
key garbled between a learner's page and their click, a bad input file, a damaged key
replaced on purpose, a forged backup, a full disk, a read-only or mistaken DATA_DIR. After
each, every certificate shown to a learner verifies in a fresh process, and the verify page
never says NOT FOUND for a genuine ID. (The PostgreSQL lock: tests/quiz/test_postgres.py;
look-alike names: test_name_lookalikes.py; the cooldown behind one proxy: test_learners.py;
query echoes: tests/test_query_echo.py; the load benchmark: tests/test_load_benchmark.py.)"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from streamlit.testing.v1 import AppTest

from quiz.backup import _canonical
from quiz.certificate_records import Certificate
from quiz.certificates import ISSUED_MARKER
from quiz.ids import new_id
from quiz.service import QuizService, open_service, shared_service, startup_check
from quiz.signing import KEY_FILE, Signer, canonical_payload
from storage.database import StorageUnavailable, db_path, dispose_all
from tests.quiz.test_faults import (
    cli,
    one_line_error,
    pass_and_issue,
    sqlite_files,
    verified_after_restart,
)
from tests.quiz.test_pages import button

ROOT = Path(__file__).resolve().parents[2]
RunPage = Callable[..., AppTest]


def verify_page(certificate_id: str) -> AppTest:
    """The verify page as an employer opens it from the certificate's QR code."""
    at = AppTest.from_file(str(ROOT / "pages/verify.py"), default_timeout=60)
    at.query_params["id"] = certificate_id
    return at.run()


def never_not_found(shown: list[Certificate]) -> None:
    """The verify page says VALID, or that it cannot check right now: never NOT FOUND."""
    for certificate in shown:
        at = verify_page(certificate.id)
        assert not at.exception
        assert not any("NOT FOUND" in w.value for w in at.warning), certificate.id
        assert (any("VALID" in s.value for s in at.success)
                or any("cannot be checked right now" in e.value for e in at.error))


# 1. A read-only command on a deleted database, or a mistyped DATA_DIR ---------------------

READ_ONLY_COMMANDS = (["list"], ["verify", "{id}"], ["export", "{backup}"],
                      ["revoke", "{id}", "--reason", "a test"], ["public-key"],
                      ["new-key", "--replace"])


def test_commands_on_a_deleted_database_create_nothing_and_say_what_to_restore(
    service: QuizService, data_dir: Path, tmp_path: Path
) -> None:
    shown = [pass_and_issue(service), pass_and_issue(service, "Grace Hopper")]
    backup = tmp_path / "backup.jsonl"
    assert cli("export", str(backup)).returncode == 0
    shared_service()  # the server runs
    for path in sqlite_files(data_dir):
        path.unlink()
    key = (data_dir / KEY_FILE).read_bytes()
    late = tmp_path / "late.jsonl"
    for command in READ_ONLY_COMMANDS:
        args = [part.format(id=shown[0].id, backup=late) for part in command]
        result = cli(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        line = one_line_error(result)
        assert str(db_path(data_dir)) in line and "restore" in line, line
        assert not db_path(data_dir).exists(), f"{args} created a database"
    assert not late.exists()  # no empty backup
    assert (data_dir / KEY_FILE).read_bytes() == key  # no key retired
    with pytest.raises(StorageUnavailable, match="missing"):
        shared_service(create_key=False, strict=False)  # the verify page: cannot check
    never_not_found(shown)
    assert startup_check() == 2  # a restart refuses, and creates nothing
    assert not db_path(data_dir).exists()
    restored = cli("import", str(backup))
    assert restored.returncode == 0, restored.stderr
    shown.append(pass_and_issue(shared_service(), "Katherine Johnson"))
    verified_after_restart(shown)
    never_not_found(shown)


def test_a_mistyped_data_dir_is_one_line_and_no_folder(
    service: QuizService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = [pass_and_issue(service)]
    typo = tmp_path / "dta"
    monkeypatch.setenv("DATA_DIR", str(typo))
    dispose_all()
    for command in (*READ_ONLY_COMMANDS, ["import", "{backup}"]):
        args = [part.format(id=shown[0].id, backup=tmp_path / "none.jsonl") for part in command]
        result = cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr
        assert not typo.exists(), f"{args} created {typo}"


def test_an_emptied_database_is_a_storage_problem_on_every_side(
    service: QuizService, data_dir: Path, tmp_path: Path, app_test: RunPage
) -> None:
    """The database emptied in place (rows deleted, an empty copy put back): the verify
    page says it cannot check, the commands refuse, `export` writes no empty backup, and
    a restart refuses."""
    shown = [pass_and_issue(service)]
    saved = tmp_path / "saved.sqlite3"
    with sqlite3.connect(db_path(data_dir)) as source, sqlite3.connect(saved) as copy:
        source.backup(copy)
    with sqlite3.connect(db_path(data_dir)) as raw:
        raw.execute("DELETE FROM certificates")
    never_not_found(shown)
    assert any("cannot be checked right now" in e.value for e in verify_page(shown[0].id).error)
    backup = tmp_path / "empty.jsonl"
    for args in (["export", str(backup)], ["list"], ["verify", shown[0].id]):
        result = cli(*args)
        assert result.returncode == 2 and "EMPTY" in one_line_error(result), args
    assert not backup.exists()
    assert startup_check() == 2
    quiz = app_test("pages/take_quiz.py")
    assert any("needs the operator's attention" in e.value for e in quiz.error)
    dispose_all()
    for path in sqlite_files(data_dir):  # its write-ahead log would delete them again
        path.unlink()
    shutil.copyfile(saved, db_path(data_dir))
    shown.append(pass_and_issue(shared_service()))
    verified_after_restart(shown)
    never_not_found(shown)


# 4. The key garbled between drawing the page and the click --------------------------------

def test_a_key_garbled_before_the_click_shows_the_certificate_it_issued(
    app_test: RunPage,
) -> None:
    service = open_service()
    attempt = service.start_attempt()
    for position, drawn in enumerate(attempt.questions):
        service.answer(attempt.id, position, sorted(drawn.correct))
    at = app_test("pages/take_quiz.py", query={"attempt": attempt.id})
    at.text_input[0].input("Ada Lovelace")
    at = button(at, "Check the name").click().run()
    (service.data_dir / KEY_FILE).write_text("-----BEGIN PRIVATE KEY-----\nAAAA\n")
    at = button(at, "Issue my certificate").click().run()
    assert not at.exception
    stored = service.certificate_for(attempt.id)
    shown_ids = [code.value for code in at.code]
    if stored is None:  # issuing stopped before the click: nothing issued, and said so
        assert any("No certificate was issued" in e.value for e in at.error)
        return
    assert not any("No certificate was issued" in e.value for e in at.error)
    assert stored.id in shown_ids
    verified_after_restart([stored])


# 5. Bad input files: one line, exit 2 -------------------------------------------------------

def test_bad_input_files_are_one_line_and_exit_2(
    service: QuizService, tmp_path: Path
) -> None:
    pass_and_issue(service)
    backup = tmp_path / "backup.jsonl"
    assert cli("export", str(backup)).returncode == 0
    public = tmp_path / "public.pem"
    public.write_text(cli("public-key").stdout)
    garbled = tmp_path / "garbled.pem"
    garbled.write_text("-----BEGIN PUBLIC KEY-----\nnot base64 at all\n-----END PUBLIC KEY-----\n")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(os.urandom(4096) + b"\xff\xfe")
    missing = str(tmp_path / "missing")
    for args in (["check-bank", missing], ["import", missing],
                 ["import", str(backup), "--public-key", missing],
                 ["import", str(backup), "--public-key", str(garbled)],
                 ["check-export", missing, "--public-key", str(public)],
                 ["check-export", str(backup), "--public-key", str(garbled)],
                 ["check-export", str(binary), "--public-key", str(public)]):
        result = cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        line = one_line_error(result)
        assert line.startswith("error: ") and (missing in line or "garbled" in line
                                               or "binary" in line), (args, line)


# 6. The advice works when followed ----------------------------------------------------------

@pytest.mark.parametrize("damage", [b"", b"-----BEGIN PRIVATE KEY-----\ngarbage\n"])
def test_new_key_replace_replaces_a_damaged_key_as_the_advice_says(
    service: QuizService, data_dir: Path, damage: bytes
) -> None:
    shown = [pass_and_issue(service)]
    key = data_dir / KEY_FILE
    key.write_bytes(damage)
    refused = cli("list")  # works, and its warning's advice is followed below
    assert refused.returncode == 0 and "new-key --replace" in refused.stderr
    without = cli("new-key")
    assert without.returncode == 2 and "--replace" in one_line_error(without)
    replaced = cli("new-key", "--replace")
    assert replaced.returncode == 0, replaced.stderr
    aside = list(data_dir.glob("signing_key.damaged.*.pem"))
    assert len(aside) == 1 and aside[0].read_bytes() == damage  # kept, not deleted
    shown.append(pass_and_issue(shared_service(), "Grace Hopper"))
    assert shown[1].key_id != shown[0].key_id
    verified_after_restart(shown)
    never_not_found(shown)


# 8. A forged backup -------------------------------------------------------------------------

def forged_export(lines: list[str], forger: Signer) -> tuple[list[str], str]:
    """The export with a certificate of the forger's own added, every line re-signed by
    the forger's key and the digest recomputed: self-consistent, and not the operator's."""
    records = [json.loads(line) for line in lines]
    header, *body, _ = records
    header = {**header, "signed_by": forger.key_id}
    fields = {"id": new_id(), "name": "Mallory", "course":
              "Gradient Checkpointing Lab", "course_version": "1.0", "date": "2026-01-01",
              "score": 100, "key_id": forger.key_id}
    fake = {"type": "certificate", **fields, "attempt_id": "forged-attempt-0000",
            "show_score": True, "signature": forger.sign(canonical_payload(fields)),
            "attempts": None, "lang": "en", "created_at": 0.0}
    key = {"type": "key", "key_id": forger.key_id, "public_pem": forger.public_pem,
           "added_at": 0.0}
    out, digest = [], hashlib.sha256()
    for record in (header, key, *body, fake):
        record = {k: v for k, v in record.items() if k != "line_signature"}
        record["line_signature"] = forger.sign(_canonical(record))
        text = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
        digest.update(text.encode())
        out.append(text)
    end = {"type": "end", "lines": len(out), "sha256": digest.hexdigest()}
    end["line_signature"] = forger.sign(_canonical(end))
    out.append(json.dumps(end, sort_keys=True) + "\n")
    return out, fields["id"]


def test_a_forged_backup_is_trusted_only_against_a_key_the_operator_names(
    service: QuizService, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown = [pass_and_issue(service)]
    genuine = tmp_path / "backup.jsonl"
    assert cli("export", str(genuine)).returncode == 0
    public = tmp_path / "public.pem"
    public.write_text(service.public_keys()[service.key_id])
    forged, fake_id = forged_export(genuine.read_text().splitlines(keepends=True),
                                    Signer(Ed25519PrivateKey.generate()))
    forgery = tmp_path / "forged.jsonl"
    forgery.write_text("".join(forged))
    offline = cli("check-export", str(forgery))  # no key named: refused, says how
    assert offline.returncode == 1 and "--public-key" in one_line_error(offline)
    assert cli("check-export", str(forgery), "--public-key", str(public)).returncode == 1
    assert cli("check-export", str(genuine), "--public-key", str(public)).returncode == 0
    # A new, empty server (no key, no database yet): the forgery needs a key named.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    monkeypatch.setenv("DATA_DIR", str(fresh))
    dispose_all()
    refused = cli("import", str(forgery))
    assert refused.returncode == 1 and "--public-key" in one_line_error(refused)
    assert cli("import", str(forgery), "--public-key", str(public)).returncode == 1
    # The operator's own data folder trusts its key file: the genuine backup restores.
    monkeypatch.setenv("DATA_DIR", str(data_dir))
    dispose_all()
    for path in sqlite_files(data_dir):
        path.unlink()
    assert cli("import", str(forgery)).returncode == 1  # signed by another key
    restored = cli("import", str(genuine))
    assert restored.returncode == 0, restored.stderr
    result = cli("verify", fake_id)
    assert result.returncode == 1 and result.stdout.startswith("NOT FOUND")
    verified_after_restart(shown)


# 10. Operator messages name the real cause --------------------------------------------------

@contextlib.contextmanager
def small_disk(kib: int) -> Iterator[Path]:
    """A tmpfs of `kib` KiB (needs root and mount rights; skipped without them)."""
    folder = Path(tempfile.mkdtemp(prefix="quiz-small-disk-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs",
                              str(folder)], capture_output=True, text=True)
    if mounted.returncode != 0:
        folder.rmdir()
        pytest.skip(f"cannot mount a small disk here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        dispose_all()
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
        folder.rmdir()


def test_a_full_disk_is_named_full_not_an_io_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a real full disk SQLite says "disk I/O error" (it cannot grow its shared-memory
    file): the message says the disk is full; issuing resumes when there is room."""
    with small_disk(2048) as disk:
        monkeypatch.setenv("DATA_DIR", str(disk / "data"))
        monkeypatch.setenv("QUIZ_COOLDOWN_SECONDS", "0")
        monkeypatch.delenv("CERT_SIGNING_KEY", raising=False)
        dispose_all()
        service = open_service()
        shown = [pass_and_issue(service)]
        filler = disk / "filler"
        with contextlib.suppress(OSError), filler.open("wb") as handle:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        with pytest.raises(StorageUnavailable) as refused:
            pass_and_issue(service)
        assert refused.value.kind == "full", refused.value
        assert "full" in str(refused.value) and "ENOSPC" in str(refused.value)
        assert "permissions" not in str(refused.value)
        filler.unlink()
        shown.append(pass_and_issue(shared_service(), "Grace Hopper"))
        verified_after_restart(shown)


def test_a_first_start_on_a_read_only_data_dir_says_read_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with small_disk(512) as disk:
        (disk / "data").mkdir()
        remounted = subprocess.run(["mount", "-o", "remount,ro", str(disk)],
                                   capture_output=True, text=True)
        assert remounted.returncode == 0, remounted.stderr
        monkeypatch.setenv("DATA_DIR", str(disk / "data"))
        dispose_all()
        assert startup_check() == 2
        err = capsys.readouterr().err
        assert "read-only" in err and "deleted or moved" not in err, err
        assert len(err.strip().splitlines()) == 1


def test_a_data_dir_that_is_a_file_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_folder = tmp_path / "data"
    not_a_folder.write_text("a file\n")
    monkeypatch.setenv("DATA_DIR", str(not_a_folder))
    dispose_all()
    assert startup_check() == 2
    err = capsys.readouterr().err
    assert "is a file, not a folder" in err and len(err.strip().splitlines()) == 1, err
    result = cli("list")
    assert result.returncode == 2 and "not a folder" in one_line_error(result)
    assert not_a_folder.read_text() == "a file\n"


def test_a_marker_that_cannot_be_written_does_not_hide_the_certificate(
    service: QuizService, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issued-marker is written after the certificate is committed: its failure (a
    full disk) is logged for the operator, and the learner gets the certificate stored."""
    from quiz.certificates import CertificateStore

    def full(self: CertificateStore, record: dict) -> None:  # type: ignore[type-arg]
        raise StorageUnavailable("full", "the disk is full (ENOSPC)")

    monkeypatch.setattr(CertificateStore, "_write_marker", full)
    shown = [pass_and_issue(service)]
    assert not (data_dir / ISSUED_MARKER).exists()
    verified_after_restart(shown)
