"""A strategy's text is parsed once, where it comes in (the command line, a job or result
read back from JSON, a table's "strategy" column); everything inside takes and passes
`StrategySpec` records, refuses text, and the store's keys keep their text."""

from __future__ import annotations

import ast
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from demos.device import detect_device
from memory import strategies, theory
from memory.config import ModelConfig
from memory.strategies import PlanInputs, StrategySpec, parse_strategies, parse_strategy

ROOT = Path(__file__).resolve().parents[2]
TINY = ModelConfig(layers=2, hidden=32, heads=2, seq_len=8, batch=1, vocab=64)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """Every call of memory.strategies.parse_strategy from here on, wherever a module
    imported it: (the text, the calling module and function)."""
    original = strategies.parse_strategy
    calls: list[tuple[str, str]] = []

    def counting(text: str) -> StrategySpec:
        caller = sys._getframe(1)
        while caller.f_code.co_name.startswith("<") and caller.f_back is not None:
            caller = caller.f_back  # a comprehension's own frame: its function's
        calls.append((text, f"{caller.f_globals.get('__name__')}.{caller.f_code.co_name}"))
        return original(text)

    for module in list(sys.modules.values()):
        if getattr(module, "parse_strategy", None) is original:
            monkeypatch.setattr(module, "parse_strategy", counting)
    strategies.spec_of_label.cache_clear()
    yield calls
    strategies.spec_of_label.cache_clear()


def _draw_everything(comparison) -> None:
    """Every table, sentence, figure and download the compare and timeline pages make of a
    comparison, in two languages."""
    from reports import compare_figures, compare_table, memory_snapshot, peak_notes, report, timing
    from reports.timeline_figures import timeline_figure, timeline_frame

    results = comparison.results
    for lang in ("en", "de"):
        compare_table.results_table(results, lang, "cpu")
        compare_table.cost_table(results, lang, "cpu", "uncounted")
        compare_table.timing_note(results, lang)
        timing.overhead_note(results, lang)
        timing.wall_cpu_note(results, comparison.busy(), lang)
        report.baseline_and_best(results)
        [report.label(r, lang) for r in results]
        [peak_notes.peak_sentence(r, lang) for r in results]
        peak_notes.shared_peak_notes(results, lang)
        compare_figures.peak_and_time_figure(results, lang)
        compare_figures.breakdown_figure(results, lang)
        compare_figures.breakdown_caption(results, lang)
        compare_figures.activation_theory_figure(results, report.korthikanti(comparison.config),
                                                 lang)
        compare_figures.activation_caption(results, lang)
        frame = timeline_frame({r.spec: r.timeline for r in results if r.timeline}, lang)
        timeline_figure(frame, lang=lang)
        report.csv_frame(comparison.to_frame(), lang)
    memory_snapshot.comparison_snapshot(comparison)


def _by_edge(parses: list[tuple[str, str]]) -> dict[str, list[str]]:
    edges: dict[str, list[str]] = {}
    for text, caller in parses:
        edges.setdefault(caller, []).append(text)
    return edges


def test_a_compare_request_parses_each_strategy_once_at_each_edge(parses) -> None:
    """From the command line's text to every figure: three strategies, three parses; the
    job, the engine, its result and the reports pass the records on. Read back from the
    store (JSON), each is parsed once more, there. The timeline's table names its
    strategies by their text: each text looked up once. Before, one compare page request
    entered parse_strategy about 250 times."""
    from serving.jobs import Job, decode_result, encode_result

    names = ["none", "every-layer", "sqrt"]
    specs = parse_strategies(",".join(names))  # the edge: --strategies
    job = Job.make("compare", TINY, specs, repeats=1, timeline=True, time_steps=True)
    comparison = job.merge([job.run_step(i, "cpu", None) for i in range(job.step_count())])
    assert [r.spec for r in comparison.results] == specs
    _draw_everything(comparison)
    job.work("cpu"), job.memory_bytes("cpu")  # the service's estimates
    stored = decode_result(encode_result(comparison))  # the store's edge
    assert [r.spec for r in stored.results] == specs
    _draw_everything(stored)
    again = Job.from_request(json.loads(json.dumps(job.request())))  # a job read back
    assert again == job
    assert _by_edge(parses) == {"memory.strategies.parse_strategies": names,
                                "serving.jobs.decode_result": names,
                                "serving.jobs.from_request": names,
                                "memory.strategies.spec_of_label": names}, parses


def test_a_sweep_fits_and_training_table_looks_each_text_up_once(parses) -> None:
    """A results table carries the canonical text; the reports title and colour it through
    spec_of_label, which parses each text once, however many rows and figures."""
    import pandas as pd

    from reports.figure_style import colour_of
    from reports.fits_and_loss_figures import loss_figure
    from reports.fits_and_loss_tables import loss_differences, loss_table
    from reports.report import label_of

    frame = pd.DataFrame({"step": [0, 1] * 3, "loss": [1.0, 0.5] * 3,
                          "strategy": ["none"] * 2 + ["every-layer"] * 2 + ["mystery"] * 2})
    for lang in ("en", "de", "vi"):
        loss_figure(frame, lang)
        loss_table(loss_differences(frame), lang)
    assert label_of("every-layer", "de") == "jede Schicht"
    assert label_of("mystery") == "mystery" and colour_of("mystery") == colour_of("mystery")
    assert _by_edge(parses) == {"memory.strategies.spec_of_label": [
        "none", "every-layer", "mystery"]}, parses


# The compare page with its engine in this process (the worker process's place), so that
# every parse from the query string to the figures is counted.
PAGE = """
import runpy, sys
sys.path.insert(0, {root!r})
from demos.device import detect_device
from serving import service


class InProcess:
    def start(self): pass
    def stop(self): pass
    def call(self, job, index, *, limit_bytes=None, on_partial=None, **_):
        return job.run_step(index, "cpu", limit_bytes, partial=on_partial)


svc = service.DemoService(detect_device("cpu"), worker=InProcess(), use_store=False)
service.set_service(svc.start(worker=False))
try:
    runpy.run_path({page!r}, run_name="__main__")
    import streamlit as st
    st.write("strategies run: " + ", ".join(repr(s) for s in svc.last_job.strategies))
finally:
    service.set_service(None)
    svc.stop()
"""


def test_the_compare_page_parses_no_strategy_text(parses, monkeypatch) -> None:
    """?strategy=every-layer,sqrt to the table and the charts: the picker looks the query's
    text up among the records it offers, and the job, the engine and the figures pass
    those records on; nothing parses text (the worker process receives the records
    pickled)."""
    from streamlit.testing.v1 import AppTest

    from serving.service import DemoService

    submit = DemoService.submit

    def remembering(self, job, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        self.last_job = job
        return submit(self, job, *args, **kwargs)

    monkeypatch.setattr(DemoService, "submit", remembering)
    at = AppTest.from_string(PAGE.format(root=str(ROOT), page=str(ROOT / "pages/demos/compare.py")),
                             default_timeout=300)
    for name, value in {"layers": "2", "hidden": "64", "heads": "2", "seq": "32", "batch": "1",
                        "vocab": "256", "strategy": "every-layer,sqrt"}.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    assert list(at.table[0].value["Strategy"]) == ["no checkpoints", "every layer",
                                                   "every √N layers"]
    assert len(at.get("plotly_chart")) == 3
    assert "StrategySpec(name='sqrt'" in at.markdown[-1].value
    assert parses == []


def _refusals() -> list[tuple[str, Callable[[], object]]]:
    from demos import bench, fit, measure, sweep, training
    from serving.jobs import Job

    inputs = PlanInputs(layers=2, block_bytes=100, input_bytes=10)
    return [
        ("theory.plan_for", lambda: theory.plan_for(TINY, "none")),
        ("theory.predicted_activation_bytes",
         lambda: theory.predicted_activation_bytes(TINY, "none")),
        ("theory.predicted_peak_bytes", lambda: theory.predicted_peak_bytes(TINY, "none")),
        ("theory.predicted_peak_moments", lambda: theory.predicted_peak_moments(TINY, "none")),
        ("theory.step_flops", lambda: theory.step_flops(TINY, "every-layer")),
        ("theory.predicted_peak_where",
         lambda: theory.predicted_peak_where(TINY, "every-layer")),
        ("theory.counted_flops", lambda: theory.counted_flops(TINY, "every-layer")),
        ("theory.cpu_seconds", lambda: theory.cpu_seconds([(TINY, "none", 1)])),
        ("strategies.title", lambda: strategies.title("every-layer")),
        ("strategies.colour", lambda: strategies.colour("every-layer")),
        ("strategies.describe", lambda: strategies.describe("every-layer")),
        ("strategies.plan", lambda: strategies.plan("every-layer", inputs)),
        ("strategies.parse_strategy of a record",
         lambda: parse_strategy(StrategySpec("none"))),  # type: ignore[arg-type]
        ("measure.compare", lambda: measure.compare(TINY, ["none"], device="cpu")),
        ("fit.predicted_total", lambda: fit.predicted_total(TINY, "none")),
        ("fit.largest_fitting",
         lambda: fit.largest_fitting(TINY, "none", "batch", 2**20, device="cpu")),
        ("sweep.sweep", lambda: sweep.sweep(TINY, "layers", [1], ["none"], device="cpu")),
        ("training.train_losses",
         lambda: training.train_losses(TINY, ["none"], 1, device="cpu")),
        ("bench.tracker_overhead", lambda: bench.tracker_overhead(TINY, "none", 1)),
        ("Job.make", lambda: Job.make("compare", TINY, ["none"])),
    ]


@pytest.mark.parametrize("name", [name for name, _ in _refusals()])
def test_inside_a_strategy_as_text_is_a_type_error(name: str) -> None:
    call = dict(_refusals())[name]
    with pytest.raises(TypeError, match="StrategySpec|takes text"):
        call()


def test_no_function_takes_a_strategy_as_text_or_record() -> None:
    """No annotation in the app offers `str | StrategySpec`: a function takes records, or
    (at an edge) text."""
    unions = []
    for path in sorted(ROOT.glob("*/**/*.py")):
        if path.parts[len(ROOT.parts)] in {".venv", "tests", "node_modules"}:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for arg in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]:
                    text = ast.unparse(arg.annotation) if arg.annotation else ""
                    if "StrategySpec" in text and "str" in text.replace("StrategySpec", ""):
                        unions.append(f"{path.relative_to(ROOT)}:{node.lineno} {text}")
    assert not unions, unions


def test_a_record_is_checked_when_made_and_equals_its_parsed_text() -> None:
    assert StrategySpec("selective") == parse_strategy("selective")
    assert StrategySpec("budget", budget_method="dp", budget_share=0.4) == parse_strategy(
        "budget:dp:40%")
    for bad in (dict(name="every-k"), dict(name="every-k", k=0), dict(name="bogus"),
                dict(name="selective", policy="save-nothing"),
                dict(name="budget", budget_share=2.0)):
        with pytest.raises(ValueError):
            StrategySpec(**bad)


def test_the_pages_and_the_store_keep_the_strategies_text() -> None:
    """The URL's strategy names and the result store's keys are the records' canonical
    text, exactly the text the pages sent before: a running server's stored results and
    every shared link stay valid."""
    from serving.jobs import Job, code_version, store_key

    assert [spec.label for spec in strategies.examples("cuda")] == [
        "every-layer", "every-k:2", "every-k:4", "sqrt", "selective:save-matmuls",
        "selective:save-attention", "selective:save-all-but-attention", "budget:dp:40%",
        "budget:greedy:40%", "offload"]
    device = detect_device("cpu")
    job = Job.make("compare", TINY, parse_strategies("none,every-layer,budget:dp:40%"),
                   repeats=5, timeline=False, time_steps=True)
    request = {"kind": "compare", "config": TINY.as_dict(),
               "strategies": ["none", "every-layer", "budget:dp:40%"],
               "options": {"repeats": 5, "time_steps": True, "timeline": False}}
    text = json.dumps({"request": request, "device": [device.kind, device.name],
                       "torch": device.torch_version, "code": code_version()},
                      sort_keys=True, separators=(",", ":"))
    assert job.request() == request
    assert store_key(job, device) == hashlib.sha256(text.encode()).hexdigest()
    sweep = Job.make("sweep", TINY, [], vary="k", values=(1, 2), repeats=1)
    assert [s for _, s, _ in sweep.step_runs(1)] == [StrategySpec("every-k", k=2)]
