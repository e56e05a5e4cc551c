"""AppTest of /compiler-budget: a measured sweep in the result store is served at once
(chart, end points, what the compiler changes, in three languages); a cold request says
how long it will take and starts nothing until asked."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import numpy as np
import pytest

from serving.jobs import store_key
from serving.service import get_service
from serving.store import ResultStore
from serving.tickets import request_json
from tests.compiler_budget_data import PAGE_QUERY, SWEEP_GROUP, tiny_job, tiny_result
from tests.demo_pages.test_pages import no_errors, texts
from tests.lessons.test_lesson_pages_i18n import page_text
from tools.translations import untranslated_on_page

pytestmark = SWEEP_GROUP

SCRIPT = "pages/demos/compiler_budget.py"


def _values(data: list | dict) -> list[float]:
    """A trace's numbers as plotly writes them: a list, or typed base64 ("bdata")."""
    if isinstance(data, list):
        return [float(v) for v in data]
    return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"]).tolist()


def _store_tiny_sweep() -> None:
    """The tiny job, really measured, stored as the service stores a finished run."""
    job, frame = tiny_job(), tiny_result()
    service = get_service()
    ResultStore().put(store_key(job, service.device), "test", frame, 1.0, 1.0,
                      kind=job.kind, device=service.device_label, request=request_json(job))


@pytest.mark.compile
@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_a_stored_sweep_is_served_at_once(app_test: Callable, code: str) -> None:
    frame = tiny_result()  # measured before the page runs: the page itself only reads
    at = app_test(SCRIPT, query={"lang": code}, timeout=30)  # sets this test's DATA_DIR
    _store_tiny_sweep()
    started = get_service().runs_started
    at = app_test(SCRIPT, query={**PAGE_QUERY, "lang": code}, timeout=30)
    no_errors(at)
    assert get_service().runs_started == started  # nothing measured again
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    spec = json.loads(charts[0].proto.spec)
    # the budget curve's end points are the measured ones: 0 and 1, in MiB
    curve = next(trace for trace in spec["data"] if trace.get("text") is not None)
    assert curve["text"] == ["0", "1"]
    x = _values(curve["x"])
    least, full = sorted(frame.loc[frame["kind"] == "budget", "saved_bytes"])
    assert x[0] == pytest.approx(least / 2**20)
    assert x[-1] == pytest.approx(full / 2**20)
    table = at.dataframe[0].value
    assert len(table) == len(frame)
    if code == "en":
        assert "private" in texts(at, "markdown")
        assert "At budget 1 the compiler kept" in texts(at, "caption")
        assert "Measured on this run on" in texts(at, "caption")
    else:
        text = "\n".join([page_text(at), " ".join(map(str, table.columns))])
        assert untranslated_on_page(text, code) == []


def test_a_cold_request_says_how_long_and_waits_for_a_click(app_test: Callable) -> None:
    started = get_service().runs_started
    at = app_test(SCRIPT, query={"layers": "2", "hidden": "64", "budgets": "1,0.5"})
    no_errors(at)
    assert "Not measured yet" in texts(at, "info")
    assert at.button(key="measure-budget").label.startswith("Measure now (~")
    assert not at.get("plotly_chart")
    assert get_service().runs_started == started


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_lesson_4_links_its_compiler_section_to_the_live_view(app_test: Callable,
                                                              code: str) -> None:
    at = app_test("pages/lessons/language_models.py", query={"lang": code})
    no_errors(at)
    text = texts(at, "markdown")
    assert "activation_memory_budget" in text
    assert "/compiler-budget" in text


def test_the_start_up_warm_up_never_lists_it(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path) -> None:
    """Collecting the common views' runs (ui.server) opens the page with the runner in
    collect mode: it asks for nothing and estimates nothing (no service is started)."""
    from streamlit.testing.v1 import AppTest

    from serving import service as service_module
    from ui import demo_runner
    from ui.navigation import ROOT

    monkeypatch.setenv(demo_runner.COLLECT_ENV, "1")
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    old = service_module.set_service(None)
    try:
        demo_runner.collected.clear()
        at = AppTest.from_file(str(ROOT / SCRIPT), default_timeout=30).run()
        no_errors(at)
        assert demo_runner.collected == []
        assert service_module._service is None
    finally:
        service_module.set_service(old)


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_the_defaults_show_the_stored_example_marked_as_such(app_test: Callable,
                                                             code: str) -> None:
    """A fresh server has not compiled anything: at its defaults the page shows the
    benchmark's own sweep, says where and when it was measured, and still offers to
    measure here; nothing is started."""
    from serving.budget_example import _examples

    (config, meta, points), *_ = _examples()
    started = get_service().runs_started
    at = app_test(SCRIPT, query={"lang": code})
    no_errors(at)
    assert get_service().runs_started == started
    warning = texts(at, "warning")
    assert meta["date"] in warning and meta["torch"] in warning
    assert len(at.get("plotly_chart")) == 1
    assert len(at.dataframe[0].value) == len(points)
    assert at.button(key="measure-budget").label
    if code == "en":
        assert "Stored example, not measured on this server" in warning
        assert "Stored example from the project's benchmark" in texts(at, "caption")
        assert "Measured on this run" not in texts(at, "caption")
    else:
        assert untranslated_on_page(page_text(at), code) == []


def test_a_busy_server_still_shows_the_stored_example(app_test: Callable, monkeypatch) -> None:
    """The estimate follows this server's measured speed: on a busy one the defaults are
    over the longest run a demo may make. Measuring is refused, the example still shown."""
    from ui import demo_runner

    monkeypatch.setattr(demo_runner, "estimated_seconds",
                        lambda job: demo_runner.MAX_SECONDS + 60)
    at = app_test(SCRIPT)
    assert not at.exception
    assert "longer than a demo may hold a shared server" in texts(at, "error")
    assert "Stored example, not measured on this server" in texts(at, "warning")
    assert len(at.get("plotly_chart")) == 1
    assert not [button for button in at.button if button.key == "measure-budget"]
