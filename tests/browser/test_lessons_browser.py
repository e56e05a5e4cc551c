"""The lessons in a real browser: walk them all with the Next links, drive the stepper
and a calculator."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Locator, Page, expect

from i18n import gettext
from lessons.catalog import LESSONS
from tests.helpers import goto, screenshot, wait_for_app
from tools.translations import untranslated_on_page


def metric(page: Page, label: str) -> Locator:
    """The value of the metric labelled `label` (checked with expect: a rerun after a
    click can land a moment after the page looked idle on a loaded machine)."""
    found = page.locator('[data-testid="stMetric"]').filter(has_text=label).first
    return found.locator('[data-testid="stMetricValue"]')


def test_walk_all_lessons_with_the_next_links(page: Page, app_url: str) -> None:
    goto(page, app_url, LESSONS[0].path)
    for number, item in enumerate(LESSONS, start=1):
        expect(page.locator("h1").first).to_contain_text(f"{number}. {item.title}")
        expect(page).to_have_url(re.compile(f"/{item.path}$"))
        expect(page.get_by_text("Key takeaways")).to_be_visible()
        expect(page.get_by_text("Try it live")).to_be_visible()
        if number < len(LESSONS):
            following = LESSONS[number]
            page.get_by_role("link", name=f"Next: {number + 1}. {following.title}").click()
            wait_for_app(page)
    expect(page.get_by_role("link", name="Next: take the quiz")).to_be_visible()
    # Progress is kept for the session and shown in the sidebar.
    expect(page.locator('[data-testid="stSidebar"]')).to_contain_text(
        f"Lessons visited: {len(LESSONS)} / {len(LESSONS)}")
    screenshot(page, "lessons-walk-end")


def test_stepper_buttons_and_slider_change_the_state(page: Page, app_url: str) -> None:
    goto(page, app_url, "how-it-works")
    info = page.locator('[data-testid="stAlert"]').filter(has_text="Step ").first
    expect(info).to_contain_text("Step 1 of 16")
    expect(metric(page, "Memory in use")).to_have_text("3 units")
    page.get_by_role("button", name="Next step").click()
    wait_for_app(page)
    expect(info).to_contain_text("Step 2 of 16")
    expect(info).to_contain_text("Forward through layer 2")
    expect(metric(page, "Memory in use")).to_have_text("5 units")
    expect(metric(page, "Forward computations")).to_have_text("2 of 8")
    step_slider = page.locator('input[type="range"][aria-label="Step"]')
    step_slider.focus()
    page.keyboard.press("End")
    wait_for_app(page)
    expect(info).to_contain_text("Step 16 of 16")
    expect(info).to_contain_text("Backward through layer 1")
    page.get_by_text("Keep nothing (recompute from the input)").click()
    wait_for_app(page)
    expect(info).to_contain_text("Step 1 of 52")
    expect(metric(page, "Forward computations")).to_have_text("1 of 44")
    page.get_by_role("button", name="Next step").click()
    wait_for_app(page)
    expect(info).to_contain_text("Step 2 of 52")
    info.scroll_into_view_if_needed()
    screenshot(page, "lessons-stepper")


def test_memory_calculator_updates_when_an_input_changes(page: Page, app_url: str) -> None:
    goto(page, app_url, "why-memory")
    expect(metric(page, "Activations, everything kept")).to_have_text("4.0 GB")
    batch = page.get_by_label("Batch (examples)")
    batch.fill("4")
    batch.press("Enter")
    wait_for_app(page)
    expect(page.locator('[data-testid="stMetric"]').filter(
        has_text="Activations, everything kept")).to_contain_text("8.0 GB")
    page.locator('[data-testid="stMetric"]').first.scroll_into_view_if_needed()
    screenshot(page, "lessons-calculator")


@pytest.mark.parametrize("code", ["de", "vi"])
def test_walk_all_lessons_in_german_and_vietnamese(page: Page, app_url: str, code: str) -> None:
    """The same walk with ?lang= once at the start: the language stays through every Next
    link, every lesson is in that language (no English sentence of the catalog left in the
    main area) and numbers are written its way."""
    goto(page, app_url, f"{LESSONS[0].path}?lang={code}")
    main = page.locator('[data-testid="stMain"]')
    for number, item in enumerate(LESSONS, start=1):
        expect(page.locator("h1").first).to_contain_text(f"{number}. {item.title_in(code)}")
        expect(main.get_by_text(gettext(code, "Key takeaways"))).to_be_visible()
        assert untranslated_on_page(main.inner_text(), code) == [], item.path
        if number == 1:
            assert "4,0 GB" in main.inner_text()
        if number < len(LESSONS):
            following = LESSONS[number]
            label = gettext(code, "Next: {number}. {title}", number=number + 1,
                            title=following.title_in(code))
            page.get_by_role("link", name=label).click()
            wait_for_app(page)
            expect(page).to_have_url(re.compile(f"/{following.path}"))
    expect(page.get_by_role("link", name=gettext(code, "Next: take the quiz"))).to_be_visible()
    screenshot(page, f"lessons-walk-end-{code}")


def test_parallel_calculator_answers_a_new_layout(page: Page, app_url: str) -> None:
    """Lesson 8: the calculator opens on the lesson's GPT-3 175B layout, the table beside it
    shows the same figures, and a new schedule and tensor-parallel size change the answer."""
    from lessons.values import lesson_values

    values = lesson_values()
    goto(page, app_url, "many-gpus")
    expect(page.locator("h1").first).to_contain_text("Checkpointing across many GPUs")
    expect(metric(page, "GPUs per model copy")).to_have_text("64")
    expect(metric(page, "One layer, one micro-batch")).to_have_text(values["par_layer_sp_gb"])
    expect(page.get_by_role("table").first).to_contain_text(values["par_layer_tp_gb"])
    page.locator('[data-testid="stRadio"]').get_by_text("GPipe", exact=True).click()
    wait_for_app(page)
    expect(metric(page, "Micro-batches held")).to_have_text(values["par_gpipe_in_flight"])
    screenshot(page, "lesson-8-calculator")
