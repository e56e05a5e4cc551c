"""The quiz in a real browser, in English, German and Vietnamese: take it to a pass (switching
language in the middle with an answer picked), download the PDF in that language, verify the
certificate on another language's verify page, try a tampered ID and an unknown one; the
Open Badge downloaded beside the PDF and checked, with the status list the server serves, by
an independent verifier; and the quiz at phone size (screenshots kept in tests/artifacts/)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Page, expect

from i18n import gettext, language
from lessons.catalog import lesson
from quiz.attempts import Attempt
from quiz.bank import localize
from quiz.certificate_records import long_date
from quiz.ids import new_id
from quiz.service import QuizService, open_service
from tests.browser.layout import overlap
from tests.helpers import ARTIFACTS, goto, screenshot, wait_for_app
from tests.helpers import pick_language as choose_language
from tests.quiz.open_badge_check import independent_verify
from tests.quiz.pdf_text import embedded_characters
from tools.translations import untranslated_on_page


@pytest.fixture
def server_side(app_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> QuizService:
    """The app's own stores (same DATA_DIR): the test, not the browser, knows the answers."""
    monkeypatch.setenv("DATA_DIR", str(app_data_dir))
    monkeypatch.delenv("CERT_SIGNING_KEY", raising=False)
    return open_service()


def attempt_on_screen(page: Page, service: QuizService) -> Attempt:
    """The attempt the page shows, once its address names it (the page writes the
    attempt's ID into the address as it draws the first question, which on a busy machine
    can come after the click's run has been seen to finish)."""
    page.wait_for_function("() => new URL(location.href).searchParams.has('attempt')")
    attempt_id = parse_qs(urlparse(page.url).query)["attempt"][0]
    return service.attempt(attempt_id)


QUESTION = ".st-key-quiz-question"  # the question's options and its Check button
# The language each run takes the quiz in, the name it prints, and the language of the
# verify page that checks the certificate afterwards (always another one).
RUNS = [("en", "Nguyễn Thị Minh Khai", "vi"), ("de", "Jürgen Müller-Lüdenscheid", "vi"),
        ("vi", "Nguyễn Thị Minh Khai", "en")]


def pick_language(page: Page, code: str) -> None:
    """Switch with the sidebar's picker, as a learner does."""
    choose_language(page, language(code).native_name)
    page.wait_for_function(
        f"() => new URL(location.href).searchParams.get('lang') === '{code}'")


def option_labels(page: Page, multiple: bool):  # noqa: ANN201
    form = page.locator(QUESTION)
    if multiple:
        return form.locator('[data-testid="stCheckbox"] label')
    return form.locator('[data-testid="stRadio"] [role="radiogroup"] label')


def pick_right(page: Page, service: QuizService, code: str = "en") -> tuple[Attempt, int]:
    """Click the right option(s) of the question on screen (not checked yet), once the page
    shows that question (after a reload it may still be drawing), each pick confirmed
    checked before the next; then exactly the right ones are checked."""
    attempt = attempt_on_screen(page, service)
    position = attempt.next_position
    assert position is not None
    drawn = attempt.questions[position]
    expect(page.get_by_text(gettext(code, "Question {number} of {total}", number=position + 1,
                                    total=len(attempt.questions)))).to_be_visible()
    wait_for_app(page)
    inputs = page.locator(f"{QUESTION} input")
    for index in sorted(drawn.correct):
        option_labels(page, drawn.question.multiple).nth(index).check()
        wait_for_app(page)  # each pick reruns the page (it is kept on the server)
        expect(inputs.nth(index)).to_be_checked()
    for index in range(len(drawn.order)):
        assert inputs.nth(index).is_checked() == (index in drawn.correct), index
    return attempt, position


def answer_correctly(page: Page, service: QuizService, code: str = "en") -> None:
    pick_right(page, service, code)
    page.get_by_role("button", name=gettext(code, "Check answer")).click()
    wait_for_app(page)
    expect(page.get_by_text(gettext(code, "Correct."), exact=True)).to_be_visible()


def shown_text(markdown: str) -> str:
    """A prompt as the page shows it: its inline code and emphasis drawn, not their marks."""
    return re.sub(r"[`*]", "", markdown)


def switch_keeps_the_pick(page: Page, service: QuizService, code: str, other: str) -> None:
    """A pick not yet checked survives a language switch there and back; the question
    keeps its place and its option order."""
    attempt, position = pick_right(page, service, code)
    drawn = attempt.questions[position]
    pick_language(page, other)
    assert attempt_on_screen(page, service).id == attempt.id
    expect(page.get_by_text(shown_text(localize(drawn.question, other).prompt))
           ).to_be_visible()
    inputs = page.locator(f"{QUESTION} input")
    for index in range(len(drawn.order)):
        assert inputs.nth(index).is_checked() == (index in drawn.correct), index
    screenshot(page, f"quiz-switched-{code}-to-{other}")
    pick_language(page, code)
    page.get_by_role("button", name=gettext(code, "Check answer")).click()
    wait_for_app(page)
    expect(page.get_by_text(gettext(code, "Correct."), exact=True)).to_be_visible()


@pytest.mark.parametrize(("code", "name", "verify_in"), RUNS, ids=[run[0] for run in RUNS])
def test_quiz_to_a_pass_then_verify(page: Page, app_url: str, server_side: QuizService,
                                    code: str, name: str, verify_in: str) -> None:
    """The quiz in one language to a certificate (every question clicked in English; in
    German and Vietnamese the first two and the last), its PDF in that language, and the
    certificate checked on another language's verify page."""
    goto(page, app_url, f"quiz?score=100&lang={code}")  # a score in the URL changes nothing
    page.get_by_role("button", name=gettext(code, "Start the quiz")).click()
    wait_for_app(page)
    attempt = attempt_on_screen(page, server_side)
    total = len(attempt.questions)
    for index in range(total):
        if code != "en" and 2 <= index < total - 1:
            # In German and Vietnamese the browser answers the first two questions (the
            # second across a language switch) and the last; the ones between, the same
            # clicks the English run makes on every question, are answered on the server.
            server_side.answer(attempt.id, index, sorted(attempt.questions[index].correct))
            if index == total - 2:
                goto(page, app_url, f"quiz?attempt={attempt.id}&lang={code}")
            continue
        if index == 1 and code != "en":
            switch_keeps_the_pick(page, server_side, code, "vi" if code == "de" else "de")
        else:
            answer_correctly(page, server_side, code)
        if index == 0:
            link = gettext(code, "Read the lesson: {title}", title="").strip()
            expect(page.get_by_text(link)).to_be_visible()
            screenshot(page, f"quiz-feedback-{code}")
        last = index == total - 1
        page.get_by_role("button", name=gettext(code, "See my score" if last
                                                else "Next question")).click()
        wait_for_app(page)

    expect(page.get_by_text(gettext(code, "Passed: the pass mark is {mark:.0%}.", mark=0.8))
           ).to_be_visible()
    page.get_by_role("textbox", name=gettext(code, "Name to print on the certificate")).fill(name)
    page.get_by_role("textbox", name=gettext(code, "Name to print on the certificate")
                     ).press("Enter")  # shows the name as printed; issues nothing yet
    wait_for_app(page)
    expect(page.get_by_text(gettext(code, "Name, exactly as it will be printed"))).to_be_visible()
    assert server_side.certificate_for(attempt_on_screen(page, server_side).id) is None
    page.get_by_role("button", name=gettext(code, "Issue my certificate")).click()
    wait_for_app(page)
    expect(page.get_by_text(gettext(code, "Your certificate is ready."))).to_be_visible()
    expect(page.locator('[data-testid="stImage"] img')).to_be_visible(timeout=30_000)
    wait_for_app(page)
    if code != "en":
        assert untranslated_on_page(page.inner_text("[data-testid='stMain']"), code) == []
    screenshot(page, f"quiz-passed-certificate-{code}")
    preview = page.locator('[data-testid="stImage"]').first
    preview.scroll_into_view_if_needed()
    preview.screenshot(path=str(ARTIFACTS / f"quiz-certificate-preview-{code}.png"))

    with page.expect_download() as download_info:
        page.get_by_role("button", name=gettext(code, "Download the PDF")).click()
    pdf_path = ARTIFACTS / f"certificate-{code}.pdf"
    download_info.value.save_as(pdf_path)
    pdf = pdf_path.read_bytes()
    assert pdf.startswith(b"%PDF-")
    certificate = server_side.certificate_for(attempt_on_screen(page, server_side).id)
    assert certificate is not None and certificate.name == name and certificate.lang == code
    heading = gettext(code, "CERTIFICATE OF COMPLETION")
    date = long_date(certificate.date, code)
    assert set((name + heading + date).replace(" ", "")) <= embedded_characters(pdf)
    check_open_badge(page, code, certificate.id, name)

    if code == "en":  # the link on the page, inside the app
        page.get_by_role("link", name="Open the verify link").click()
        expect(page).to_have_url(re.compile(r"/verify(\?|$)"), timeout=60_000)
        wait_for_app(page)
        expect(page.get_by_text("the Ed25519 signature is checked and correct")).to_be_visible()
        screenshot(page, "verify-valid")

    # The ID from the downloaded PDF's certificate, checked on another language's page.
    goto(page, app_url, f"verify?id={certificate.id}&lang={verify_in}")
    valid = gettext(verify_in, "**VALID**: issued by {course}; the Ed25519 signature is "
                               "checked and correct.", course=certificate.course)
    expect(page.get_by_text(valid.split("**")[1], exact=True)).to_be_visible()
    expect(page.get_by_text(name)).to_be_visible()
    expect(page.get_by_text(long_date(certificate.date, verify_in), exact=True)).to_be_visible()
    main = page.inner_text("[data-testid='stMain']")
    assert date not in main  # the issuing language's date is not the viewer's
    if verify_in != "en":
        assert untranslated_on_page(main, verify_in) == []
    screenshot(page, f"verify-{code}-certificate-on-{verify_in}-page")
    if code != "en":
        return

    compact = certificate.id.replace("-", "")
    swapped = next(i for i in range(len(compact) - 1) if compact[i] != compact[i + 1])
    tampered = compact[:swapped] + compact[swapped + 1] + compact[swapped] + compact[swapped + 2 :]
    goto(page, app_url, "verify?lang=en")
    field = page.get_by_role("textbox", name="Certificate ID")
    field.fill(tampered)
    page.get_by_role("button", name="Verify").click()
    wait_for_app(page)
    expect(page.get_by_text("TYPO IN THE ID")).to_be_visible()
    expect(page.get_by_text(name)).to_have_count(0)
    screenshot(page, "verify-typo")

    goto(page, app_url, f"verify?id={new_id()}&lang=en")
    expect(page.get_by_text("NOT FOUND")).to_be_visible()
    screenshot(page, "verify-not-found")


def check_open_badge(page: Page, code: str, certificate_id: str, name: str) -> None:
    """The Open Badge beside the PDF, checked by Digital Bazaar's verifier with the status
    list this server serves at the URL the credential names."""
    with page.expect_download() as download_info:
        page.get_by_role("button", name=gettext(code, "Download as Open Badge (JSON)")).click()
    path = ARTIFACTS / f"open-badge-{code}.json"
    download_info.value.save_as(path)
    credential = json.loads(path.read_text(encoding="utf-8"))
    assert credential["credentialSubject"]["name"] == name
    assert parse_qs(urlparse(credential["id"]).query)["id"] == [certificate_id]  # verify page
    url = credential["credentialStatus"]["statusListCredential"]
    with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 (the test's server)
        assert response.headers.get_content_type() == "application/json"
        status_list = json.loads(response.read())
    result, = independent_verify([credential], {url: status_list})
    assert result["verified"] and result["revoked"] is False and result["schemaValid"], result


CONTROLS = ("[data-testid='stMain'] :is(button, label, input, a, h1, h3, "
            "[data-testid='stProgress'], [data-testid='stAlert'])")


def assert_fits_a_phone(page: Page, name: str) -> None:
    """Nothing wider than the screen, and no two controls drawn over each other (a control
    inside another, such as a radio button's input in its label, is one control)."""
    screenshot(page, name)
    width = page.viewport_size["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    boxes = page.evaluate("""(selector) => {
        const all = [...document.querySelectorAll(selector)].filter(e => {
            const r = e.getBoundingClientRect();
            return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== "hidden";
        });
        return all.filter(e => !all.some(o => o !== e && o.contains(e)))
            .map(e => { const r = e.getBoundingClientRect();
                        return {x: r.x, y: r.y + scrollY, width: r.width, height: r.height,
                                text: e.innerText.slice(0, 40)}; });
    }""", CONTROLS)
    assert len(boxes) >= 3, boxes
    for box in boxes:
        assert box["x"] >= -1 and box["x"] + box["width"] <= width + 1, box
    # a link's label wraps: "Zur Lektion: Warum dem Training der Speicher ausgeht" was cut
    cut = page.evaluate("""() => [...document.querySelectorAll(
        '[data-testid="stPageLink-NavLink"] *')].filter(e => e.scrollWidth > e.clientWidth + 1)
        .map(e => e.textContent)""")
    assert not cut, cut
    for i, first in enumerate(boxes):
        for second in boxes[i + 1:]:
            assert not overlap(first, second, slack=0), (first, second)


def test_the_quiz_fits_a_phone(phone: Page, app_url: str, server_side: QuizService) -> None:
    """At 390×844 (a phone) the question, its options and buttons, the feedback and the
    certificate page stack without overlapping or running off the screen (German: the
    longest words); a lesson to revisit, the longest title, wraps rather than being cut."""
    goto(phone, app_url, "quiz?lang=de")
    phone.get_by_role("button", name=gettext("de", "Start the quiz")).click()
    wait_for_app(phone)
    assert_fits_a_phone(phone, "phone-quiz-question")
    answer_correctly(phone, server_side, "de")
    assert_fits_a_phone(phone, "phone-quiz-feedback")
    attempt = attempt_on_screen(phone, server_side)
    # one wrong answer (still a pass): the lesson with the longest German title to revisit
    later = range(1, len(attempt.questions))
    wrong = max(later, key=lambda p: len(lesson(attempt.questions[p].question.topic)
                                         .title_in("de")))
    for position in later:
        question = attempt.questions[position]
        chosen = sorted(question.correct) if position != wrong else [
            next(i for i in range(len(question.question.options)) if i not in question.correct)]
        server_side.answer(attempt.id, position, chosen)
    goto(phone, app_url, f"quiz?attempt={attempt.id}&lang=de")
    phone.get_by_role("textbox", name=gettext("de", "Name to print on the certificate")
                      ).fill("Jürgen Müller-Lüdenscheid")
    phone.get_by_role("button", name=gettext("de", "Check the name")).click()
    wait_for_app(phone)
    phone.get_by_role("button", name=gettext("de", "Issue my certificate")).click()
    wait_for_app(phone)
    expect(phone.get_by_text(gettext("de", "Your certificate is ready."))).to_be_visible()
    assert_fits_a_phone(phone, "phone-quiz-certificate")


def test_a_pasted_name_that_is_too_long_is_explained(page: Page, app_url: str,
                                                     server_side: QuizService) -> None:
    """A name far over the limit reaches the server and is refused with its length; with
    max_chars on the field the browser silently dropped the paste, and the learner was
    told to type a name into a field they had just filled."""
    attempt = server_side.start_attempt()
    for position, drawn in enumerate(attempt.questions):
        server_side.answer(attempt.id, position, sorted(drawn.correct))
    goto(page, app_url, f"quiz?attempt={attempt.id}")
    page.get_by_role("textbox", name="Name to print on the certificate").fill("x" * 10_000)
    page.get_by_role("button", name="Check the name").click()
    wait_for_app(page)
    expect(page.get_by_text("A name has at most 80 characters; this one has 10000.")
           ).to_be_visible()
    expect(page.get_by_text("Please type the name")).to_have_count(0)
    assert server_side.certificate_for(attempt.id) is None


def test_progress_and_the_open_attempt_survive_a_reload_and_a_new_tab(
    page: Page, app_url: str, server_side: QuizService
) -> None:
    """Once "Lessons visited 3/7" became 1/7 after a reload and 0/7 in a new tab. The
    learner id now lives in a cookie, the progress on the server."""
    from lessons.catalog import LESSON_PATHS

    visited = f"Lessons visited: 3 / {len(LESSON_PATHS)}"
    sidebar = page.locator('[data-testid="stSidebar"]')
    for path in LESSON_PATHS[:3]:
        goto(page, app_url, path)
        # The first page writes the cookie from a script in the page, once it has drawn.
        page.wait_for_function("document.cookie.includes('gcl_learner=')", timeout=60_000)
    expect(sidebar.get_by_text(visited)).to_be_visible()
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    assert "gcl_learner" in cookies
    page.reload(wait_until="domcontentloaded")
    wait_for_app(page)
    expect(sidebar.get_by_text(visited)).to_be_visible()
    # Read lessons are marked in the navigation.
    nav = page.locator('[data-testid="stSidebarNav"]')
    expect(nav.get_by_text("task_alt")).to_have_count(3)

    goto(page, app_url, "quiz")
    page.get_by_role("button", name="Start the quiz").click()
    wait_for_app(page)
    started = attempt_on_screen(page, server_side)

    second = page.context.new_page()  # a second tab of the same browser
    goto(second, app_url, "")
    expect(second.locator('[data-testid="stSidebar"]').get_by_text(visited)).to_be_visible()
    goto(second, app_url, "quiz")  # no ?attempt= in this link: the learner's open attempt
    expect(second.get_by_text(f"Question 1 of {len(started.questions)}")).to_be_visible()
    assert attempt_on_screen(second, server_side).id == started.id
    screenshot(second, "progress-second-tab")
    second.close()
