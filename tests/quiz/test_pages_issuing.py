"""The certificate step of the quiz page: the name is confirmed as printed before anything
is issued, the PDF and the verify page agree on the score, the verify link follows the
address the app runs on, and storage faults or forged answers are clear messages."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Radio

from quiz.certificate_records import Certificate
from quiz.config import base_url, verify_url
from quiz.layout import Text, certificate_layout
from quiz.service import open_service
from storage import database as db_module
from storage.database import db_path, dispose_all
from tests.quiz.test_pages import button, current

RunPage = Callable[..., AppTest]


def passed_page(app_test: RunPage) -> AppTest:
    """The quiz page after a pass, showing the name form."""
    attempt = open_service().start_attempt()
    for position, drawn in enumerate(attempt.questions):
        open_service().answer(attempt.id, position, sorted(drawn.correct))
    return app_test("pages/take_quiz.py", query={"attempt": attempt.id})


def test_enter_in_the_name_field_only_shows_the_name_as_printed(app_test: RunPage) -> None:
    at = passed_page(app_test)
    at.text_input[0].input("  Ada\u200b   Lovelace ")
    at = button(at, "Check the name").click().run()  # what Enter does in the form
    assert open_service().certificate_for(current(at).id) is None
    assert "#### Ada Lovelace" in [m.value for m in at.markdown]  # normalised, as printed
    choice = [c for c in at.checkbox if "Show my score" in c.label]
    assert len(choice) == 1 and not choice[0].value
    assert any("neither on the certificate nor on the verify page" in c.value
               for c in at.caption)
    choice[0].check()
    at = at.run()
    assert any("will be printed on the certificate" in c.value for c in at.caption)
    at = button(at, "Change the name").click().run()
    assert at.text_input and open_service().certificate_for(current(at).id) is None
    at.text_input[0].input("Ada Lovelace")
    at = button(at, "Check the name").click().run()
    at = button(at, "Issue my certificate").click().run()
    certificate = open_service().certificate_for(current(at).id)
    assert certificate is not None and certificate.name == "Ada Lovelace"
    assert certificate.show_score


def _texts(certificate: Certificate) -> list[str]:
    return [item.text for item in certificate_layout(certificate) if isinstance(item, Text)]


@pytest.mark.parametrize("show", [True, False])
def test_the_pdf_and_the_verify_page_agree_on_the_score(app_test: RunPage, show: bool) -> None:
    service = open_service()
    attempt = service.start_attempt()
    for position, drawn in enumerate(attempt.questions):
        service.answer(attempt.id, position, sorted(drawn.correct))
    certificate = service.issue(attempt.id, "Grace Hopper", show)
    on_pdf = "Score: 100%" in _texts(certificate)
    at = app_test("pages/verify.py", query={"id": certificate.id})
    on_page = "100%" in [text.value for text in at.text]
    assert on_pdf == on_page == show
    assert ("Score: not shown by the holder" in _texts(certificate)) is not show


def test_without_app_base_url_the_link_uses_the_address_the_app_runs_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ui.quiz_view import reached_base

    monkeypatch.delenv("APP_BASE_URL", raising=False)
    assert reached_base("http://192.0.2.7:8611/quiz", "", 8611) == "http://192.0.2.7:8611"
    assert reached_base("https://lab.example/course/quiz", "course", 443) == \
        "https://lab.example/course"
    assert reached_base(None, "", 8611) == "http://localhost:8611"  # at least the port
    assert verify_url("ABC", reached_base(None, "", 8611)).startswith(
        "http://localhost:8611/verify?id=")
    monkeypatch.setenv("APP_BASE_URL", "https://certs.example/")
    assert base_url("http://192.0.2.7:8611") == "https://certs.example"


def test_a_long_lock_asks_to_try_again_and_the_certificate_follows(
    app_test: RunPage, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = passed_page(app_test)
    at.text_input[0].input("Grace Hopper")
    at = button(at, "Check the name").click().run()
    monkeypatch.setattr(db_module, "BUSY_TIMEOUT_S", 0.2)
    dispose_all()
    holder = sqlite3.connect(db_path(open_service().data_dir), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        at = button(at, "Issue my certificate").click().run()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert not at.exception
    assert any("try again in a moment" in w.value for w in at.warning)
    at = button(at, "Issue my certificate").click().run()  # the choice is still there
    assert any("Your certificate is ready." in s.value for s in at.success)


def test_a_deleted_database_is_a_clear_notice_on_the_page(app_test: RunPage,
                                                          caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    at = passed_page(app_test)
    for path in db_path(open_service().data_dir).parent.glob("quiz.sqlite3*"):
        path.unlink()
    with caplog.at_level(logging.ERROR):
        at = at.run()
    assert not at.exception
    assert any("needs the operator's attention" in e.value for e in at.error)
    assert any("is missing" in record.getMessage() for record in caplog.records)


def _forge(monkeypatch: pytest.MonkeyPatch, radio: Radio, value: str) -> None:
    """Send `value` for this radio, as a hand-made browser message could."""
    original = Radio._widget_state

    def forged(self: Radio) -> WidgetState:
        if self.id != radio.id:
            return original.fget(self)  # type: ignore[attr-defined]
        state = WidgetState()
        state.id = self.id
        state.string_value = value
        return state

    monkeypatch.setattr(Radio, "_widget_state", property(forged))


def test_a_forged_answer_is_refused_cleanly(app_test: RunPage, monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    at = app_test("pages/take_quiz.py")
    at = button(at, "Start the quiz").click().run()
    attempt = current(at)
    for position, drawn in enumerate(attempt.questions):  # on to a one-answer question
        if not drawn.question.multiple:
            break
        open_service().answer(attempt.id, position, sorted(drawn.correct))
    at = at.run()
    single = list(at.radio)
    assert single, "every question drawn has several answers"
    _forge(monkeypatch, single[0], "7; DROP TABLE answers")
    with caplog.at_level(logging.INFO):
        at = button(at, "Check answer").click().run()
    assert not at.exception
    assert any("not one of the options" in w.value for w in at.warning)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert position not in current(at).answers  # nothing locked


def test_a_garbled_key_stops_the_quiz_page_but_not_the_verify_page(app_test: RunPage) -> None:
    service = open_service()
    attempt = service.start_attempt()
    for position, drawn in enumerate(attempt.questions):
        service.answer(attempt.id, position, sorted(drawn.correct))
    certificate = service.issue(attempt.id, "Ada Lovelace", True)
    (service.data_dir / "signing_key.pem").write_text("not a key at all\n")
    at = app_test("pages/take_quiz.py")  # nothing new can be issued
    assert not at.exception
    assert any("needs the operator's attention" in e.value for e in at.error)
    at = app_test("pages/take_quiz.py", query={"attempt": attempt.id})
    assert not at.exception and not at.error  # the certificate already issued is shown
    assert certificate.id in [code.value for code in at.code]
    at = app_test("pages/verify.py", query={"id": certificate.id})
    assert not at.exception
    assert any("VALID" in s.value for s in at.success)
