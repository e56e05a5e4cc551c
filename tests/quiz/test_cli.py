"""The instructor CLI (`python -m quiz`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from quiz.attempts import Attempt
from quiz.cli import main
from quiz.ids import new_id
from quiz.service import QuizService
from quiz.service import open_service as _open_service

ROOT = Path(__file__).resolve().parents[2]


def test_verify_exits_zero_only_for_a_valid_certificate(
    service: QuizService, passed_attempt: Attempt, capsys: pytest.CaptureFixture[str]
) -> None:
    certificate = service.issue(passed_attempt.id, "Ada Lovelace", False)
    assert main(["verify", certificate.id]) == 0
    out = capsys.readouterr().out
    assert out.startswith("VALID") and "Ada Lovelace" in out
    assert main(["verify", new_id()]) == 1
    assert capsys.readouterr().out.startswith("NOT FOUND")
    typo = certificate.id[:-1] + ("0" if certificate.id[-1] != "0" else "1")
    assert main(["verify", typo]) == 1
    assert capsys.readouterr().out.startswith("TYPO")
    assert main(["revoke", certificate.id, "--reason", "cheating"]) == 0
    assert main(["verify", certificate.id]) == 1
    assert "REVOKED" in capsys.readouterr().out
    assert main(["revoke", "nonsense", "--reason", "x"]) == 2
    assert main(["revoke", new_id(), "--reason", "x"]) == 1


def test_list_and_public_key(
    service: QuizService, passed_attempt: Attempt, capsys: pytest.CaptureFixture[str]
) -> None:
    certificate = service.issue(passed_attempt.id, "Jürgen Groß", True)
    assert main(["list"]) == 0
    listing = capsys.readouterr().out
    assert certificate.id in listing and "Jürgen Groß" in listing
    assert main(["public-key"]) == 0
    out = capsys.readouterr().out
    assert service.public_key_pem in out and service.key_id in out


def test_check_bank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-bank"]) == 0
    broken = tmp_path / "bank.yaml"
    broken.write_text("- id: only\n  topic: why-memory\n")
    assert main(["check-bank", str(broken)]) == 1
    assert "entry 1 (id 'only'): missing" in capsys.readouterr().err


def test_runs_as_a_module_on_the_same_data_dir_and_never_creates_a_key(
    data_dir: Path,
) -> None:
    env = {**os.environ, "DATA_DIR": str(data_dir)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "quiz", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)

    for command in (["public-key"], ["verify", new_id()], ["list"]):
        before = run(*command)  # before the app's first start: no database to read
        assert before.returncode == 2 and "does not exist" in before.stderr, command
    assert not data_dir.exists()  # no folder, database or key made by a command
    key_id = _open_service().key_id  # the app's start creates it
    result = run("public-key")
    assert result.returncode == 0 and "BEGIN PUBLIC KEY" in result.stdout
    assert key_id and key_id in result.stdout
