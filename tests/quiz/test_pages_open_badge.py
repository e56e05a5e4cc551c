"""The Open Badge download on the certificate and verify pages (AppTest): beside the PDF once
a certificate is issued, in the page's language; on the verify page for a valid certificate
only (a revoked or unknown one shows it disabled, so every outcome keeps one layout); a lost
signing key is one line, never a traceback."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from i18n import gettext
from quiz.service import open_service
from tests.quiz.test_pages import _issue, button

RunPage = Callable[..., AppTest]
LABEL = "Download as Open Badge (JSON)"


@pytest.fixture(autouse=True)
def public_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """Open Badges are signed only with the address the operator configured."""
    monkeypatch.setenv("APP_BASE_URL", "https://lab.example")


def badge_buttons(at: AppTest, label: str = LABEL) -> list:
    return [b for b in at.get("download_button") if b.proto.label == label]


def test_the_certificate_page_offers_the_badge_beside_the_pdf(app_test: RunPage) -> None:
    service = open_service()
    attempt = service.start_attempt()
    for position, drawn in enumerate(attempt.questions):
        service.answer(attempt.id, position, sorted(drawn.correct))
    at = app_test("pages/take_quiz.py", query={"attempt": attempt.id, "lang": "de"})
    at.text_input[0].input("王小明")
    at = button(at, gettext("de", "Check the name")).click().run()
    at = button(at, gettext("de", "Issue my certificate")).click().run()
    assert not at.exception
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == [gettext("de", "Download the PDF"),
                      "Als Open Badge herunterladen (JSON)"]
    badge, = badge_buttons(at, gettext("de", LABEL))
    assert not badge.proto.disabled
    certificate = service.certificate_for(attempt.id)
    assert certificate is not None
    assert badge.proto.url  # the credential's bytes are served to the browser
    service.revoke(certificate.id, "issued in error")  # a revoked one gets none
    at = app_test("pages/take_quiz.py", query={"attempt": attempt.id, "lang": "de"})
    badge, = badge_buttons(at, gettext("de", LABEL))
    assert badge.proto.disabled and not at.exception


def test_the_verify_page_offers_it_for_a_valid_certificate_only(app_test: RunPage) -> None:
    certificate_id = _issue()
    at = app_test("pages/verify.py", query={"id": certificate_id, "lang": "vi"})
    badge, = badge_buttons(at, gettext("vi", LABEL))
    assert not badge.proto.disabled and not at.exception
    open_service().revoke(certificate_id, "issued in error")
    at = app_test("pages/verify.py", query={"id": certificate_id})
    badge, = badge_buttons(at)
    assert badge.proto.disabled and "Only a valid certificate" in badge.proto.help
    at = app_test("pages/verify.py", query={"id": "00000-00000-00000-00000-0"})
    badge, = badge_buttons(at)
    assert badge.proto.disabled


def test_a_lost_key_is_one_line_and_the_certificate_still_verifies(app_test: RunPage) -> None:
    certificate_id = _issue()
    (Path(os.environ["DATA_DIR"]) / "signing_key.pem").unlink()
    at = app_test("pages/verify.py", query={"id": certificate_id, "lang": "de"})
    assert not at.exception and badge_buttons(at, gettext("de", LABEL)) == []
    assert any(c.value == gettext("de", "The Open Badge cannot be made right now (the server "
                                  "has logged why); the certificate itself is not affected.")
               for c in at.caption)
    assert any("GÜLTIG" in s.value for s in at.success)
