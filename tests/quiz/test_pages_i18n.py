"""The quiz and verify pages in English, German and Vietnamese under AppTest: no English
sentence of the catalog left on a German or Vietnamese page, a language switch in the middle
of an attempt keeps the attempt, its order and the learner's pick, grading never depends on
the language, and a certificate verifies on any language's verify page, worded in the
viewer's language."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from i18n import format_percent, gettext
from quiz.bank import localize, overlay
from quiz.certificate_records import long_date
from quiz.layout import Text as PdfText
from quiz.layout import certificate_layout
from quiz.markdown import escape_markdown
from quiz.names import NameProblem
from quiz.service import open_service
from tests.quiz.page_text import page_text
from tools.translations import untranslated_on_page
from ui.quiz_view import NAME_PROBLEMS

RunPage = Callable[..., AppTest]
LANGS = ("en", "de", "vi")


def click(at: AppTest, code: str, label: str) -> AppTest:
    """Click the button whose label is `label` in language `code`."""
    shown = gettext(code, label)
    matches = [b for b in at.button if b.label == shown]
    assert matches, f"no button {shown!r}; have {[b.label for b in at.button]}"
    return matches[0].click().run()


def attempt_id(at: AppTest) -> str:
    value = at.query_params["attempt"]
    return value[0] if isinstance(value, list) else value


def pick(at: AppTest, right: bool) -> list[int]:
    """Choose the right (or a wrong) answer of the question on screen, without checking it."""
    attempt = open_service().attempt(attempt_id(at))
    drawn = attempt.questions[attempt.next_position]
    choice = (sorted(drawn.correct) if right
              else [next(i for i in range(len(drawn.order)) if i not in drawn.correct)])
    if drawn.question.multiple:
        for i in choice:
            at.checkbox[i].check()
    else:
        at.radio[0].set_value(choice[0])
    return choice


def no_english(at: AppTest, code: str) -> None:
    assert not at.exception, at.exception
    if code != "en":
        assert untranslated_on_page(page_text(at), code) == []


def take(at: AppTest, code: str, wrong: int = 1) -> AppTest:
    """Start and answer every question (the first `wrong` ones wrongly), checking each page."""
    no_english(at, code)
    at = click(at, code, "Start the quiz")
    total = len(open_service().attempt(attempt_id(at)).questions)
    for index in range(total):
        no_english(at, code)
        pick(at, right=index >= wrong)
        at = click(at, code, "Check answer")
        no_english(at, code)  # the verdict, every option's explanation, the lesson link
        at = click(at, code, "See my score" if index == total - 1 else "Next question")
    return at


@pytest.mark.parametrize("code", LANGS)
def test_the_quiz_in_each_language_to_a_certificate(app_test: RunPage, code: str) -> None:
    at = take(app_test("pages/take_quiz.py", query={"lang": code}), code)
    no_english(at, code)
    assert gettext(code, "Passed: the pass mark is {mark:.0%}.", mark=0.8) in [
        s.value for s in at.success]
    at.text_input[0].input("   ")
    at = click(at, code, "Check the name")
    assert [e.value for e in at.error] == [gettext(code, NAME_PROBLEMS[NameProblem.EMPTY])]
    at.text_input[0].input("Nguyễn Thị Minh Khai")
    at = click(at, code, "Check the name")
    no_english(at, code)
    at = click(at, code, "Issue my certificate")
    no_english(at, code)
    certificate = open_service().certificate_for(attempt_id(at))
    assert certificate is not None and certificate.lang == code
    assert gettext(code, "Your certificate is ready.") in [s.value for s in at.success]


def test_the_questions_are_the_overlays_words(app_test: RunPage) -> None:
    at = app_test("pages/take_quiz.py", query={"lang": "de"})
    at = click(at, "de", "Start the quiz")
    drawn = open_service().attempt(attempt_id(at)).questions[0]
    german = localize(drawn.question, "de")
    assert german.prompt == overlay("de")[drawn.question.id].prompt != drawn.question.prompt
    assert at.subheader[0].value == german.prompt


def test_switching_language_mid_attempt_keeps_the_attempt_and_the_pick(
    app_test: RunPage,
) -> None:
    at = app_test("pages/take_quiz.py", query={"lang": "de"})
    at = click(at, "de", "Start the quiz")
    first = attempt_id(at)
    pick(at, right=True)
    at = click(at, "de", "Check answer")
    at = click(at, "de", "Next question")
    chosen = pick(at, right=True)  # picked, not checked yet
    widgets = [w.id for w in [*at.radio, *at.checkbox]]
    at.query_params["lang"] = "vi"  # the picker (or the URL) switches
    at.run()
    # The inputs keep their identity while their words change, so the browser keeps a
    # pick not yet checked (AppTest drops unsubmitted form values: the browser test sees it).
    assert [w.id for w in [*at.radio, *at.checkbox]] == widgets
    assert not at.exception
    assert attempt_id(at) == first
    attempt = open_service().attempt(first)
    drawn = attempt.questions[1]
    vietnamese = localize(drawn.question, "vi")
    assert [bar.text for bar in at.get("progress")] == [
        gettext("vi", "Question {number} of {total}", number=2, total=len(attempt.questions))]
    assert at.subheader[0].value == vietnamese.prompt
    shown = [escape_markdown(vietnamese.options[i]) for i in drawn.order]  # same shuffle
    if drawn.question.multiple:
        assert [box.label for box in at.checkbox] == shown
    else:
        assert at.radio[0].options == shown
    no_english(at, "vi")
    assert pick(at, right=True) == chosen
    at = click(at, "vi", "Check answer")
    assert gettext("vi", "Correct.") in [s.value for s in at.success]
    at.query_params["lang"] = "en"  # and back, on the feedback
    at.run()
    assert "Correct." in [s.value for s in at.success]
    assert open_service().attempt(first).answers == {0: attempt.answers[0], 1: frozenset(chosen)}


def test_grading_is_the_same_in_every_language(service) -> None:  # noqa: ANN001
    attempt = service.start_attempt()
    for position, drawn in enumerate(attempt.questions):  # every third one wrong
        right = position % 3 != 0
        chosen = (sorted(drawn.correct) if right
                  else [next(i for i in range(len(drawn.order)) if i not in drawn.correct)])
        service.answer(attempt.id, position, chosen)
    english = service.attempt(attempt.id)
    for code in LANGS:
        worded = service.attempt(attempt.id, code)
        assert worded.score == english.score and worded.answers == english.answers
        for position, (ours, theirs) in enumerate(zip(worded.questions, english.questions,
                                                      strict=True)):
            assert (ours.question.id, ours.order, ours.correct) == (
                theirs.question.id, theirs.order, theirs.correct)
            feedback = worded.feedback(position)
            assert feedback is not None and feedback.is_correct == (position % 3 != 0)
            if code != "en":  # option i of the page is option order[i] of the overlay
                texts = overlay(code)[ours.question.id]
                assert ours.options == tuple(texts.options[i] for i in ours.order)
                assert feedback.explanations == tuple(texts.explanations[i] for i in ours.order)


def _issue(lang: str) -> str:
    service = open_service()
    attempt = service.start_attempt()
    for position, drawn in enumerate(attempt.questions):
        service.answer(attempt.id, position, sorted(drawn.correct))
    return service.issue(attempt.id, "Jürgen Müller-Lüdenscheid", True, lang=lang).id


def _status(at: AppTest) -> str:
    return " ".join(e.value for e in [*at.success, *at.error, *at.warning])


def test_a_vietnamese_certificate_verifies_on_every_verify_page(app_test: RunPage) -> None:
    certificate_id = _issue("vi")
    certificate = open_service().certificates.get(certificate_id)
    assert certificate is not None and certificate.lang == "vi"
    assert b"vi" not in certificate.payload.replace(certificate_id.encode(), b"")  # unsigned
    pdf_texts = [i.text for i in certificate_layout(certificate) if isinstance(i, PdfText)]
    assert gettext("vi", "CERTIFICATE OF COMPLETION") in pdf_texts
    assert gettext("vi", "Date: {date}", date=long_date(certificate.date, "vi")) in pdf_texts
    for code in LANGS:
        at = app_test("pages/verify.py", query={"id": certificate_id, "lang": code})
        no_english(at, code)
        assert gettext(code, "**VALID**: issued by {course}; the Ed25519 signature is checked "
                             "and correct.", course=certificate.course) in _status(at)
        rows = [t.value for t in at.text]
        assert long_date(certificate.date, code) in rows  # the viewer's language
        assert "Jürgen Müller-Lüdenscheid" in rows
        assert format_percent(1.0, code) in rows  # 100 % in German
    english = page_text(app_test("pages/verify.py", query={"id": certificate_id, "lang": "en"}))
    assert "tháng" not in english and "HỢP LỆ" not in english


@pytest.mark.parametrize("code", ["de", "vi"])
def test_every_verify_outcome_is_worded(app_test: RunPage, code: str) -> None:
    from quiz.ids import new_id

    certificate_id = _issue("en")
    typo = certificate_id[:-1] + ("0" if certificate_id[-1] != "0" else "1")
    open_service().revoke(certificate_id, "issued in error")
    for target, status in [(new_id(), "**NOT FOUND**"), (typo, "**TYPO IN THE ID**"),
                           ("x" * 5000, "**TYPO IN THE ID**"), (certificate_id, "**REVOKED**")]:
        at = app_test("pages/verify.py", query={"id": target, "lang": code})
        no_english(at, code)
        worded = _status(at)
        assert status not in worded and worded.startswith("**"), worded
    assert "issued in error" in worded  # the operator's reason stays as typed


def test_every_message_of_the_quiz_pages_is_in_the_catalog() -> None:
    """pybabel does not see a t("...") written inside an f-string's braces; such a word
    (the feedback's "wrong") stayed English on every page. Every literal the quiz and verify
    views pass to t/tn/pt must be in the template."""
    import ast
    from pathlib import Path

    from i18n.catalog import TEMPLATE
    from tools.translations import read_catalog

    known = {m.id[0] if isinstance(m.id, tuple) else m.id for m in read_catalog(TEMPLATE)}
    root = Path(__file__).resolve().parents[2]
    used: set[str] = set()
    for name in ("ui/quiz_view.py", "ui/verify_view.py", "quiz/layout.py"):
        for node in ast.walk(ast.parse((root / name).read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("t", "tn", "N_", "gettext", "pt")):
                literal = [a.value for a in node.args
                           if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                if literal:
                    used.add(literal[-1] if node.func.id in ("pt", "gettext") else literal[0])
    assert len(used) > 60
    assert sorted(used - known) == []
