"""What an Open Badge may be trusted for, checked with someone else's verifier
(tests/quiz/open_badge_check.py): a credential names only the public address the operator
configured, never one a browser reported (a learner could aim it at a host of their own and
serve an old status list there); a status list stops verifying a day after it was signed,
so an old copy cannot hide a revocation; a revocation made while the key cannot be read
fails the command and reaches outside verifiers once the key is back; the commands refuse
without a public address; the course's did:key is printed where a verifier can pin it."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from i18n import gettext
from quiz.badges import CredentialRefused, badge_for
from quiz.certificate_records import Certificate, Status
from quiz.cli import main
from quiz.did_key import did_of
from quiz.service import QuizService, open_service
from quiz.signing import KEY_FILE
from quiz.status_list import list_credential, stored_list
from tests.quiz.open_badge_check import independent_verify, published_lists
from tests.quiz.test_open_badges import issue

pytestmark = pytest.mark.heavy  # Node starts for most of them: run first

FOREIGN = "http://localhost:8763"  # a host the learner runs, as their browser reports it
NO_ADDRESS = ("Open Badges are offered once the course's operator sets the app's public "
              "address (APP_BASE_URL). The certificate, its PDF and its verify link are not "
              "affected.")


@pytest.fixture
def status_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "static-status"
    monkeypatch.setenv("OPEN_BADGE_STATUS_DIR", str(folder))
    return folder


def publisher_round() -> None:
    """One round of the server's status-list publisher, as at its start."""
    import threading

    from quiz.status_list import publish_forever
    from storage.location import data_dir

    stop = threading.Event()
    stop.set()
    publish_forever(data_dir, stop)


def built_on_the_verify_page(monkeypatch: pytest.MonkeyPatch, app_test: Any,
                             certificate: Certificate, lang: str = "en",
                             ) -> tuple[AppTest, list[dict[str, Any]]]:
    """The verify page of `certificate` opened from FOREIGN, and every credential the page
    built for it."""
    import ui.badge_download as download
    import ui.quiz_view as quiz_view

    built: list[dict[str, Any]] = []
    real = download.badge_for

    def spy(*args: Any, **kwargs: Any) -> Any:
        badge = real(*args, **kwargs)
        built.append(badge.document)
        return badge

    monkeypatch.setattr(download, "badge_for", spy)
    monkeypatch.setattr(quiz_view, "reached_base", lambda *args, **kwargs: FOREIGN)
    at = app_test("pages/verify.py", query={"id": certificate.id, "lang": lang})
    assert not at.exception
    return at, built


def test_a_badge_never_carries_the_address_the_browser_reported(
    service: QuizService, status_dir: Path, monkeypatch: pytest.MonkeyPatch,
    app_test: Any,
) -> None:
    monkeypatch.setenv("DATA_DIR", str(service.data_dir))  # app_test set its own
    certificate = issue(service, "Grace Hopper", "en")
    monkeypatch.delenv("APP_BASE_URL")  # the default: no public address configured
    at, built = built_on_the_verify_page(monkeypatch, app_test, certificate, "de")
    assert not any(FOREIGN.split("//")[1] in json.dumps(document) for document in built)
    assert built == []  # nothing signed at all
    badge, = [b for b in at.get("download_button") if b.proto.label == gettext(
        "de", "Download as Open Badge (JSON)")]
    assert badge.proto.disabled
    assert gettext("de", NO_ADDRESS) in [caption.value for caption in at.caption]
    assert gettext("de", NO_ADDRESS) != NO_ADDRESS  # said in the page's language
    assert stored_list(service.data_dir, service.key_id) is None  # no list pinned anywhere
    with pytest.raises(CredentialRefused, match="APP_BASE_URL is not set"):
        badge_for(service, certificate.id)

    monkeypatch.setenv("APP_BASE_URL", "https://lab.example")  # the operator sets it
    _, built = built_on_the_verify_page(monkeypatch, app_test, certificate)
    credential, = built
    assert "8763" not in json.dumps(credential)
    url = credential["credentialStatus"]["statusListCredential"]
    assert url == f"https://lab.example/app/static/status/{service.key_id}.json"
    assert credential["issuer"]["url"] == "https://lab.example"
    assert credential["id"].startswith("https://lab.example/verify?id=")
    result, = independent_verify([credential], published_lists(status_dir, [credential]))
    assert result["verified"] and result["statusChecked"] and result["revoked"] is False
    assert result["listAtItsId"]  # the list served there names that address as its own
    # A list signed by the course's key but for another address, served at the badge's:
    # Digital Bazaar's verifier takes it, a verifier that compares its id does not.
    assert service.signer is not None
    elsewhere = list_credential(service.signer.private_key,
                                url.replace("https://lab.example", FOREIGN), [], time.time())
    moved, = independent_verify([credential], {url: elsewhere})
    assert moved["verified"] and not moved["listAtItsId"]


def test_an_old_copy_of_the_status_list_stops_verifying(
    service: QuizService, status_dir: Path,
) -> None:
    certificate = issue(service, "Grace Hopper", "en")
    credential = badge_for(service, certificate.id).document
    url = credential["credentialStatus"]["statusListCredential"]
    assert main(["revoke", certificate.id, "--reason", "issued by mistake"]) == 0
    served = published_lists(status_dir, [credential])[url]
    valid = dt.datetime.fromisoformat(served["validUntil"]) - dt.datetime.fromisoformat(
        served["validFrom"])
    assert valid == dt.timedelta(days=1)
    current, = independent_verify([credential], {url: served})
    assert current["statusChecked"] and current["revoked"] is True
    # The list as it was served before the revocation, kept by someone and served from
    # anywhere: two days later it no longer verifies.
    assert service.signer is not None
    old = list_credential(service.signer.private_key, url, [], time.time() - 2 * 24 * 3600)
    expired, = independent_verify([credential], {url: old})
    assert not expired["verified"] and not expired["statusChecked"]
    assert 'is after "validUntil"' in expired["statusError"], expired


def test_the_publisher_signs_the_list_again_before_it_expires(
    service: QuizService, status_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from quiz import status_list

    certificate = issue(service, "Grace Hopper", "en")
    badge_for(service, certificate.id)
    first = stored_list(service.data_dir, service.key_id)
    publisher_round()  # fresh: nothing to do
    assert stored_list(service.data_dir, service.key_id) == first
    later = time.time() + status_list.RESIGN_SECONDS + 60
    monkeypatch.setattr(status_list.time, "time", lambda: later)
    publisher_round()
    again = stored_list(service.data_dir, service.key_id)
    assert again["validFrom"] > first["validFrom"] and again["validUntil"] > first["validUntil"]
    assert json.loads((status_dir / f"{service.key_id}.json").read_text()) == again


def test_a_revocation_made_while_the_key_is_damaged_fails_and_is_published_later(
    service: QuizService, data_dir: Path, status_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    certificate = issue(service, "Grace Hopper", "en")
    credential = badge_for(service, certificate.id).document
    key = (data_dir / KEY_FILE).read_bytes()
    (data_dir / KEY_FILE).write_text("-----BEGIN PRIVATE KEY-----\ngarbled\n")
    capsys.readouterr()
    assert main(["revoke", certificate.id, "--reason", "issued by mistake"]) == 2
    error = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(error) == 1 and certificate.id in error[0] and "damaged" in error[0], error
    assert "Traceback" not in error[0]
    # The revocation is recorded (the verify page says so) ...
    assert open_service(create_key=False, strict=False).verify(
        certificate.id).status is Status.REVOKED
    result, = independent_verify([credential], published_lists(status_dir, [credential]))
    assert result["revoked"] is False  # ... but the list outside verifiers read lacks it
    publisher_round()  # a server (re)started while the key is still damaged: still waits
    result, = independent_verify([credential], published_lists(status_dir, [credential]))
    assert result["revoked"] is False
    (data_dir / KEY_FILE).write_bytes(key)  # the operator restores the key file
    publisher_round()  # the server's next round (or its start) signs the list again
    result, = independent_verify([credential], published_lists(status_dir, [credential]))
    assert result["verified"] and result["statusChecked"] and result["revoked"] is True


def test_the_commands_refuse_without_a_public_address(
    service: QuizService, status_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    certificate = issue(service, "Grace Hopper", "en")
    monkeypatch.delenv("APP_BASE_URL")
    capsys.readouterr()
    assert main(["credential", certificate.id]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "APP_BASE_URL is not set" in err
    backup, folder = tmp_path / "backup.jsonl", tmp_path / "badges"
    assert main(["export", str(backup), "--open-badges", str(folder)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "APP_BASE_URL is not set" in err
    assert not backup.exists() and not folder.exists()
    assert stored_list(service.data_dir, service.key_id) is None  # no default address pinned
    assert main(["credential", certificate.id, "--base-url", "localhost:8501"]) == 2
    assert "--base-url must be the app's public http(s) address" in capsys.readouterr().err
    assert main(["credential", certificate.id, "--base-url", "https://lab.example/"]) == 0
    credential = json.loads(capsys.readouterr().out)
    assert credential["id"].startswith("https://lab.example/verify?id=")
    assert stored_list(service.data_dir, service.key_id)["id"] == (
        f"https://lab.example/app/static/status/{service.key_id}.json")
    assert main(["export", str(backup), "--open-badges", str(folder), "--base-url",
                 "https://lab.example"]) == 0
    assert len(list(folder.glob("*.json"))) == 1


def test_the_did_key_is_printed_for_verifiers_to_pin(
    service: QuizService, app_test: Any, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DATA_DIR", str(service.data_dir))
    assert service.signer is not None
    did = did_of(service.signer.public_key)
    capsys.readouterr()
    assert main(["public-key"]) == 0
    assert f"Open Badges issuer: {did}" in capsys.readouterr().out
    certificate = issue(service, "Grace Hopper", "en")
    for query in ({"id": certificate.id}, {}):  # with a certificate and without
        at = app_test("pages/verify.py", query=query)
        assert any(did in caption.value for caption in at.caption), query
        assert not at.exception


def test_a_revocation_of_a_retired_keys_badge_fails_while_that_file_is_damaged(
    service: QuizService, data_dir: Path, status_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """After `new-key --replace` the old key's list is signed with its retired key file: a
    garbled retired file fails the revocation (exit 2, one line), and once the file is
    restored the publisher signs the old key's list with the bit set. Read from the stored
    list (no verifier needed: its signature is checked in the tests above)."""
    from quiz.status_list import decode, is_set

    old = issue(service, "Grace Hopper", "en")
    credential = badge_for(service, old.id).document
    old_key = service.key_id
    assert main(["new-key", "--replace"]) == 0
    retired = data_dir / f"signing_key.{old_key}.retired.pem"
    kept = retired.read_bytes()
    retired.write_text("-----BEGIN PRIVATE KEY-----\ngarbled\n")
    capsys.readouterr()
    assert main(["revoke", old.id, "--reason", "issued by mistake"]) == 2
    error = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(error) == 1 and old_key in error[0] and str(retired) in error[0], error
    position = int(credential["credentialStatus"]["statusListIndex"])

    def revoked_in_the_list() -> bool:
        listed = stored_list(data_dir, old_key)
        return is_set(decode(listed["credentialSubject"]["encodedList"]), position)

    assert not revoked_in_the_list()
    retired.write_bytes(kept)  # the operator restores the retired key file
    publisher_round()
    assert revoked_in_the_list()


def test_a_revocation_whose_list_has_no_key_fails_while_that_list_is_valid(
    service: QuizService, data_dir: Path, status_dir: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    """A key gone for good (its retired file deleted): its list can never be signed again,
    so a revocation fails the command (one line, exit 2) while that list still verifies,
    and is a warning (exit 0) once it has expired, when outside status checks of its
    credentials fail anyway."""
    first, second = issue(service, "Grace Hopper", "en"), issue(service, "Ada Lovelace", "en")
    badge_for(service, first.id)
    old_key = service.key_id
    assert main(["new-key", "--replace"]) == 0
    (data_dir / f"signing_key.{old_key}.retired.pem").unlink()  # gone for good
    capsys.readouterr()
    assert main(["revoke", first.id, "--reason", "issued by mistake"]) == 2
    error = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(error) == 1 and old_key in error[0] and "until the list expires" in error[0]
    assert stored_list(data_dir, old_key)["validUntil"][:10] in error[0]
    later = time.time() + 2 * 24 * 3600  # the list has expired
    monkeypatch.setattr(time, "time", lambda: later)
    assert main(["revoke", second.id, "--reason", "issued by mistake"]) == 0
    err = capsys.readouterr().err
    assert "error" not in err and f"warning: the status list of key {old_key}" in err
    assert "expired" in err


def test_a_list_the_earlier_code_signed_is_signed_again_at_the_start(
    service: QuizService, status_dir: Path,
) -> None:
    """The earlier code signed lists with no validUntil (valid forever) and on the address
    a browser reported: a server's first round signs such a list again, valid for a day,
    with its id on APP_BASE_URL."""
    from quiz.status_list import status_lists
    from storage.database import writing

    certificate = issue(service, "Grace Hopper", "en")
    badge_for(service, certificate.id)
    assert service.signer is not None
    foreign = f"{FOREIGN}/app/static/status/{service.key_id}.json"
    old = list_credential(service.signer.private_key, foreign, [], time.time())
    del old["validUntil"]
    with writing(service.data_dir) as connection:
        connection.execute(status_lists.update().where(
            status_lists.c.key_id == service.key_id).values(
            url=foreign, credential=json.dumps(old), updated_at=time.time()))
    publisher_round()
    again = stored_list(service.data_dir, service.key_id)
    assert again["id"] == f"https://lab.example/app/static/status/{service.key_id}.json"
    assert "validUntil" in again
    assert json.loads((status_dir / f"{service.key_id}.json").read_text()) == again
