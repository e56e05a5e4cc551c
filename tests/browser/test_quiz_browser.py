"""The quiz in a real browser: take it to a pass, download the PDF, open the verify link and
see VALID, then try a tampered ID and an unknown one (screenshots kept in tests/artifacts/)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Page, expect

from quiz.attempts import Attempt
from quiz.ids import new_id
from quiz.service import QuizService, open_service
from tests.helpers import ARTIFACTS, goto, screenshot, wait_for_app


@pytest.fixture
def server_side(app_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> QuizService:
    """The app's own stores (same DATA_DIR): the test, not the browser, knows the answers."""
    monkeypatch.setenv("DATA_DIR", str(app_data_dir))
    monkeypatch.delenv("CERT_SIGNING_KEY", raising=False)
    return open_service()


def attempt_on_screen(page: Page, service: QuizService) -> Attempt:
    attempt_id = parse_qs(urlparse(page.url).query)["attempt"][0]
    return service.attempt(attempt_id)


def answer_correctly(page: Page, service: QuizService) -> None:
    attempt = attempt_on_screen(page, service)
    position = attempt.next_position
    assert position is not None
    drawn = attempt.questions[position]
    expect(page.get_by_text(f"Question {position + 1} of {len(attempt.questions)}")).to_be_visible()
    form = page.locator('[data-testid="stForm"]')
    for index in sorted(drawn.correct):
        if drawn.question.multiple:
            form.locator('[data-testid="stCheckbox"]').nth(index).locator("label").click()
        else:
            form.locator('[data-testid="stRadio"] [role="radiogroup"] label').nth(index).click()
    page.get_by_role("button", name="Check answer").click()
    wait_for_app(page)
    expect(page.get_by_text("Correct.")).to_be_visible()


def test_quiz_to_a_pass_then_verify(page: Page, app_url: str, server_side: QuizService) -> None:
    goto(page, app_url, "quiz?score=100")  # a score in the URL changes nothing
    page.get_by_role("button", name="Start the quiz").click()
    wait_for_app(page)
    total = len(attempt_on_screen(page, server_side).questions)
    for index in range(total):
        answer_correctly(page, server_side)
        if index == 0:
            expect(page.get_by_text("Read the lesson:")).to_be_visible()
            screenshot(page, "quiz-feedback")
        last = index == total - 1
        page.get_by_role("button", name="See my score" if last else "Next question").click()
        wait_for_app(page)

    expect(page.get_by_text("Passed: the pass mark is 80%.")).to_be_visible()
    page.get_by_role("textbox", name="Name to print on the certificate").fill(
        "Nguyễn Thị Minh Khai"
    )
    page.get_by_role("button", name="Issue my certificate").click()
    wait_for_app(page)
    expect(page.get_by_text("Your certificate is ready.")).to_be_visible()
    expect(page.locator('[data-testid="stImage"] img')).to_be_visible()
    screenshot(page, "quiz-passed-certificate")
    preview = page.locator('[data-testid="stImage"]').first
    preview.scroll_into_view_if_needed()
    preview.screenshot(path=str(ARTIFACTS / "quiz-certificate-preview.png"))

    with page.expect_download() as download_info:
        page.get_by_role("button", name="Download the PDF").click()
    pdf_path = ARTIFACTS / "certificate.pdf"
    download_info.value.save_as(pdf_path)
    assert pdf_path.read_bytes().startswith(b"%PDF-")

    certificate = server_side.certificate_for(attempt_on_screen(page, server_side).id)
    assert certificate is not None and certificate.name == "Nguyễn Thị Minh Khai"
    page.get_by_role("link", name="Open the verify link").click()
    wait_for_app(page)
    assert urlparse(page.url).path == "/verify"
    expect(page.get_by_text("VALID", exact=False).first).to_be_visible()
    expect(page.get_by_text("the Ed25519 signature is checked and correct")).to_be_visible()
    expect(page.get_by_text("Nguyễn Thị Minh Khai")).to_be_visible()
    screenshot(page, "verify-valid")

    compact = certificate.id.replace("-", "")
    swapped = next(i for i in range(len(compact) - 1) if compact[i] != compact[i + 1])
    tampered = compact[:swapped] + compact[swapped + 1] + compact[swapped] + compact[swapped + 2 :]
    field = page.get_by_role("textbox", name="Certificate ID")
    field.fill(tampered)
    page.get_by_role("button", name="Verify").click()
    wait_for_app(page)
    expect(page.get_by_text("TYPO IN THE ID")).to_be_visible()
    expect(page.get_by_text("Nguyễn Thị Minh Khai")).to_have_count(0)
    screenshot(page, "verify-typo")

    goto(page, app_url, f"verify?id={new_id()}")
    expect(page.get_by_text("NOT FOUND")).to_be_visible()
    screenshot(page, "verify-not-found")


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
    page.get_by_role("button", name="Issue my certificate").click()
    wait_for_app(page)
    expect(page.get_by_text("A name has at most 80 characters; this one has 10000.")
           ).to_be_visible()
    expect(page.get_by_text("Please type the name")).to_have_count(0)
    assert server_side.certificate_for(attempt.id) is None


def test_progress_and_the_open_attempt_survive_a_reload_and_a_new_tab(
    page: Page, app_url: str, server_side: QuizService
) -> None:
    """Issue 11: "Lessons visited 3/7" became 1/7 after a reload and 0/7 in a new tab. The
    learner id now lives in a cookie, the progress on the server."""
    from lessons.catalog import LESSON_PATHS

    sidebar = page.locator('[data-testid="stSidebar"]')
    for path in LESSON_PATHS[:3]:
        goto(page, app_url, path)
        # The first page writes the cookie from a script in the page, once it has drawn.
        page.wait_for_function("document.cookie.includes('gcl_learner=')", timeout=10_000)
    expect(sidebar.get_by_text("Lessons visited: 3 / 7")).to_be_visible()
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    assert "gcl_learner" in cookies
    page.reload(wait_until="domcontentloaded")
    wait_for_app(page)
    expect(sidebar.get_by_text("Lessons visited: 3 / 7")).to_be_visible()
    # Read lessons are marked in the navigation.
    nav = page.locator('[data-testid="stSidebarNav"]')
    expect(nav.get_by_text("task_alt")).to_have_count(3)

    goto(page, app_url, "quiz")
    page.get_by_role("button", name="Start the quiz").click()
    wait_for_app(page)
    started = attempt_on_screen(page, server_side)

    second = page.context.new_page()  # a second tab of the same browser
    goto(second, app_url, "")
    expect(second.locator('[data-testid="stSidebar"]').get_by_text("Lessons visited: 3 / 7")
           ).to_be_visible()
    goto(second, app_url, "quiz")  # no ?attempt= in this link: the learner's open attempt
    expect(second.get_by_text(f"Question 1 of {len(started.questions)}")).to_be_visible()
    assert attempt_on_screen(second, server_side).id == started.id
    screenshot(second, "progress-second-tab")
    second.close()
