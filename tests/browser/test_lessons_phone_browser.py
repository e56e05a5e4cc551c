"""The lessons on a phone (390 × 844): the stepper's buttons and the figure they move are on
one screen, and no chart's legend or title sits on its plot, its axis titles or another
title. Screenshots are kept in tests/artifacts/ (lessons-phone-*.png)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from lessons.catalog import LESSONS
from lessons.document import load
from lessons.values import lesson_values
from tests.browser.layout import assert_chart_parts_apart, chart_boxes, in_viewport
from tests.helpers import ARTIFACTS, goto, wait_for_app


def test_stepper_button_and_figure_stay_on_screen_after_a_tap(phone: Page, app_url: str):
    goto(phone, app_url, "how-it-works")
    stage = phone.locator(".st-key-stepper_stage")
    figure = stage.locator(".js-plotly-plot").first
    button = phone.locator(".st-key-step_next button")
    info = stage.locator('[data-testid="stAlert"]')
    # The learner scrolls until the button is at the bottom of the screen, thumb on it.
    button.evaluate("node => node.scrollIntoView({block: 'end'})")
    for expected in (2, 3, 4):
        button.tap()
        wait_for_app(phone)
        assert f"{expected} / 16" in info.inner_text() or f"{expected} of 16" in \
            info.inner_text()
        assert in_viewport(button.bounding_box()), button.bounding_box()
        assert in_viewport(figure.bounding_box()), figure.bounding_box()
    phone.screenshot(path=str(ARTIFACTS / "lessons-phone-stepper.png"))


# The lessons that draw charts as they open (lesson 7's decision procedure draws none; a
# "measured:" section draws its chart once a learner has asked for the measurement).
CHARTED = [item for item in LESSONS
           if {widget for widget in load(item.path, lesson_values()).widgets
               if not widget.startswith("measured:")} - {"figure:decision"}]


@pytest.mark.parametrize("item", CHARTED, ids=[item.path for item in CHARTED])
def test_lesson_charts_keep_legends_and_titles_apart(phone: Page, app_url: str, item):
    goto(phone, app_url, item.path)
    phone.locator(".js-plotly-plot").first.wait_for()
    found = chart_boxes(phone, ARTIFACTS / f"lessons-phone-{item.path}")
    assert found
    for number, chart in enumerate(found):
        assert_chart_parts_apart(chart, f"{item.path}, chart {number + 1}",
                                 titles_off_ticks=False)
