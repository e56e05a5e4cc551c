"""/plan in a real browser, at laptop and phone size: it opens, a changed GPU changes the
verdict and the URL, and the page fits the phone's width (screenshots kept)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.helpers import goto, screenshot, wait_for_app

SIZES = {"laptop": {"width": 1400, "height": 1000}, "phone": {"width": 390, "height": 844}}


@pytest.fixture(params=list(SIZES))
def sized_page(request: pytest.FixtureRequest, browser) -> Iterator[tuple[str, Page]]:
    name = request.param
    context = browser.new_context(viewport=SIZES[name], device_scale_factor=1)
    context.set_default_timeout(60_000)
    tab = context.new_page()
    yield name, tab
    context.close()


def test_plan_opens_and_follows_the_gpu(sized_page: tuple[str, Page], app_url: str) -> None:
    name, page = sized_page
    goto(page, app_url, "plan")
    expect(page.get_by_text("Page not found")).to_have_count(0)
    metric = page.locator('[data-testid="stMetricDelta"]').first
    expect(metric).to_be_visible()
    before = metric.inner_text()
    expect(page.locator('[data-testid="stPlotlyChart"]').first).to_be_visible()
    screenshot(page, f"plan-{name}-a10")

    page.get_by_text("A100 80 GB · 80.0 GiB").click()
    wait_for_app(page)
    expect(metric).not_to_have_text(before)
    assert "gpu=a100-80" in page.url
    chart = page.locator('[data-testid="stPlotlyChart"]').first
    expect(chart).to_contain_text("GPU 80.0 GiB")
    expect(page.get_by_text("Recommendation", exact=True)).to_be_visible()
    if name == "phone":  # nothing wider than the screen but the scrollable table
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= SIZES["phone"]["width"]
    screenshot(page, f"plan-{name}-80gb")
    for part, selector in (("chart", '[data-testid="stPlotlyChart"]'),
                           ("table", '[data-testid="stDataFrame"]'),
                           ("advice", '[data-testid="stPageLink"]')):
        page.locator(selector).first.scroll_into_view_if_needed()
        screenshot(page, f"plan-{name}-{part}")


def test_on_a_phone_no_tool_bar_covers_a_title(phone: Page, app_url: str) -> None:
    """Plotly's mode bar over the plan chart's title and the table's tool bar over the
    heading "Every checkpointing choice" (both shown on a tap): hidden on a phone."""
    from tests.browser.layout import assert_chart_parts_apart, chart_boxes

    goto(phone, app_url, "plan?lang=de")
    table = phone.locator('[data-testid="stDataFrame"]').first
    table.scroll_into_view_if_needed()
    table.tap()  # a tap is a phone's hover: it showed the tool bar
    toolbars = phone.locator('[data-testid="stElementToolbar"]')
    assert all(not toolbars.nth(i).is_visible() for i in range(toolbars.count()))
    for index in range(phone.locator(".js-plotly-plot").count()):
        phone.locator(".js-plotly-plot").nth(index).tap()
    for index, chart in enumerate(chart_boxes(phone)):
        assert not chart["modebar"], f"plan chart {index}: the mode bar shows"
        assert_chart_parts_apart(chart, f"plan chart {index}", titles_off_ticks=False)
    modebars = phone.locator(".modebar-container")
    assert all(not modebars.nth(i).is_visible() for i in range(modebars.count()))
    screenshot(phone, "plan-phone-de-toolbars")
