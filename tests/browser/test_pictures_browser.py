"""/pictures in a real browser, at laptop size in English and phone size in Vietnamese:
a tiny image model trains one step on the server, the per-block chart, the costs and the
resolution sweep show, a changed choice reruns it and updates the URL, and on a phone no
chart's parts sit on one another or run off the screen, nor is anything left in English.
Screenshots are kept in tests/artifacts/ (pictures-*.png): look at them."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.browser.layout import assert_chart_parts_apart, chart_boxes, within_width
from tests.helpers import ARTIFACTS, goto, screenshot, wait_for_app
from tools.translations import untranslated_on_page

# small: the tiny SD3 transformer at 128 px answers in about a second
SMALL = "pictures?family=sd3&size=128&batch=1&ckpt=every-layer"


def test_pictures_measures_blocks_costs_and_sweep(page: Page, app_url: str) -> None:
    goto(page, app_url, SMALL, timeout_ms=180_000)
    expect(page.get_by_text("Page not found")).to_have_count(0)
    charts = page.locator(".js-plotly-plot")
    expect(charts).to_have_count(2, timeout=180_000)  # the blocks, the sweep
    code = page.locator('[data-testid="stCode"]').first
    expect(code).to_contain_text("transformer.enable_gradient_checkpointing()")
    expect(page.get_by_text("Saved for backward, every block")).to_be_visible()
    expect(page.get_by_text("slower by CPU time").or_(
        page.get_by_text("within noise by CPU time"))).to_be_visible()
    screenshot(page, "pictures-sd3-every-block")
    _keep_parts(page, "pictures-sd3-every-block")

    page.get_by_text("one block in n", exact=True).click()
    wait_for_app(page, 180_000)
    expect(code).to_contain_text("gradient_checkpointing_func=every_nth")
    expect(page).to_have_url(re.compile(r"[?&]ckpt=every-n\b"))
    expect(charts).to_have_count(2, timeout=180_000)
    screenshot(page, "pictures-sd3-one-in-two")


def test_pictures_on_a_phone_keeps_chart_parts_apart(phone: Page, app_url: str) -> None:
    """In Vietnamese: nothing left in English either."""
    goto(phone, app_url,
         "pictures?family=sdxl-unet&size=128&batch=1&ckpt=every-layer&lang=vi",
         timeout_ms=240_000)
    charts = phone.locator(".js-plotly-plot")
    expect(charts).to_have_count(2, timeout=240_000)
    assert not untranslated_on_page(phone.locator('[data-testid="stMain"]').inner_text(), "vi")
    found = chart_boxes(phone)
    assert len(found) == 2
    for number, chart in enumerate(found):
        assert_chart_parts_apart(chart, f"pictures, chart {number + 1}")
    for index in range(charts.count()):
        box = charts.nth(index).bounding_box()
        assert box is not None and within_width(box), box
    screenshot(phone, "pictures-phone-vi-sdxl-unet")
    _keep_parts(phone, "pictures-phone-vi-sdxl-unet")


def _keep_parts(page: Page, name: str) -> None:
    """The page scrolls inside Streamlit's own container, which a full-page screenshot
    does not follow: each chart and table is kept as a picture of its own."""
    ARTIFACTS.mkdir(exist_ok=True)
    parts = page.locator('.js-plotly-plot, [data-testid="stTable"], [data-testid="stMetric"]')
    for index in range(parts.count()):
        part = parts.nth(index)
        if not part.is_visible():  # in a closed expander
            continue
        part.scroll_into_view_if_needed()
        part.screenshot(path=str(ARTIFACTS / f"{name}-part{index + 1}.png"))
