"""AppTest of /placement: the numbers the page shows (the table's cells, the sentences
under the chart, the chart's dots) are the measured ones: from a real run of a small model,
and from a stored result whose measured numbers differ from the predicted ones (so a page
that showed the prediction, or judged the budget by it, would fail)."""

from __future__ import annotations

import json
from collections.abc import Callable

from demos.measure import PAGE_REPEATS
from demos.placement_lab import PlacementRun, run
from i18n.units import MIB, format_bytes, format_bytes_in, format_flops
from reports.placement_figures import method_name, step_time_text
from serving import placement_jobs
from serving.jobs import Job, store_key
from serving.service import get_service
from serving.store import ResultStore
from serving.tickets import request_json
from tests.demo_pages.test_pages import no_errors, texts

SCRIPT = "pages/demos/placement.py"


def _job(layers: int, share: int) -> Job:
    config = placement_jobs.BASE.replace(layers=layers)
    return Job.make("placement", config, (), **placement_jobs.options("unequal", share))


def _column(at, name: str) -> list[str]:
    return list(at.table[0].value[name])


def _measured_dots(at, chart: int = 0) -> dict[str, float]:
    """Each method's measured dot on the chart (the page's `chart`-th): its name and its
    peak in MiB."""
    spec = json.loads(at.get("plotly_chart")[chart].proto.spec)
    return {
        trace["name"]: trace["y"][0]
        for trace in spec["data"]
        if trace.get("marker", {}).get("symbol") is None and trace.get("legendgroup")
    }


def test_the_page_shows_what_a_small_run_measured(app_test: Callable) -> None:
    at = app_test(SCRIPT, query={"layers": "4", "share": "60", "shape": "unequal"})
    no_errors(at)
    result = get_service().cached(_job(4, 60))
    assert isinstance(result, PlacementRun) and result.step_flops
    ran = [r for r in result.runs if r.ran]
    assert ran
    assert _column(at, "Peak (measured)") == [
        format_bytes_in(r.peak_bytes, "KiB") if r.ran else "–" for r in result.runs
    ]
    assert _column(at, "Recomputed (measured)") == [
        format_flops(r.recompute_flops) for r in result.runs
    ]
    dots = _measured_dots(at)
    for r in ran:
        assert dots[method_name(r.method)] == r.peak_bytes / MIB
        assert len(r.step_seconds) == PAGE_REPEATS["cpu"] and min(r.step_seconds) > 0
    assert _column(at, "Step time, median (middle half)") == [
        step_time_text(r) if r.ran else "–" for r in result.runs
    ]
    captions = texts(at, "caption")
    assert "Measured on this run on" in captions and "CPU time" in captions
    # torch's SAC solver's row: at 60% of 4 layers even its least need does not fit
    sac = result.run_of("sac")
    verdicts = dict(zip(_column(at, "Method"), _column(at, "Budget"), strict=True))
    assert not sac.ran and verdicts[method_name("sac")] == "nothing fits"


def _stored_with_measured_apart() -> tuple[Job, PlacementRun]:
    """The page's default job with a result whose measured numbers are the predicted ones
    moved apart, every layer measured over the budget it was predicted to keep."""
    job = _job(placement_jobs.BASE.layers, placement_jobs.DEFAULT_BUDGET)
    result = run(placement_jobs.BASE, "unequal", placement_jobs.DEFAULT_BUDGET / 100, measure=False)
    result.step_flops = 1e9
    for i, r in enumerate(result.runs):
        if r.error is None:
            r.peak_bytes = r.predicted_peak_bytes - 3 * 1024 * (i + 1)
            r.recompute_flops = r.predicted_recompute_flops + 1e6 * (i + 1)
            r.step_seconds = [0.011, 0.010, 0.013, 0.012, 0.030]
    every = result.run_of("every")
    assert every.within_budget  # predicted within it
    every.peak_bytes = result.budget_bytes + 50 * 1024
    return job, result


def _store(job: Job, result: PlacementRun):
    """The result stored for the job, as the demo service stores a run: the service."""
    service = get_service()
    ResultStore().put(
        store_key(job, service.device),
        "test",
        result,
        1.0,
        1.0,
        kind=job.kind,
        device=service.device_label,
        request=request_json(job),
    )
    return service


def test_the_page_shows_the_measured_numbers_not_the_predicted_ones(app_test: Callable) -> None:
    job, result = _stored_with_measured_apart()
    service = _store(job, result)
    started = service.runs_started
    at = app_test(SCRIPT)  # the page's defaults
    no_errors(at)
    assert service.runs_started == started  # served from the store, nothing run
    assert _column(at, "Peak (measured)") == [
        format_bytes_in(r.peak_bytes, "KiB") if r.ran else "–" for r in result.runs
    ]
    assert _column(at, "Peak (predicted)") == [
        format_bytes_in(r.predicted_peak_bytes, "KiB") if r.ran else "–" for r in result.runs
    ]
    assert _column(at, "Peak (measured)") != _column(at, "Peak (predicted)")
    segments = dict(zip(_column(at, "Method"), _column(at, "Checkpointed segments"), strict=True))
    assert segments[method_name("sqrt")] == "0–2, 3–5, 6–7"  # √8: segments of 3 layers
    assert segments[method_name("none")] == "none"
    assert segments[method_name("sac")] == "each layer, selective"
    sac = result.run_of("sac")
    assert _measured_dots(at)[method_name("sac")] == sac.peak_bytes / MIB
    share = f"{sac.share:.1%}"
    assert f"saving the ops torch's solver picks within {share} of the block's" in (
        lines := texts(at, "markdown")
    )
    times = dict(
        zip(_column(at, "Method"), _column(at, "Step time, median (middle half)"), strict=True)
    )
    assert times[method_name("every")] == "12.0 ms (11.0 ms–13.0 ms)"  # quartiles, inclusive
    verdicts = dict(zip(_column(at, "Method"), _column(at, "Budget"), strict=True))
    assert verdicts[method_name("every")] == "✗ over"
    assert verdicts[method_name("optimal")] == "✓ within"
    best = result.run_of("optimal")
    assert f"recomputes {format_flops(best.recompute_flops)} (" in lines
    over = format_bytes(every_peak := result.run_of("every").peak_bytes)
    assert f"**{method_name('every')}**: " in lines
    assert f"peaks at {over}, " in lines and every_peak > result.budget_bytes
    extra = result.run_of("every").recompute_flops - best.recompute_flops
    assert f"recomputes {format_flops(extra)} more than the optimum" in lines
    assert "Over the budget, measured: " in lines and method_name("every") in lines


def test_lesson_6_draws_the_stored_run_of_the_page(app_test: Callable) -> None:
    """Lesson 6's {{measured:placement}} is the page's default run: stored, it is drawn
    (the same dots), not run again."""
    job, result = _stored_with_measured_apart()
    service = _store(job, result)
    started = service.runs_started
    at = app_test("pages/lessons/cost_and_correctness.py")
    no_errors(at)
    assert service.runs_started == started
    dots = _measured_dots(at, -1)  # the lesson's last chart, after a step's cost
    for r in result.runs:
        if r.ran:
            assert dots[method_name(r.method)] == r.peak_bytes / MIB
