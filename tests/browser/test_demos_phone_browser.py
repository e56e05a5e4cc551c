"""The demo pages on a phone (390 × 844): no chart's title, subplot title, legend
or axis title sits on another or on its plot, nothing is cut off at the screen's edge, and
Compare's table shows every column. Screenshots are kept in tests/artifacts/
(demos-phone-*.png): look at them."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from tests.browser.layout import (
    assert_chart_parts_apart,
    assert_labels_apart,
    chart_boxes,
    within_width,
)
from tests.helpers import ARTIFACTS, goto

SMALL = "layers=4&hidden=64&heads=2&seq=64&batch=1&vocab=512"
PAGES = {
    "compare": f"compare?{SMALL}&strategy=every-layer,sqrt,selective:save-attention",
    "timeline": f"timeline?{SMALL}&strategy=every-layer",
    "curves": "curves?layers=2&hidden=64&heads=2&seq=64&vocab=512&sweep=batch",
    "what-fits": f"what-fits?{SMALL}&budget=16",  # a short search: the layout is tested
    "same-result": "same-result?layers=2&hidden=64&seq=32&batch=2&steps=20",
}

@pytest.mark.parametrize("name", list(PAGES))
def test_demo_charts_keep_titles_legends_and_axes_apart(phone: Page, app_url: str,
                                                        name: str) -> None:
    goto(phone, app_url, PAGES[name], timeout_ms=180_000)
    phone.locator(".js-plotly-plot").first.wait_for(timeout=180_000)
    found = chart_boxes(phone)
    assert found
    for number, chart in enumerate(found):
        assert_chart_parts_apart(chart, f"{name}, chart {number + 1}")
    ARTIFACTS.mkdir(exist_ok=True)
    phone.screenshot(path=str(ARTIFACTS / f"demos-phone-{name}.png"), full_page=True)


@pytest.mark.parametrize("lang", ["de", "vi"])
def test_compare_panel_titles_and_the_timelines_peak_label_fit_a_phone(
        phone: Page, app_url: str, lang: str) -> None:
    """Compare's panel titles (longest in German) were cut at the screen's edges; the
    timeline's peak label sat on its F/B labels."""
    for name in ("compare", "timeline"):
        goto(phone, app_url, f"{PAGES[name]}&lang={lang}", timeout_ms=180_000)
        phone.locator(".js-plotly-plot").first.wait_for(timeout=180_000)
        found = chart_boxes(phone, ARTIFACTS / f"demos-phone-{name}-{lang}")
        for number, chart in enumerate(found):
            assert_chart_parts_apart(chart, f"{name} ({lang}), chart {number + 1}")
            if name == "timeline":
                assert chart["labels"], "the timeline's labels were not found"
                assert_labels_apart(chart, f"{name} ({lang}), chart {number + 1}")


@pytest.mark.parametrize(("name", "lang"), [("compare", "en"), ("what-fits", "en"),
                                          ("compare", "de"), ("compare", "vi")])
def test_demo_tables_show_every_column_on_a_phone(phone: Page, app_url: str,
                                                  name: str, lang: str) -> None:
    """Compare's table (then 8 columns) hid its last columns off the screen's edge; in
    German its long words ("Spitzenspeicher") pushed the last one off."""
    goto(phone, app_url, f"{PAGES[name]}&lang={lang}", timeout_ms=180_000)
    table = phone.locator('[data-testid="stTable"]').first
    table.scroll_into_view_if_needed()
    headers = table.locator("th")
    assert headers.count() >= 4
    for index in range(headers.count()):
        box = headers.nth(index).bounding_box()
        assert box is not None and within_width(box), (headers.nth(index).inner_text(), box)
    table_box = table.bounding_box()
    assert table_box is not None and within_width(table_box), table_box
    table.screenshot(path=str(ARTIFACTS / f"demos-phone-{name}-table-{lang}.png"))
