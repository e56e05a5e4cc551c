"""ui.demo_runner: the queue notice, the per-config cache, the guard and the
confirmation before a long run (the tables are tested in tests/demos/test_report.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT
from ui import demo_runner


def _script_app(body: str) -> AppTest:
    at = AppTest.from_string(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n{body}",
                             default_timeout=60)
    return at.run()


def test_a_learner_behind_another_run_is_told_how_many_are_ahead(tmp_path) -> None:
    at = _script_app(f"""
import os
os.environ["DATA_DIR"] = {str(tmp_path)!r}
import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from serving import service
from tests.runtime.conftest import CPU, FakeWorker, tiny_compare
from ui import demo_runner

svc = service.DemoService(CPU, worker=FakeWorker(lambda job, i: 1.0), use_store=False).start()
service.set_service(svc)
other = svc.submit(tiny_compare(seed=1), "other learner")
seen = []
original = DeltaGenerator.info
DeltaGenerator.info = lambda self, body, *a, **k: (seen.append(body), original(self, body))[1]
try:
    result = demo_runner._run(tiny_compare(seed=2), "test")
    st.write("ran after:", " | ".join(sorted(set(seen))[:1]))
finally:
    DeltaGenerator.info = original
    service.set_service(None)
    svc.stop()
""")
    assert not at.exception
    text = " ".join(str(m.value) for m in at.markdown)
    # nothing has been measured on this load yet: the count, and no guessed time
    assert "ran after: Waiting for the CPU: 1 ahead; no estimate yet on this load." in text
    assert not at.info  # the notice is gone once the run had its turn


def test_a_config_seen_before_is_not_measured_again(tmp_path) -> None:
    at = _script_app(f"""
import os
os.environ["DATA_DIR"] = {str(tmp_path)!r}
import streamlit as st
from memory.config import ModelConfig
from memory.strategies import parse_strategies
from ui import demo_runner

svc = demo_runner.service()
before = svc.runs_started
config = ModelConfig(layers=1, hidden=32, heads=1, seq_len=8, batch=1, vocab=64, seed=12345)
specs = parse_strategies("none,every-layer")
# untimed: a timed result measured while the machine was busy is measured once more when
# it is idle (a background run), which would count here on a loaded machine
run = lambda c: demo_runner.run_compare(c, specs, time_steps=False)
first = run(config)
again = run(config)
other = run(config.replace(layers=2))
st.write(f"engine calls: {{svc.runs_started - before}}; same peaks: "
         f"{{[r.peak_bytes for r in first.results] == [r.peak_bytes for r in again.results]}}")
""")
    assert not at.exception
    assert "engine calls: 2; same peaks: True" in at.markdown[0].value


def test_an_invalid_config_is_shown_not_raised() -> None:
    at = _script_app("""
from memory.config import ModelConfig
from memory.strategies import parse_strategies
from ui import demo_runner
result = demo_runner.run_compare(ModelConfig(layers=1, hidden=64, heads=3),
                                 parse_strategies("none"))
import streamlit as st
st.write(f"result: {result}")
""")
    assert not at.exception
    assert "divisible by heads=3" in at.error[0].value
    assert at.markdown[0].value == "result: None"


def test_a_long_cpu_run_waits_for_a_click(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every run counts as long here, for this test only: the script runs in this process,
    # and a threshold it set itself stayed set for every later page test in the process
    # (they were asked for a click, and one that looked for a result without giving it
    # found none).
    monkeypatch.setattr(demo_runner, "SLOW_SECONDS", 1e-6)
    at = _script_app("""
import streamlit as st
from memory.config import ModelConfig
from memory.strategies import parse_strategies
from ui import demo_runner

config = ModelConfig(layers=1, hidden=32, heads=1, seq_len=8, batch=1, vocab=64, seed=777)
result = demo_runner.run_compare(config, parse_strategies("none,every-layer"), repeats=1)
st.write(f"measured: {result is not None}")
""")
    assert not at.exception
    assert "roughly" in at.warning[0].value and "other learners" in at.warning[0].value
    assert at.markdown[0].value == "measured: False"
    at.button[0].click().run()
    assert not at.exception
    assert at.markdown[0].value == "measured: True"
    assert not at.warning


@pytest.fixture
def own_service() -> Iterator[None]:
    """A service of this test's own: no history of this process's earlier runs, so the
    estimates are the theory's own and what other tests ran here cannot change them."""
    from serving import service as service_module
    from tests.runtime.conftest import CPU, FakeWorker

    svc = service_module.DemoService(CPU, worker=FakeWorker(lambda job, i: 0.01),
                                     use_store=False).start()
    old = service_module.set_service(svc)
    try:
        yield
    finally:
        service_module.set_service(old)
        svc.stop()


def test_a_huge_config_on_compare_asks_first(app_test, own_service) -> None:
    """The theory estimates about 6 min: a click first."""
    at = app_test("pages/demos/compare.py",
                  query={"layers": "24", "hidden": "512", "heads": "8", "seq": "1024",
                         "batch": "4", "vocab": "32768", "strategy": "every-layer"})
    assert not at.exception
    assert "roughly" in at.warning[0].value
    assert at.button and not at.table  # nothing measured before the click


def test_an_hours_long_run_is_refused_without_a_button(app_test, own_service) -> None:
    """The biggest same-result run would hold the shared CPU for about 5 hours: it used
    to offer "Run it anyway (~18309 s)"; now it is refused, with no button."""
    at = app_test("pages/demos/same_result.py",
                  query={"steps": "100", "dropout": "0.5", "layers": "24", "hidden": "512",
                         "heads": "16", "seq": "1024", "batch": "8"})
    assert not at.exception
    assert "hours on this CPU" in at.error[0].value and "at most 15 min" in at.error[0].value
    assert not at.button and not at.table and not at.get("plotly_chart")


def test_durations_read_at_a_glance() -> None:
    assert demo_runner.duration_text(35.4) == "35 s"
    assert demo_runner.duration_text(734) == "12 min"
    assert demo_runner.duration_text(18309) == "5.1 hours"
