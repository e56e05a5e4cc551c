"""The quiz and verify pages under AppTest: the whole flow, reloads, and bad input."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs

import pytest
from streamlit.testing.v1 import AppTest

from lessons.catalog import lesson
from quiz.attempts import Attempt
from quiz.service import QuizService, open_service

RunPage = Callable[..., AppTest]


def button(at: AppTest, label: str):  # noqa: ANN201
    matches = [b for b in at.button if b.label == label]
    assert matches, f"no button {label!r}; have {[b.label for b in at.button]}"
    return matches[0]


def progress(at: AppTest) -> str:
    return " ".join(bar.text for bar in at.get("progress"))


def layout(at: AppTest) -> list[str]:
    """The page's element kinds, with every alert box counted as one kind."""
    alerts = {"Success", "Error", "Warning", "Info"}
    return ["Alert" if type(e).__name__ in alerts else type(e).__name__ for e in at.main]


def current(at: AppTest) -> Attempt:
    return open_service().attempt(
        at.query_params["attempt"][0]
        if isinstance(at.query_params["attempt"], list)
        else at.query_params["attempt"]
    )


def answer(at: AppTest, right: bool) -> AppTest:
    """Answer the question on screen, then check it."""
    attempt = current(at)
    position = attempt.next_position
    assert position is not None
    drawn = attempt.questions[position]
    choice = (
        sorted(drawn.correct)
        if right
        else [next(i for i in range(len(drawn.order)) if i not in drawn.correct)]
    )
    if drawn.question.multiple:
        for i in choice:
            at.checkbox[i].check()
    else:
        at.radio[0].set_value(choice[0])
    return button(at, "Check answer").click().run()


def take_quiz(at: AppTest, wrong: int = 0) -> AppTest:
    at = button(at, "Start the quiz").click().run()
    total = len(current(at).questions)
    for index in range(total):
        at = answer(at, right=index >= wrong)
        assert not at.exception
        assert at.success or at.error  # the verdict shows at once
        label = "See my score" if index == total - 1 else "Next question"
        at = button(at, label).click().run()
    return at


def test_the_answer_key_is_not_on_the_page_before_answering(app_test: RunPage) -> None:
    at = app_test("pages/take_quiz.py")
    at = button(at, "Start the quiz").click().run()
    drawn = current(at).questions[0]
    page = str(at.main)  # everything rendered
    assert not at.success and not at.error
    for explanation in drawn.question.explanations:
        assert explanation not in page
    assert "right answer" not in page


def test_quiz_to_a_pass_and_a_certificate(app_test: RunPage) -> None:
    at = take_quiz(app_test("pages/take_quiz.py"))
    assert not at.exception
    assert any("100%" in str(m.value) for m in at.metric)
    at.text_input[0].input("<script>alert('x')</script> Nguyễn")
    at = button(at, "Check the name").click().run()
    assert not at.exception
    assert open_service().certificate_for(current(at).id) is None  # not issued yet
    at = button(at, "Issue my certificate").click().run()
    assert not at.exception
    markdown = " ".join(m.value for m in at.markdown)
    assert "\\<script\\>" in markdown  # shown as escaped text, never as HTML
    certificate = open_service().certificate_for(current(at).id)
    assert certificate is not None and certificate.name.startswith("<script>")
    assert certificate.id in [c.value for c in at.code]
    assert at.get("download_button") and at.get("image")
    # The verify button links inside the app, not to APP_BASE_URL (here another host,
    # as when the server runs on a port other than the configured one).
    verify = [link.proto for link in at.get("page_link") if link.proto.label ==
              "Open the verify link"]
    assert len(verify) == 1 and "lab.example" not in verify[0].page
    assert parse_qs(verify[0].query_string) == {"id": [certificate.id], "lang": ["en"]}
    # A double click, or a second tab, gets the same certificate.
    again = open_service().issue(current(at).id, "Someone else", True)
    assert again == certificate


def test_a_bad_name_gets_a_clear_message(app_test: RunPage) -> None:
    at = take_quiz(app_test("pages/take_quiz.py"))
    for name, reason in [
        ("   ", "Please type the name"),
        ("a\u202eb", "text-direction"),
        ("Ann 🦄", "cannot draw"),
        ("\u200b\ufeff\u2800", "no visible letter"),
    ]:
        at.text_input[0].input(name)
        at = button(at, "Check the name").click().run()
        assert any(reason in e.value for e in at.error), name
    assert open_service().certificate_for(current(at).id) is None


def test_a_fail_shows_the_score_and_a_retry_draws_anew(app_test: RunPage) -> None:
    at = take_quiz(app_test("pages/take_quiz.py"), wrong=5)  # 15 of 20
    assert any("75%" in str(m.value) for m in at.metric)
    assert any("Not passed" in e.value for e in at.error)
    assert not [t for t in at.text_input]  # no certificate form
    first = current(at).id
    at = button(at, "Try again with new questions").click().run()
    assert current(at).id != first and current(at).next_position == 0


def test_the_cooldown_holds_a_retry(app_test: RunPage, monkeypatch) -> None:  # noqa: ANN001
    at = app_test("pages/take_quiz.py")
    monkeypatch.setenv("QUIZ_COOLDOWN_SECONDS", "600")
    at = take_quiz(at, wrong=12)
    assert any("try again with a new set of questions in" in i.value for i in at.info)
    first = current(at).id
    at = button(at, "Try again with new questions").click().run()
    assert current(at).id == first
    assert any("a new attempt can start in" in w.value for w in at.warning)


def test_a_reload_resumes_the_attempt(app_test: RunPage) -> None:
    at = app_test("pages/take_quiz.py")
    at = button(at, "Start the quiz").click().run()
    at = answer(at, right=True)
    at = button(at, "Next question").click().run()
    attempt_id = current(at).id
    reloaded = app_test("pages/take_quiz.py", query={"attempt": attempt_id})  # a fresh session
    assert progress(reloaded) == "Question 2 of 20"
    assert current(reloaded).id == attempt_id


def test_an_expired_attempt_says_so(app_test: RunPage) -> None:
    for junk in ["expired-or-made-up-attempt", "x" * 10_000, "1' OR '1'='1"]:
        at = app_test("pages/take_quiz.py", query={"attempt": junk})
        assert not at.exception
        assert any("expired" in w.value for w in at.warning)
        assert button(at, "Start the quiz")


def test_score_in_the_url_changes_nothing(app_test: RunPage) -> None:
    at = app_test("pages/take_quiz.py", query={"score": "100", "passed": "1"})
    assert not at.metric and not at.text_input
    at = button(at, "Start the quiz").click().run()
    reloaded = app_test("pages/take_quiz.py", query={"attempt": current(at).id, "score": "100"})
    assert progress(reloaded) == "Question 1 of 20"
    assert not reloaded.metric and not reloaded.text_input


def test_a_changed_answer_after_feedback_is_ignored(app_test: RunPage) -> None:
    at = app_test("pages/take_quiz.py")
    at = button(at, "Start the quiz").click().run()
    attempt = current(at)
    at = answer(at, right=False)
    assert at.error  # "Not quite."
    links = [link.proto.label for link in at.get("page_link")]
    assert links == [f"Read the lesson: {lesson(attempt.questions[0].question.topic).title}"]
    service: QuizService = open_service()
    drawn = attempt.questions[0]
    replay = service.answer(attempt.id, 0, sorted(drawn.correct))  # e.g. from a second tab
    assert not replay.is_correct
    assert not at.radio  # the locked question shows no input any more


def _issue(passed: bool = True) -> str:
    service = open_service()
    attempt = service.start_attempt()
    for position, drawn in enumerate(attempt.questions):
        service.answer(attempt.id, position, sorted(drawn.correct))
    return service.issue(attempt.id, "Jürgen Groß", show_score=False).id


def _status(at: AppTest) -> str:
    return " ".join(e.value for e in [*at.success, *at.error, *at.warning])


def test_verify_page_outcomes(app_test: RunPage) -> None:
    certificate_id = _issue()
    at = app_test("pages/verify.py", query={"id": certificate_id})
    assert "VALID" in _status(at) and "signature is checked" in _status(at)
    texts = [t.value for t in at.text]
    assert "Jürgen Groß" in texts and "not shown by the holder" in texts
    layout_valid = layout(at)

    from quiz.ids import new_id

    at = app_test("pages/verify.py", query={"id": new_id()})
    assert "NOT FOUND" in _status(at)
    assert layout(at) == layout_valid  # the same layout, found or not
    assert "Jürgen Groß" not in [t.value for t in at.text]

    typo = certificate_id[:-1] + ("0" if certificate_id[-1] != "0" else "1")
    at = app_test("pages/verify.py", query={"id": typo})
    assert "TYPO IN THE ID" in _status(at) and "Nothing was looked up" in _status(at)

    open_service().revoke(certificate_id, "issued in error")
    at = app_test("pages/verify.py", query={"id": certificate_id})
    assert "REVOKED" in _status(at) and "issued in error" in _status(at)


def test_verify_page_survives_junk(app_test: RunPage) -> None:
    for junk in ["x" * 10_000, "'; DROP TABLE certificates; --", "<script>alert(1)</script>"]:
        at = app_test("pages/verify.py", query={"id": junk})
        assert not at.exception
        assert "TYPO IN THE ID" in _status(at)
    at = app_test("pages/verify.py")
    at.text_input[0].input(" ".join(_issue().lower()))
    at = button(at, "Verify").click().run()
    assert "VALID" in _status(at)
    assert "BEGIN PUBLIC KEY" in " ".join(c.value for c in at.code)


def test_verify_page_reads_a_pasted_link(app_test: RunPage) -> None:
    """The verify link printed on the certificate, pasted whole into the box."""
    from quiz import config

    at = app_test("pages/verify.py")
    assert at.text_input[0].max_chars in (None, 0)  # a long paste is not dropped silently
    at.text_input[0].input(config.verify_url(_issue()))
    at = button(at, "Verify").click().run()
    assert "VALID" in _status(at), _status(at)


def test_a_broken_bank_is_named_and_verify_still_works(
    app_test: RunPage,
    tmp_path,
    monkeypatch,  # noqa: ANN001
) -> None:
    certificate_id = _issue()
    broken = tmp_path / "bank.yaml"
    broken.write_text("- id: lonely\n  topic: why-memory\n")
    monkeypatch.setenv("QUIZ_BANK_PATH", str(broken))
    at = app_test("pages/take_quiz.py")
    assert any("entry 1 (id 'lonely'): missing" in e.value for e in at.error)
    at = app_test("pages/verify.py", query={"id": certificate_id})
    assert "VALID" in _status(at)


def _param(at: AppTest, name: str) -> str:
    value = at.query_params[name]
    return value[0] if isinstance(value, list) else value


def test_the_verify_form_keeps_the_url_short(app_test: RunPage) -> None:
    """A megabyte typed into the form went into ?id=."""
    from quiz.ids import MAX_LINK_LENGTH

    at = app_test("pages/verify.py")
    at.text_input[0].input("x" * 1_000_000)
    at = button(at, "Verify").click().run()
    assert "TYPO IN THE ID" in _status(at)
    assert len(_param(at, "id")) <= MAX_LINK_LENGTH
    certificate_id = _issue()
    at = app_test("pages/verify.py")
    at.text_input[0].input(" ".join(certificate_id.lower()))
    at = button(at, "Verify").click().run()
    assert _param(at, "id") == certificate_id  # the canonical ID


def test_a_lost_signing_key_is_a_clear_notice_not_a_traceback(app_test: RunPage) -> None:
    import os
    from pathlib import Path

    certificate_id = _issue()
    (Path(os.environ["DATA_DIR"]) / "signing_key.pem").unlink()
    at = app_test("pages/take_quiz.py")
    assert not at.exception
    assert any("certificate storage needs the operator" in e.value for e in at.error)
    at = app_test("pages/verify.py", query={"id": certificate_id})  # public keys suffice
    assert "VALID" in _status(at)


@pytest.mark.parametrize("show_score", [False, True])
def test_the_number_of_attempts_is_shown_only_with_the_holders_consent(
        app_test: RunPage, show_score: bool) -> None:
    service = open_service()
    attempt = service.start_attempt(learner_id=f"learner-{show_score}")
    for position, drawn in enumerate(attempt.questions):
        service.answer(attempt.id, position, sorted(drawn.correct))
    certificate = service.issue(attempt.id, "Ada Lovelace", show_score=show_score)
    assert certificate.attempts  # recorded (and signed) either way
    at = app_test("pages/verify.py", query={"id": certificate.id})
    rows = dict(zip([m.value.strip("*") for m in at.markdown if m.value.startswith("**")],
                    [t.value for t in at.text], strict=False))
    if show_score:
        assert rows["Attempts"] == str(certificate.attempts)
    else:
        assert rows["Attempts"] == "not shown by the holder"
        assert rows["Score"] == "not shown by the holder"
