"""Losing or changing the signing key or the database is never silent."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from quiz.attempts import Attempt
from quiz.certificate_records import Status
from quiz.certificates import ISSUED_MARKER, StorageError
from quiz.cli import main
from quiz.config import QUESTIONS_PER_ATTEMPT
from quiz.service import QuizService, open_service, startup_check
from quiz.signing import KEY_FILE
from storage.database import StorageUnavailable, db_path, dispose_all


def _issue(service: QuizService, attempt: Attempt) -> str:
    return service.issue(attempt.id, "Ada Lovelace", False).id


def test_a_lost_key_file_stops_the_app_with_a_clear_message(
    service: QuizService, passed_attempt: Attempt, data_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    certificate_id = _issue(service, passed_attempt)
    (data_dir / KEY_FILE).unlink()
    with pytest.raises(StorageError, match="signing key is missing.*1 certificate"):
        open_service()
    assert not (data_dir / KEY_FILE).exists()  # no silent replacement
    assert startup_check() == 2
    assert "REFUSING TO START" in capsys.readouterr().err
    # The CLI still verifies with the stored public key, and creates nothing.
    assert main(["verify", certificate_id]) == 0
    assert not (data_dir / KEY_FILE).exists()


@pytest.mark.parametrize("where", ["file", "environment"])
def test_a_damaged_key_is_called_damaged_never_missing(
    service: QuizService, passed_attempt: Attempt, data_dir: Path, where: str,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A key file (or CERT_SIGNING_KEY) that is there but garbled: every line that speaks
    of it (the start's refusal, the service's check, the log, the commands, the status
    list publisher) says damaged or unreadable; none says 'no signing_key.pem'."""
    import logging

    from quiz.badges import badge_for
    from quiz.status_list import Publisher
    from storage.location import data_dir as configured

    monkeypatch.setenv("OPEN_BADGE_STATUS_DIR", str(data_dir.parent / "status"))
    certificate_id = _issue(service, passed_attempt)
    badge_for(service, certificate_id)  # its key's status list: revoking must sign it again
    if where == "file":
        (data_dir / KEY_FILE).write_text("-----BEGIN PRIVATE KEY-----\ngarbled\n")
    else:
        (data_dir / KEY_FILE).unlink()
        monkeypatch.setenv("CERT_SIGNING_KEY", "garbled")
    with caplog.at_level(logging.INFO):
        assert startup_check() == 2
        relaxed = open_service(create_key=False, strict=False)
        said = [*relaxed.check().problems, *relaxed.warnings]
        with pytest.raises(StorageError) as issuing:
            relaxed.certificates._signer()
        said.append(str(issuing.value))
        assert main(["revoke", certificate_id, "--reason", "a test"]) == 2
        Publisher(configured).round()
    said += [capsys.readouterr().err, *(r.getMessage() for r in caplog.records)]
    problem, = relaxed.check().problems
    assert "damaged or unreadable" in problem and "damaged or unreadable" in str(
        issuing.value)
    assert not [line for line in said if "missing" in line or "no signing" in line
                or "no " + str(data_dir / KEY_FILE) in line], said
    assert not [line for line in said if ".. " in line], said  # one sentence's end, once


def test_new_key_on_purpose_keeps_old_certificates_valid(
    service: QuizService, passed_attempt: Attempt, data_dir: Path, finish,
    capsys: pytest.CaptureFixture[str],
) -> None:
    old_id = _issue(service, passed_attempt)
    old_key = service.key_id
    assert main(["new-key"]) == 1  # a key exists: rotation needs --replace
    assert main(["new-key", "--replace"]) == 0
    rotated = open_service()
    assert rotated.key_id != old_key
    assert (data_dir / f"signing_key.{old_key}.retired.pem").exists()
    old = rotated.verify(old_id)
    assert old.status is Status.VALID and not old.key_current
    assert old.certificate is not None and old.certificate.key_id == old_key
    attempt = finish(rotated, rotated.start_attempt(), QUESTIONS_PER_ATTEMPT)
    new = rotated.verify(rotated.issue(attempt.id, "Grace Hopper", False).id)
    assert new.status is Status.VALID and new.key_current
    capsys.readouterr()
    assert main(["public-key"]) == 0
    out = capsys.readouterr().out
    assert f"{rotated.key_id} (current key)" in out and f"{old_key} (earlier key)" in out


def test_a_different_environment_key_does_not_void_old_certificates(
    service: QuizService, passed_attempt: Attempt, monkeypatch: pytest.MonkeyPatch
) -> None:
    certificate_id = _issue(service, passed_attempt)
    other = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )
    monkeypatch.setenv("CERT_SIGNING_KEY", other.hex())
    changed = open_service()
    assert changed.key_id != service.key_id
    result = changed.verify(certificate_id)
    assert result.status is Status.VALID and result.certificate is not None
    assert result.certificate.key_id == service.key_id


def test_certificates_of_an_unknown_key_refuse_the_start(
    service: QuizService, passed_attempt: Attempt, data_dir: Path
) -> None:
    certificate_id = _issue(service, passed_attempt)
    with sqlite3.connect(db_path(data_dir)) as raw:  # a database from another server
        raw.execute("DELETE FROM signing_keys")
        raw.execute("UPDATE certificates SET key_id = 'feedfacefeedface'")
    with pytest.raises(StorageError, match="feedfacefeedface"):
        open_service()
    reader = open_service(create_key=False, strict=False)
    assert reader.verify(certificate_id).status is Status.UNKNOWN_KEY


def test_a_lost_or_emptied_database_refuses_the_start(
    service: QuizService, passed_attempt: Attempt, data_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _issue(service, passed_attempt)
    assert (data_dir / ISSUED_MARKER).exists()
    dispose_all()
    for path in data_dir.glob("quiz.sqlite3*"):
        path.unlink()
    with pytest.raises(StorageUnavailable, match="missing"):
        open_service()
    assert not db_path(data_dir).exists()  # not created again in its place
    assert startup_check() == 2
    assert "REFUSING TO START" in capsys.readouterr().err
    dispose_all()
    sqlite3.connect(db_path(data_dir)).close()  # an empty file put in its place
    assert startup_check() == 2
    assert "none of this app's tables" in capsys.readouterr().err


def test_a_lost_key_and_database_together_create_no_new_key(
    service: QuizService, passed_attempt: Attempt, data_dir: Path
) -> None:
    _issue(service, passed_attempt)
    dispose_all()
    for path in [*data_dir.glob("quiz.sqlite3*"), data_dir / KEY_FILE]:
        path.unlink()
    with pytest.raises(StorageUnavailable, match="missing"):  # the database first
        open_service()
    assert not (data_dir / KEY_FILE).exists() and not db_path(data_dir).exists()


def test_a_fresh_install_creates_its_key(data_dir: Path) -> None:
    service = open_service()
    assert service.key_id and (data_dir / KEY_FILE).exists()
    assert service.check().problems == () and service.warnings == ()
