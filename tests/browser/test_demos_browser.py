"""The live demos in a real browser: sliders change measured numbers, a shared link
reproduces a demo, and the timeline and curves draw their charts (screenshots kept)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from i18n import gettext
from tests.helpers import goto, screenshot, wait_for_app
from tools.translations import untranslated_on_page

SMALL = "layers=2&hidden=64&heads=2&seq=64&batch=1&vocab=512"


def _no_page_not_found(page: Page) -> None:
    expect(page.get_by_text("Page not found")).to_have_count(0)


def _slider(page: Page, label: str):
    return page.locator('[data-testid="stSlider"]').filter(has_text=label).get_by_role("slider")


def test_moving_a_slider_on_compare_changes_the_numbers(page: Page, app_url: str) -> None:
    goto(page, app_url, f"compare?{SMALL}&strategy=every-layer")
    _no_page_not_found(page)
    metric = page.locator('[data-testid="stMetricValue"]').first
    expect(metric).to_be_visible()
    before = metric.inner_text()
    slider = _slider(page, "Layers")
    slider.focus()
    slider.press("ArrowRight")  # 2 -> 3 layers
    wait_for_app(page)
    expect(metric).not_to_have_text(before)
    expect(page).to_have_url(re.compile(r"[?&]layers=3\b"))
    expect(page.get_by_text("Measured on this run on")).to_be_visible()
    screenshot(page, "demo-compare-after-slider")

    # The new result's own button: until the run ends, the previous result's button may
    # still be on the page for a moment (Streamlit replaces elements as the run reaches them).
    name = "compare-L3-h64-a2-s64-b1-V512-float32"
    button = page.locator(f".st-key-download-{name}").get_by_role(
        "button", name="Download the results (CSV)")
    with page.expect_download() as download:
        button.click()
    assert download.value.suggested_filename == f"{name}.csv"
    csv = Path(download.value.path()).read_text().splitlines()
    assert csv[0].startswith("strategy,label,fits,error,peak_bytes")
    assert [line.split(",")[0] for line in csv[1:]] == ["none", "every-layer"]


def test_a_shared_link_applies_its_settings(page: Page, app_url: str) -> None:
    goto(page, app_url, "compare?layers=3&hidden=128&heads=4&seq=64&batch=2&vocab=1024"
                        "&dtype=bfloat16&strategy=sqrt,every-k:2")
    expect(_slider(page, "Layers")).to_have_value("3")
    expect(_slider(page, "Hidden size")).to_have_value("128")
    expect(_slider(page, "Batch")).to_have_value("2")
    expect(page.get_by_role("radio", name="bfloat16")).to_be_checked()
    chosen = page.locator('[data-testid="stMultiSelect"]')
    expect(chosen).to_contain_text("every 2 layers")  # the title; the URL keeps every-k:2
    expect(chosen).to_contain_text("every √N layers")  # sqrt
    expect(chosen).not_to_contain_text("every layer")
    table = page.locator('[data-testid="stTable"]')
    expect(table).to_contain_text("every 2 layers")
    expect(table).to_contain_text("every √N layers")
    expect(page.locator('[data-testid="stPlotlyChart"]').first).to_be_visible()
    screenshot(page, "demo-compare-shared-link")


def test_a_bad_link_is_explained(page: Page, app_url: str) -> None:
    goto(page, app_url, "compare?layers=abc&hidden=64&heads=2&seq=64&batch=99999&vocab=512")
    expect(page.get_by_text("?batch='99999' is outside the range 1–8")).to_be_visible()
    expect(page.get_by_text("?layers='abc' is not a number")).to_be_visible()
    expect(_slider(page, "Batch")).to_have_value("8")
    expect(_slider(page, "Layers")).to_have_value("8")


def test_timeline_draws_its_chart(page: Page, app_url: str) -> None:
    goto(page, app_url, f"timeline?{SMALL}")
    chart = page.locator('[data-testid="stPlotlyChart"]').first
    expect(chart).to_be_visible()
    expect(chart.locator(".main-svg").first).to_be_visible()
    expect(chart.locator("g.trace.scatter").first).to_be_attached()
    expect(chart).to_contain_text("Memory during one training step")
    screenshot(page, "demo-timeline")


def test_curves_draw_their_chart(page: Page, app_url: str) -> None:
    goto(page, app_url, "curves?layers=2&hidden=64&heads=2&seq=64&vocab=512&sweep=batch",
         timeout_ms=120_000)
    chart = page.locator('[data-testid="stPlotlyChart"]').first
    expect(chart).to_be_visible()
    expect(chart.locator("g.trace.scatter").first).to_be_attached()
    expect(chart).to_contain_text("Step time")
    screenshot(page, "demo-curves")


@pytest.mark.parametrize("code", ["de", "vi"])
def test_moving_a_slider_in_german_and_vietnamese(page: Page, app_url: str, code: str) -> None:
    """A German or Vietnamese learner moves a demo slider; the page, its numbers
    and its charts stay in that language (decimal commas, translated table headers)."""
    goto(page, app_url, f"compare?{SMALL}&strategy=every-layer&lang={code}")
    expect(page.get_by_role("heading", name=gettext(code, "Compare checkpointing strategies"))
           ).to_be_visible()
    table = page.locator('[data-testid="stTable"]')
    expect(table).to_contain_text(gettext(code, "Peak memory (vs baseline)"))
    before = table.inner_text()
    slider = _slider(page, gettext(code, "Layers"))
    slider.focus()
    slider.press("ArrowRight")  # 2 -> 3 layers
    wait_for_app(page)
    expect(page).to_have_url(re.compile(r"[?&]layers=3\b"))
    expect(page).to_have_url(re.compile(rf"[?&]lang={code}\b"))
    expect(table).not_to_have_text(before)
    assert any(f",{digit} MiB" in table.inner_text() for digit in range(10))  # 12,3 MiB
    assert not untranslated_on_page(page.locator('[data-testid="stMain"]').inner_text(), code)
    expect(page.locator('[data-testid="stPlotlyChart"]').first).to_contain_text(
        gettext(code, "Peak memory and step time"))
    screenshot(page, f"demo-compare-{code}-after-slider")
