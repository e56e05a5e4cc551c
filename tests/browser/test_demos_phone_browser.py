"""The demo pages on a phone (390 × 844), issue 11: no chart's title, subplot title, legend
or axis title sits on another or on its plot, nothing is cut off at the screen's edge, and
Compare's table shows every column. Screenshots are kept in tests/artifacts/
(demos-phone-*.png): look at them."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from tests.browser.test_lessons_phone_browser import PHONE, Box, overlap, phone  # noqa: F401
from tests.helpers import ARTIFACTS, goto

SMALL = "layers=4&hidden=64&heads=2&seq=64&batch=1&vocab=512"
PAGES = {
    "compare": f"compare?{SMALL}&strategy=every-layer,sqrt,selective:save-attention",
    "timeline": f"timeline?{SMALL}&strategy=every-layer",
    "curves": "curves?layers=2&hidden=64&heads=2&seq=64&vocab=512&sweep=batch",
    "what-fits": f"what-fits?{SMALL}&budget=32",
    "same-result": "same-result?layers=2&hidden=64&seq=32&batch=2&steps=20",
}

_BOXES = """chart => {
    const boxes = selector => [...chart.querySelectorAll(selector)]
        .map(node => node.getBoundingClientRect())
        .filter(r => r.width > 0 && r.height > 0)
        .map(r => ({x: r.x, y: r.y, width: r.width, height: r.height}));
    return {plot: boxes('.nsewdrag'), legend: boxes('g.legend .bg'),
            title: [...boxes('.gtitle'), ...boxes('g.annotation-text-g text')],
            axis: [...boxes('.g-xtitle'), ...boxes('.g-ytitle'), ...boxes('.g-x2title'),
                   ...boxes('.g-y2title')],
            ticks: boxes('.xtick text'), modebar: boxes('.modebar')};
}"""


def chart_boxes(page: Page) -> list[dict[str, list[Box]]]:
    charts = page.locator(".js-plotly-plot")
    found = []
    for index in range(charts.count()):
        chart = charts.nth(index)
        chart.scroll_into_view_if_needed()
        chart.locator(".nsewdrag").first.wait_for(state="attached")
        found.append(chart.evaluate(_BOXES))
    return found


def assert_apart(chart: dict[str, list[Box]], where: str) -> None:
    assert chart["plot"], where
    texts = chart["title"] + chart["axis"]
    for legend in chart["legend"]:
        for other in chart["plot"] + texts:
            assert not overlap(legend, other), (where, "legend on a plot or title", legend)
    for title in chart["title"]:  # chart and panel titles stay off plots, ticks, tool bar
        for other in chart["plot"] + chart["ticks"] + chart["modebar"]:
            assert not overlap(title, other, slack=2), (where, "title on a plot", title, other)
    for first in range(len(texts)):
        for second in range(first + 1, len(texts)):
            assert not overlap(texts[first], texts[second]), (where, "titles overlap")
    for box in chart["legend"] + texts:
        assert box["x"] >= -1 and box["x"] + box["width"] <= PHONE["width"] + 1, \
            (where, "cut off at the screen's edge", box)


@pytest.mark.parametrize("name", list(PAGES))
def test_demo_charts_keep_titles_legends_and_axes_apart(phone: Page, app_url: str,  # noqa: F811
                                                        name: str) -> None:
    goto(phone, app_url, PAGES[name], timeout_ms=180_000)
    phone.locator(".js-plotly-plot").first.wait_for(timeout=180_000)
    found = chart_boxes(phone)
    assert found
    for number, chart in enumerate(found):
        assert_apart(chart, f"{name}, chart {number + 1}")
    ARTIFACTS.mkdir(exist_ok=True)
    phone.screenshot(path=str(ARTIFACTS / f"demos-phone-{name}.png"), full_page=True)


@pytest.mark.parametrize("name", ["compare", "what-fits"])
def test_demo_tables_show_every_column_on_a_phone(phone: Page, app_url: str,  # noqa: F811
                                                  name: str) -> None:
    """Compare's table (then 8 columns) hid its last columns off the screen's edge."""
    goto(phone, app_url, PAGES[name], timeout_ms=180_000)
    table = phone.locator('[data-testid="stTable"]').first
    table.scroll_into_view_if_needed()
    headers = table.locator("th")
    assert headers.count() >= 4
    for index in range(headers.count()):
        box = headers.nth(index).bounding_box()
        assert box is not None and box["x"] >= -1 and box["x"] + box["width"] <= \
            PHONE["width"] + 1, (headers.nth(index).inner_text(), box)
    table.screenshot(path=str(ARTIFACTS / f"demos-phone-{name}-table.png"))
