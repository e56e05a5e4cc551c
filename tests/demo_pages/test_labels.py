"""Labels a newcomer reads at first sight: strategy titles in the pickers (ids in the URL),
one unit per table column, the forward count in its own panel, peak labels above the
curve, the address of no page."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

from demos.reports import timeline_figures
from demos.reports.timeline_figures import timeline_figure, timeline_frame
from i18n.units import column_unit, format_bytes_in
from lessons.figures import k_curve_figure
from tests.demo_pages.test_pages import TINY, no_errors

MIB = 2**20


def test_the_strategy_picker_shows_titles_and_the_url_keeps_ids(app_test: Callable) -> None:
    at = app_test("pages/demos/compare.py",
                  query={**TINY, "strategy": "every-k:2,budget:dp:40%", "lang": "de"})
    no_errors(at)
    picker = at.multiselect(key="strategy")
    shown = list(picker.options)
    assert "jede 2. Schicht" in shown and "Budget (dp, 40%)" in shown
    assert not any(":" in option for option in shown)  # no id such as every-k:2
    assert picker.value == ["every-k:2", "budget:dp:40%"]
    assert at.query_params["strategy"] == "every-k:2,budget:dp:40%"


def test_a_size_column_has_one_unit() -> None:
    sizes = [900 * 1024, 1.2 * MIB, None]
    unit = column_unit(sizes)
    assert unit == "MiB"
    assert [format_bytes_in(s, unit) for s in sizes[:2]] == ["0.9 MiB", "1.2 MiB"]
    assert format_bytes_in(3 * 2**30, column_unit([3 * 2**30, 5 * MIB])) == "3.00 GiB"
    assert format_bytes_in(5 * MIB, "GiB", locale="de_DE") == "0,00 GiB"


def test_the_compare_table_uses_one_unit_per_column(app_test: Callable) -> None:
    """At a small model none's activations are above a MiB and every-layer's far under:
    '129.0 KiB' stood under '1.1 MiB' in one column."""
    at = app_test("pages/demos/compare.py",
                  query={**TINY, "seq": "64", "batch": "2", "strategy": "every-layer"})
    no_errors(at)
    table = at.table[0].value
    for column in ("Peak memory (vs none)", "Activations held (predicted)"):
        units = {cell.split(" (")[0].split()[-1] for cell in table[column]}
        units |= {part.split()[-1].rstrip(")") for cell in table[column]
                  for part in cell.split(" (")[1:] if "iB" in part}
        assert len(units) == 1, (column, list(table[column]))


def test_lesson_three_counts_forward_computations_on_their_own_axis() -> None:
    fig = k_curve_figure(16)
    memory = {t.yaxis for t in fig.data if "forward" not in t.name}
    counts = {t.yaxis for t in fig.data if "forward" in t.name}
    assert memory == {"y"} and counts == {"y2"}
    assert fig.layout.yaxis2.overlaying is None  # a panel of its own, not laid over memory
    assert fig.layout.yaxis2.title.text == "forward computations"
    assert fig.layout.yaxis.title.text == "memory (layer inputs)"
    top, bottom = fig.layout.yaxis.domain, fig.layout.yaxis2.domain
    assert bottom[1] < top[0]  # below the memory plot, apart


def _points() -> list[SimpleNamespace]:
    phases = [("forward", 0)] * 3 + [("forward", 1)] * 3 + [("loss", None)] * 2 + [
        ("recompute", 1)] * 2 + [("backward", 1)] * 3 + [("backward", 0)] * 3
    return [SimpleNamespace(index=i, op=f"aten.op{i}", phase=phase, layer=layer,
                            live_bytes=(i + 1) * MIB if i != 9 else 40 * MIB)
            for i, (phase, layer) in enumerate(phases)]


def test_timeline_peak_labels_sit_above_the_curve_and_under_the_phase_labels() -> None:
    frame = timeline_frame({"none": _points(), "every-layer": _points()})
    fig = timeline_figure(frame, facet=True)
    stars = [t for t in fig.data if t.mode == "markers+text"]
    assert all(t.textposition.startswith("top ") for t in stars)  # above the highest point
    assert stars[0].textposition == "top left"  # a late peak's label reads toward the middle
    top = 40
    bands = [t for t in fig.data if t.mode == "text"]
    assert all(y == top * timeline_figures.BAND_TOP for t in bands for y in t.y)
    assert fig.layout.yaxis.range[1] > top * timeline_figures.BAND_TOP  # inside the plot


def test_an_unknown_page_name_is_recognised(monkeypatch) -> None:
    from ui import navigation

    class Pages:
        intended_page_script_hash = ""
        intended_page_name = ""

    ctx = SimpleNamespace(pages_manager=Pages())
    monkeypatch.setattr(navigation, "get_script_run_ctx", lambda: ctx)
    for name, expected in (("no-such-page", "no-such-page"), ("compare", None), ("", None),
                           ("a/b", None), ("/why-memory/", None)):
        Pages.intended_page_name = name
        assert navigation.unknown_page_name() == expected, name
    Pages.intended_page_script_hash = "abc"  # a click in the app: a page that exists
    Pages.intended_page_name = "no-such-page"
    assert navigation.unknown_page_name() is None
