"""/plan with an image model in a real browser, in German at laptop and phone size and in
English on a laptop (FLUX.1 [dev]'s QLoRA on a 24 GB card): the recommendation's headline
and the table of checkpointing choices are shown whole, inside the screen's width, and
the code (screenshots kept in tests/artifacts)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.helpers import ARTIFACTS, goto, screenshot

SIZES = {"laptop": {"width": 1400, "height": 1000}, "phone": {"width": 390, "height": 844}}
LINK = "plan?model=sdxl-base-unet&resolution=1024&gpu=t4&tuning=lora&lang=de"
QLORA_LINK = "plan?model=flux.1-dev&resolution=1024&gpu=l4&tuning=qlora&lang=en"


def _sized(browser, name: str) -> Iterator[Page]:
    context = browser.new_context(viewport=SIZES[name], device_scale_factor=1,
                                  is_mobile=name == "phone", has_touch=name == "phone")
    context.set_default_timeout(60_000)
    yield context.new_page()
    context.close()


@pytest.fixture(params=list(SIZES))
def sized_page(request: pytest.FixtureRequest, browser) -> Iterator[tuple[str, Page]]:
    for tab in _sized(browser, request.param):
        yield request.param, tab


@pytest.fixture
def laptop(browser) -> Iterator[Page]:
    yield from _sized(browser, "laptop")


def _inside(box: dict | None, width: int) -> bool:
    return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1


def test_an_image_plan_shows_its_headline_and_table_whole(sized_page: tuple[str, Page],
                                                          app_url: str) -> None:
    name, page = sized_page
    width = SIZES[name]["width"]
    goto(page, app_url, LINK)
    headline = page.locator('[data-testid="stAlertContentSuccess"]').first
    expect(headline).to_contain_text("Empfohlen:")
    headline.scroll_into_view_if_needed()
    expect(headline).to_be_visible()
    assert _inside(headline.bounding_box(), width), headline.bounding_box()
    screenshot(page, f"plan-picture-{name}-de")
    table = page.locator('[data-testid="stDataFrame"]').first
    table.scroll_into_view_if_needed()
    expect(table).to_be_visible()
    expect(table).to_contain_text("empfohlen")  # the marked row's name, pinned in view
    assert _inside(table.bounding_box(), width), table.bounding_box()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(ARTIFACTS / f"plan-picture-{name}-de-table.png"))


def test_a_qlora_plan_in_english_shows_its_headline_table_and_code(laptop: Page,
                                                                   app_url: str) -> None:
    width = SIZES["laptop"]["width"]
    goto(laptop, app_url, QLORA_LINK)
    headline = laptop.locator('[data-testid="stAlertContentSuccess"]').first
    expect(headline).to_contain_text("Recommended:")
    assert _inside(headline.bounding_box(), width), headline.bounding_box()
    table = laptop.locator('[data-testid="stDataFrame"]').first
    table.scroll_into_view_if_needed()
    expect(table).to_contain_text("recommended")
    assert _inside(table.bounding_box(), width), table.bounding_box()
    code = laptop.locator('[data-testid="stCode"]').first
    code.scroll_into_view_if_needed()
    expect(code).to_contain_text("BitsAndBytesConfig(")
    assert laptop.evaluate("document.documentElement.scrollWidth") <= width
    screenshot(laptop, "plan-picture-laptop-en-qlora")
