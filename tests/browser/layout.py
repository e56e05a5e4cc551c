"""Layout checks the browser tests share: the phone's viewport, boxes that overlap, and the
boxes of a Plotly chart's parts (plot areas, legends, titles, axis titles, tick labels,
tool bar), read in the browser."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page

PHONE = {"width": 390, "height": 844}
Box = dict[str, float]

_CHART_BOXES = """chart => {
    const boxes = selector => [...chart.querySelectorAll(selector)]
        .map(node => node.getBoundingClientRect())
        .filter(r => r.width > 0 && r.height > 0)
        .map(r => ({x: r.x, y: r.y, width: r.width, height: r.height}));
    return {plot: boxes('.nsewdrag'), legend: boxes('g.legend .bg'),
            title: [...boxes('.gtitle'), ...boxes('g.annotation-text-g text')],
            axis: [...boxes('.g-xtitle'), ...boxes('.g-ytitle'), ...boxes('.g-x2title'),
                   ...boxes('.g-y2title')],
            ticks: boxes('.xtick text'), modebar: boxes('.modebar'),
            labels: boxes('.textpoint text')};
}"""


def overlap(a: Box, b: Box, slack: float = 1.0) -> bool:
    """Whether two boxes share more than `slack` pixels both across and down."""
    return (a["x"] + slack < b["x"] + b["width"] and b["x"] + slack < a["x"] + a["width"]
            and a["y"] + slack < b["y"] + b["height"] and b["y"] + slack < a["y"] + a["height"])


def in_viewport(box: Box | None, viewport: dict[str, int] = PHONE) -> bool:
    return (box is not None and box["y"] >= -1 and box["x"] >= -1
            and box["y"] + box["height"] <= viewport["height"] + 1
            and box["x"] + box["width"] <= viewport["width"] + 1)


def within_width(box: Box, width: float = PHONE["width"]) -> bool:
    return box["x"] >= -1 and box["x"] + box["width"] <= width + 1


def chart_boxes(page: Page, screenshots: Path | None = None) -> list[dict[str, list[Box]]]:
    """For every Plotly chart on the page, scrolled into view in turn, the boxes of its
    parts; with `screenshots` (a path stem), each chart's picture is kept as
    <stem>-<n>.png."""
    charts = page.locator(".js-plotly-plot")
    found = []
    for index in range(charts.count()):
        chart = charts.nth(index)
        chart.scroll_into_view_if_needed()
        chart.locator(".nsewdrag").first.wait_for(state="attached")
        found.append(chart.evaluate(_CHART_BOXES))
        if screenshots is not None:
            screenshots.parent.mkdir(exist_ok=True)
            chart.screenshot(path=f"{screenshots}-{index + 1}.png")
    return found


def assert_chart_parts_apart(chart: dict[str, list[Box]], where: str,
                             titles_off_ticks: bool = True) -> None:
    """No legend on a plot or a title, no two titles on each other, nothing cut off at the
    phone's edge; with `titles_off_ticks`, chart and panel titles also stay off the plots,
    the tick labels and the tool bar."""
    assert chart["plot"], where
    texts = chart["title"] + chart["axis"]
    for legend in chart["legend"]:
        for other in chart["plot"] + texts:
            assert not overlap(legend, other), (where, "legend on a plot or title", legend)
    if titles_off_ticks:
        for title in chart["title"]:
            for other in chart["plot"] + chart["ticks"] + chart["modebar"]:
                assert not overlap(title, other, slack=2), (where, "title on a plot", title)
    for first in range(len(texts)):
        for second in range(first + 1, len(texts)):
            assert not overlap(texts[first], texts[second]), (where, "titles overlap")
    for box in chart["legend"] + texts:
        assert within_width(box), (where, "cut off at the screen's edge", box)


def assert_labels_apart(chart: dict[str, list[Box]], where: str) -> None:
    """No two text labels of a chart's points (a timeline's peak and phase labels) on
    each other, none cut off at the phone's edge."""
    labels = chart["labels"]
    for first in range(len(labels)):
        for second in range(first + 1, len(labels)):
            assert not overlap(labels[first], labels[second]), (
                where, "labels overlap", labels[first], labels[second])
    for box in labels:
        assert within_width(box), (where, "label cut off at the screen's edge", box)
