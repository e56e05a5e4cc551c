"""/plan in a real browser, at laptop and phone size: it opens, a changed GPU changes the
verdict and the URL, and the page fits the phone's width (screenshots kept)."""

from __future__ import annotations

import re
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
    expect(page).to_have_url(re.compile(r"[?&]gpu=a100-80\b"))
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
        # the GPU's and the margin's labels (annotations) stay off the bars too
        assert_chart_parts_apart(chart, f"plan chart {index}")
    modebars = phone.locator(".modebar-container")
    assert all(not modebars.nth(i).is_visible() for i in range(modebars.count()))
    screenshot(phone, "plan-phone-de-toolbars")


def test_plan_across_gpus_shows_per_gpu_bytes_and_the_layouts_code(page: Page,
                                                                   app_url: str) -> None:
    """Llama 3.1 70B at 8,192 tokens on H100s: 16 GPUs picked on the page, then your own
    layout (tensor 4 with sequence parallelism, 2 pipeline stages): the layout table's
    per-GPU peaks are the page's one plan's, and the code builds the pipeline it names."""
    from memory import parallel as M
    from memory.architectures import PRESETS
    from memory.footprint import PlannerInputs
    from memory.hardware import GPUS
    from planner import parallel_plan as PP
    from planner import recommend as R
    from ui.plan_words import gib

    goto(page, app_url, "plan?model=llama-3.1-70b&seq=8192&gpu=h100&tuning=full&free=5")

    def pick(label: str, option: str) -> None:
        group = page.locator('[data-testid="stRadio"]').filter(has_text=label)
        group.get_by_text(option, exact=True).click()
        wait_for_app(page)

    pick("GPUs you have", "16")
    expect(page.get_by_text("Across 16 GPUs", exact=True)).to_be_visible()
    pick("Layout", "My own")
    pick("Tensor parallel", "4")
    pick("Sequence parallel", "on")
    pick("Pipeline stages", "2")
    # the link follows the last click (expect waits: on a loaded machine the rerun that
    # writes it can start after the click's wait has ended)
    for part in ("shards=16", "tp=4", "pp=2"):
        expect(page).to_have_url(re.compile(rf"[?&]{part}(&|$)"))
    p = PlannerInputs(PRESETS["llama-3.1-70b"], seq=8192, accumulation=8, shards=16,
                      gpu_bytes=GPUS["h100"].bytes, headroom=0.05)
    # the page's one plan on that layout (with AdamW it needs more GPUs: a choice)
    rec = R.plan(p, PP.with_dp(M.Layout(tp=4, sp=True, pp=2, microbatches=8), 16)
                 ).recommendation
    rows = PP.gpu_rows(rec.inputs, rec.layout)
    table = page.locator('[data-testid="stDataFrame"]').last
    table.scroll_into_view_if_needed()
    for row in rows.values():
        expect(table).to_contain_text(gib(row.peak))
    code = page.locator('[data-testid="stCode"]').last
    code.scroll_into_view_if_needed()
    expect(code).to_contain_text("class Stage(nn.Module)")
    expect(code).to_contain_text(
        f"Schedule1F1B(runs[0], n_microbatches={rec.layout.microbatches}")
    screenshot(page, "plan-laptop-gpus")
