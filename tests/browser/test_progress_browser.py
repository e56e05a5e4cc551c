"""Progress in a real browser: the lesson widgets' settings (a calculator's input, the
stepper's position) survive a reload, a second tab, and leaving the page and coming back;
the lessons read and the open attempt are tested in test_quiz_browser."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.helpers import goto, screenshot, wait_for_app

ACTIVATIONS = "Activations, everything kept"


def step_info(page: Page):  # noqa: ANN201 - a Playwright Locator
    return page.locator('[data-testid="stAlert"]').filter(has_text="Step ").first


def activations(page: Page):  # noqa: ANN201
    return page.locator('[data-testid="stMetric"]').filter(has_text=ACTIVATIONS)


def sidebar_link(page: Page, path: str):  # noqa: ANN201
    return page.locator(f'[data-testid="stSidebarNav"] a[href$="/{path}"]')


def next_step(page: Page, number: int) -> None:
    """Click "Next step" and see step `number`. A click that lands while the figure above
    the button is still being laid out can miss it (the page then still shows the step
    before, with no run started): that one click is repeated, and the step must then be
    exactly `number`, never one further."""
    page.get_by_role("button", name="Next step").click()
    wait_for_app(page)
    info = step_info(page)
    if f"Step {number - 1} of 16" in (info.text_content() or ""):
        page.get_by_role("button", name="Next step").click()
        wait_for_app(page)
    expect(info).to_contain_text(f"Step {number} of 16")


def test_a_calculator_input_and_the_stepper_position_survive_a_reload_and_a_new_tab(
        page: Page, app_url: str) -> None:
    goto(page, app_url, "how-it-works")
    page.wait_for_function("document.cookie.includes('gcl_learner=')", timeout=60_000)
    expect(step_info(page)).to_contain_text("Step 1 of 16")
    for number in range(2, 5):
        next_step(page, number)

    goto(page, app_url, "why-memory")
    expect(activations(page)).to_contain_text("4.0 GB")
    batch = page.get_by_label("Batch (examples)")
    batch.fill("4")
    batch.press("Enter")
    wait_for_app(page)
    expect(activations(page)).to_contain_text("8.0 GB")

    page.reload(wait_until="domcontentloaded")
    wait_for_app(page)
    expect(page.get_by_label("Batch (examples)")).to_have_value("4")
    expect(activations(page)).to_contain_text("8.0 GB")
    goto(page, app_url, "how-it-works")
    expect(step_info(page)).to_contain_text("Step 4 of 16")

    second = page.context.new_page()  # a second tab of the same browser
    goto(second, app_url, "why-memory")
    expect(second.get_by_label("Batch (examples)")).to_have_value("4")
    expect(activations(second)).to_contain_text("8.0 GB")
    goto(second, app_url, "how-it-works")
    expect(step_info(second)).to_contain_text("Step 4 of 16")
    next_step(second, 5)
    # Leaving the page and coming back in the same tab: Streamlit drops the widgets' state
    # with the page; the remembered settings put it back.
    sidebar_link(second, "why-memory").click()
    wait_for_app(second)
    expect(activations(second)).to_contain_text("8.0 GB")
    sidebar_link(second, "how-it-works").click()
    wait_for_app(second)
    expect(step_info(second)).to_contain_text("Step 5 of 16")
    step_info(second).scroll_into_view_if_needed()
    screenshot(second, "progress-settings-second-tab")
    second.close()
