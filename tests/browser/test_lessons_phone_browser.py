"""The lessons on a phone (390 × 844): the stepper's buttons and the figure they move are on
one screen, and no chart's legend or title sits on its plot, its axis titles or another
title. Screenshots are kept in tests/artifacts/ (lessons-phone-*.png)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page

from lessons.catalog import LESSONS
from lessons.document import load
from lessons.values import lesson_values
from tests.helpers import ARTIFACTS, goto, wait_for_app

PHONE = {"width": 390, "height": 844}
Box = dict[str, float]


@pytest.fixture
def phone(browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(viewport=PHONE, device_scale_factor=1, has_touch=True,
                                  is_mobile=True)
    context.set_default_timeout(60_000)
    tab = context.new_page()
    yield tab
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        name = request.node.nodeid.replace("/", "_").replace("::", "__")
        tab.screenshot(path=str(ARTIFACTS / f"FAILED-{name}.png"), full_page=True)
    context.close()


def in_viewport(box: Box | None) -> bool:
    return (box is not None and box["y"] >= -1 and box["x"] >= -1
            and box["y"] + box["height"] <= PHONE["height"] + 1
            and box["x"] + box["width"] <= PHONE["width"] + 1)


def overlap(a: Box, b: Box, slack: float = 1.0) -> bool:
    return (a["x"] + slack < b["x"] + b["width"] and b["x"] + slack < a["x"] + a["width"]
            and a["y"] + slack < b["y"] + b["height"] and b["y"] + slack < a["y"] + a["height"])


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


_BOXES = """chart => {
    const boxes = selector => [...chart.querySelectorAll(selector)]
        .map(node => node.getBoundingClientRect())
        .filter(r => r.width > 0 && r.height > 0)
        .map(r => ({x: r.x, y: r.y, width: r.width, height: r.height}));
    return {plot: boxes('.nsewdrag'), legend: boxes('g.legend .bg'), title: boxes('.gtitle'),
            axis: [...boxes('.g-xtitle'), ...boxes('.g-ytitle'), ...boxes('.g-y2title')]};
}"""


def chart_boxes(page: Page, name: str = "") -> list[dict[str, list[Box]]]:
    """For every Plotly chart on the page, scrolled into view in turn: the boxes of its plot
    area, legend, chart title and axis titles (empty lists where a chart has none). With a
    `name`, each chart's screenshot is kept as lessons-phone-<name>-<n>.png."""
    charts = page.locator(".js-plotly-plot")
    found = []
    for index in range(charts.count()):
        chart = charts.nth(index)
        chart.scroll_into_view_if_needed()
        chart.locator(".nsewdrag").first.wait_for(state="attached")
        found.append(chart.evaluate(_BOXES))
        if name:
            ARTIFACTS.mkdir(exist_ok=True)
            chart.screenshot(path=str(ARTIFACTS / f"lessons-phone-{name}-{index + 1}.png"))
    return found


# The lessons that draw charts (lesson 7's decision procedure draws none).
CHARTED = [item for item in LESSONS
           if set(load(item.path, lesson_values()).widgets) - {"figure:decision"}]


@pytest.mark.parametrize("item", CHARTED, ids=[item.path for item in CHARTED])
def test_lesson_charts_keep_legends_and_titles_apart(phone: Page, app_url: str, item):
    goto(phone, app_url, item.path)
    phone.locator(".js-plotly-plot").first.wait_for()
    found = chart_boxes(phone, item.path)
    assert found
    for number, chart in enumerate(found):
        where = f"{item.path}, chart {number + 1}"
        assert chart["plot"], where
        for legend in chart["legend"]:
            for plot in chart["plot"]:
                assert not overlap(legend, plot), (where, "legend on the plot")
            for other in chart["axis"] + chart["title"]:
                assert not overlap(legend, other), (where, "legend on a title")
        titles = chart["axis"] + chart["title"]
        for first in range(len(titles)):
            for second in range(first + 1, len(titles)):
                assert not overlap(titles[first], titles[second]), (where, "titles overlap")
        for box in chart["legend"] + titles:
            assert box["x"] >= -1 and box["x"] + box["width"] <= PHONE["width"] + 1, \
                (where, "cut off at the screen's edge")
