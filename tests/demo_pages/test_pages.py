"""AppTest: each demo page renders at a tiny config (set through the URL query, as a
shared link would) and reacts to a widget change. The engine runs for real."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from memory.strategies import parse_strategies

TINY = {"layers": "2", "hidden": "64", "heads": "2", "seq": "32", "batch": "1", "vocab": "256"}


def texts(at, kind: str) -> str:
    return "\n".join(str(element.value) for element in getattr(at, kind))


def no_errors(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def go_ahead(at, timeout: float = 120):
    """A run estimated past the runner's threshold on a slow or busy machine asks for a
    click first (tests/demo_pages/test_runner.py checks that): give it, as a learner
    would."""
    if at.button and not at.table and not at.get("plotly_chart"):
        at.button[0].click().run(timeout=timeout)
    return at


def charts(at) -> list:
    return at.get("plotly_chart")


def caption_says_measured(at) -> None:
    assert "Measured on this run on" in texts(at, "caption")


def test_compare_renders_by_default_and_follows_a_slider(app_test: Callable) -> None:
    at = app_test("pages/demos/compare.py", query=TINY)
    no_errors(at)
    table = at.table[0].value
    # the default choice
    assert list(table["Strategy"]) == ["no checkpoints", "every layer", "every √N layers"]
    assert table["Same gradients"].iloc[0] == "baseline"
    assert table["Same gradients"].iloc[1].startswith("✓")
    assert len(charts(at)) == 3
    caption_says_measured(at)
    # "peak memory" leaves the parameters out, the stacked chart has them: both say so.
    assert "counted above the parameters" in texts(at, "caption")
    assert "above the parameters" in at.metric[0].proto.help
    assert at.get("download_button")
    before = table["Peak memory (vs baseline)"].tolist()

    at.slider(key="layers").set_value(4).run()
    no_errors(at)
    assert at.query_params["layers"] == "4"
    assert at.table[0].value["Peak memory (vs baseline)"].tolist() != before


def test_compare_headline_says_same_when_nothing_is_saved(app_test: Callable) -> None:
    """On the smallest model the peak is at the embedding's backward for every strategy:
    the headline used to read "-0% vs none" with a green arrow."""
    at = app_test("pages/demos/compare.py",
                  query={"layers": "1", "hidden": "64", "heads": "1", "seq": "32", "batch": "1",
                         "vocab": "256"})
    no_errors(at)
    delta = at.metric[0].proto.delta
    assert delta.startswith("same as without checkpointing (") and "0%" not in delta


def test_model_sliders_come_in_reading_order(app_test: Callable) -> None:
    """Row by row, so a phone (where columns stack) shows them in field order, not
    layers, batch, hidden, vocab, ... column by column."""
    at = app_test("pages/demos/compare.py", query=TINY)
    assert [s.key for s in at.slider] == ["layers", "hidden", "heads", "seq", "batch", "vocab"]


def test_compare_with_every_strategy_cleared_says_what_to_do(app_test: Callable) -> None:
    at = app_test("pages/demos/compare.py", query=TINY)
    at.multiselect(key="strategy").unselect("every-layer").unselect("sqrt").run()
    no_errors(at)
    assert list(at.table[0].value["Strategy"]) == ["no checkpoints"]
    assert "pick a strategy above" in texts(at, "info")


def test_compare_measures_the_strategies_a_link_names(app_test: Callable) -> None:
    at = app_test("pages/demos/compare.py",
                  query={**TINY, "strategy": "sqrt,every-k:2,selective:save-attention"})
    no_errors(at)
    table = at.table[0].value
    assert list(table["Strategy"]) == ["no checkpoints", "every 2 layers", "every √N layers",
                                       "selective: save attention"]
    assert all(mark.startswith("✓") for mark in table["Same gradients"].iloc[1:])
    at.multiselect(key="strategy").unselect("sqrt").run()
    no_errors(at)
    assert at.query_params["strategy"] == "every-k:2,selective:save-attention"


def test_compare_warns_about_a_bad_link_and_clamps_it(app_test: Callable) -> None:
    at = app_test("pages/demos/compare.py",
                  query={**TINY, "layers": "abc", "batch": "99999", "strategy": "sqrt,bogus"})
    no_errors(at)
    warnings = texts(at, "warning")
    assert "?layers='abc' is not a number; using 8" in warnings
    assert "?batch='99999' is outside the range 1–8" in warnings
    assert "'bogus' is not available" in warnings
    assert at.slider(key="batch").value == 8
    assert at.multiselect(key="strategy").value == ["sqrt"]
    assert at.query_params["layers"] == "8" and at.query_params["strategy"] == "sqrt"


def test_compare_shows_an_invalid_config_and_keeps_serving(app_test: Callable) -> None:
    at = app_test("pages/demos/compare.py", query={**TINY, "heads": "3"})
    assert not at.exception
    assert "divisible by heads=3" in texts(at, "error")
    at.slider(key="heads").set_value(4).run()
    no_errors(at)
    assert at.table


def test_timeline_renders_and_switches_layout(app_test: Callable) -> None:
    at = app_test("pages/demos/timeline.py", query=TINY)
    no_errors(at)
    assert len(charts(at)) == 1
    caption_says_measured(at)
    assert "peak" in texts(at, "markdown")
    at.radio(key="view").set_value("overlaid").run()
    no_errors(at)
    assert at.query_params["view"] == "overlaid"


def test_curves_render_a_sweep(app_test: Callable) -> None:
    query = {k: v for k, v in TINY.items() if k != "batch"} | {"sweep": "batch"}
    at = app_test("pages/demos/curves.py", query=query, timeout=120)
    no_errors(at)
    assert len(charts(at)) == 1
    caption_says_measured(at)


def test_curves_switch_to_the_segment_sweep(app_test: Callable) -> None:
    at = app_test("pages/demos/curves.py", query={**TINY, "layers": "4", "sweep": "seq"},
                  timeout=120)
    no_errors(at)
    at.radio(key="sweep").set_value("segment").run()
    no_errors(at)
    assert "U-shaped" in texts(at, "markdown") or charts(at)
    assert at.query_params["sweep"] == "segment"


@pytest.mark.heavy
def test_what_fits_renders_and_follows_the_budget(app_test: Callable) -> None:
    query = {**TINY, "budget": "16"}
    at = go_ahead(app_test("pages/demos/what_fits.py", query=query, timeout=120))
    no_errors(at)
    table = at.table[0].value
    assert list(table["Strategy"])[:2] == ["no checkpoints", "every layer"]
    before = table.iloc[:, 2].tolist()
    at.slider(key="budget").set_value(32).run()
    no_errors(at)
    assert at.table[0].value.iloc[:, 2].tolist() != before

    at.radio(key="grow").set_value("seq").run()  # the seq slider goes, batch comes
    no_errors(at)
    assert "Largest sequence length (confirmed)" in at.table[0].value.columns
    assert [s.key for s in at.slider if s.key in ("seq", "batch")] == ["batch"]
    at.radio(key="grow").set_value("batch").run()  # seq comes back with the link's value
    no_errors(at)
    assert at.slider(key="seq").value == 32


def test_what_fits_says_why_nothing_fits(app_test: Callable) -> None:
    """The biggest model in the smallest budget: every row used to be blank, unexplained."""
    query = {"layers": "24", "hidden": "512", "heads": "16", "vocab": "32768", "seq": "1024",
             "budget": "16"}
    at = app_test("pages/demos/what_fits.py", query=query, timeout=120)
    if at.button and not at.table:  # the runner asks before a long search: go ahead
        at.button[0].click().run()
    no_errors(at)
    assert "Nothing fits" in texts(at, "warning")
    captions = texts(at, "caption")
    for strategy in ("no checkpoints", "every layer", "selective: save the matmuls"):
        assert f"**{strategy}**: even batch 1 needs" in captions
    assert set(at.table[0].value["Largest batch (confirmed)"]) == {"–"}
    assert not charts(at)  # no empty axes


def test_what_fits_when_only_checkpointing_fits(app_test: Callable) -> None:
    """none does not fit, every-layer does: the page used to crash on the missing method
    (NaN) in its caption, and the chart said "nan×"."""
    query = {"layers": "4", "hidden": "128", "heads": "4", "vocab": "8192", "seq": "512",
             "budget": "64"}  # predicted at batch 1: none 75.8 MiB, every layer 60.8
    at = go_ahead(app_test("pages/demos/what_fits.py", query=query, timeout=120))
    no_errors(at)
    table = at.table[0].value
    assert table["Largest batch (confirmed)"].tolist()[:2] == ["–", "1"]
    assert "**no checkpoints**: even batch 1 needs" in texts(at, "caption")
    caption_says_measured(at)


def test_same_result_renders_and_follows_the_steps(app_test: Callable) -> None:
    query = {"layers": "2", "hidden": "64", "seq": "32", "batch": "2", "steps": "20"}
    at = app_test("pages/demos/same_result.py", query=query, timeout=120)
    no_errors(at)
    differences = at.table[0].value
    assert list(differences["Strategy"]) == ["every layer", "selective: save the matmuls"]
    # Same weights, data and dropout masks: checkpointing reproduces none's losses.
    assert list(differences["Bitwise equal at every step"]) == ["✓ yes", "✓ yes"]
    at.slider(key="steps").set_value(30).run()
    no_errors(at)
    assert at.query_params["steps"] == "30"


def test_home_teaser_measures_once(app_test: Callable) -> None:
    at = app_test("pages/home.py", timeout=120)
    no_errors(at)
    labels = [m.label for m in at.metric]
    assert "Peak memory saved by checkpointing every layer" in labels
    caption_says_measured(at)


def test_switching_demos_keeps_each_page_s_own_settings(app_test: Callable) -> None:
    """Two pages share the keys `layers`, `strategy`...: arriving on a page must not leave
    its sliders at their minimum (the old page's stale state used to block the seeding)."""
    at = app_test("app.py", timeout=120)
    at.switch_page("pages/demos/compare.py")
    for key, value in TINY.items():
        at.query_params[key] = value
    at.run()
    no_errors(at)
    assert at.slider(key="layers").value == 2
    at.switch_page("pages/demos/timeline.py").run()
    no_errors(at)
    layers = at.slider(key="layers")
    assert layers.value not in (layers.min, None), "slider reset to its minimum"
    assert at.multiselect(key="strategy").value, "strategy choice lost"


def test_compare_says_where_each_peak_is_and_what_sets_it(app_test: Callable) -> None:
    """At the old default five strategies showed the same peak and nothing said
    why. Each strategy's peak is now located and its largest part named, from the run."""
    at = app_test("pages/demos/compare.py", query={**TINY, "strategy": "every-layer,sqrt"})
    no_errors(at)
    markdown = texts(at, "markdown")
    assert "Where the peak is, and what sets it" in markdown
    for strategy in ("no checkpoints", "every layer", "every √N layers"):
        assert f"**{strategy}**: peak " in markdown
    assert markdown.count("Largest part:") == 3
    # At this tiny size the gradients set every peak alike: the page says so.
    assert "reach the same peak" in texts(at, "info")


def test_compare_at_its_default_shows_strategies_that_differ(app_test: Callable) -> None:
    at = app_test("pages/demos/compare.py", query={"strategy": "every-layer,every-k:2,sqrt"})
    no_errors(at)
    peaks = list(at.table[0].value["Peak memory (vs baseline)"])
    assert len(set(peaks)) == 4, peaks
    assert "reach the same peak" not in texts(at, "info")
    assert "checkpointing lowers exactly this part" in texts(at, "markdown")
    # A step-time delta is never green: red (slower beyond the spread) or grey (noise).
    from streamlit.proto.Metric_pb2 import Metric

    time_metric = at.metric[1]
    assert time_metric.proto.color != Metric.MetricColor.GREEN
    if "within noise" in time_metric.proto.delta:
        assert time_metric.proto.color == Metric.MetricColor.GRAY


def test_timeline_at_its_default_shows_the_sawtooth_and_names_the_peak(app_test: Callable
                                                                        ) -> None:
    """The promised sawtooth was not visible at the defaults (4 layers)."""
    from memory.config import demo_default

    at = app_test("pages/demos/timeline.py", timeout=120)
    no_errors(at)
    figure = charts(at)[0].proto.spec
    assert '"peak (' in figure  # the star's label names the op at the peak
    layers = demo_default("cpu").layers
    assert at.slider(key="layers").value == layers >= 8
    rows = at.get("download_button")
    assert rows
    from demos.measure import compare

    comp = compare(demo_default("cpu"), parse_strategies("every-layer"), device="cpu",
                   timeline=True,
                   time_steps=False)
    import pandas as pd

    frame = pd.DataFrame([vars(p) for p in comp.results[0].timeline])
    assert sawtooth_teeth(frame) == layers  # one tooth per layer rebuilt in backward


def test_same_result_does_not_promise_memory_it_does_not_show(app_test: Callable) -> None:
    """The page was titled "Same result, less memory" and showed no memory."""
    query = {"layers": "2", "hidden": "64", "seq": "32", "batch": "2", "steps": "20"}
    at = app_test("pages/demos/same_result.py", query=query, timeout=120)
    no_errors(at)
    assert "less memory" not in at.title[0].value
    assert "identical to the last bit" in texts(at, "caption")


@pytest.mark.heavy
def test_what_fits_says_when_the_search_reaches_its_cap(app_test: Callable) -> None:
    """What-fits reached the 8,192 cap on the sequence length without saying so."""
    query = {"layers": "1", "hidden": "64", "heads": "1", "vocab": "256", "batch": "1",
             "grow": "seq", "budget": "512"}
    at = app_test("pages/demos/what_fits.py", query=query, timeout=300)
    if at.button and not at.table:
        at.button[0].click().run(timeout=300)
    no_errors(at)
    assert "the search stops at the largest sequence length the engine allows, 8,192" in texts(
        at, "info")


def test_compare_opens_with_strategies_whose_peaks_differ(app_test: Callable) -> None:
    """At its default the page compared none with every-layer alone, so a learner
    saw no difference between strategies. It now opens with every-layer and sqrt."""
    at = app_test("pages/demos/compare.py")
    no_errors(at)
    peaks = list(at.table[0].value["Peak memory (vs baseline)"])
    assert len(peaks) == 3 and len(set(peaks)) == 3, peaks


def sawtooth_teeth(part) -> int:
    """How many layers are recomputed in a strategy's backward: each one a tooth of the
    sawtooth (memory climbs while a layer is rebuilt, falls through its backward)."""
    recomputed = part[part["phase"] == "recompute"]["layer"].dropna()
    return int(recomputed.nunique())
