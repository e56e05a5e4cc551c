"""ui.demo_runner: the queue notice, the per-config cache, the pure table helpers."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT


def _script_app(body: str) -> AppTest:
    at = AppTest.from_string(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n{body}",
                             default_timeout=60)
    return at.run()


def test_a_learner_behind_another_run_is_told_how_many_are_ahead() -> None:
    at = _script_app("""
import threading, time
import streamlit as st
from streamlit.delta_generator import DeltaGenerator
from ui import demo_runner

queue = demo_runner.device_queue()
holding = threading.Event()

def other_learner():
    with queue.turn():
        holding.set()
        time.sleep(1.0)

threading.Thread(target=other_learner).start()
holding.wait()
seen = []
original = DeltaGenerator.info
DeltaGenerator.info = lambda self, body, *a, **k: (seen.append(body), original(self, body))[1]
try:
    with demo_runner.device_turn("cpu"):
        st.write("ran after:", " | ".join(sorted(set(seen))))
finally:
    DeltaGenerator.info = original
""")
    assert not at.exception
    text = " ".join(str(m.value) for m in at.markdown)
    assert "ran after: Waiting for the CPU (1 ahead)" in text
    assert not at.info  # the notice is gone once the run had its turn


def test_a_config_seen_before_is_not_measured_again() -> None:
    at = _script_app("""
import streamlit as st
import demos.measure
from demos.config import ModelConfig
from ui import demo_runner

calls = []
real = demos.measure.compare
def counting(*args, **kwargs):
    calls.append(args[0])
    return real(*args, **kwargs)
demos.measure.compare = counting
try:
    config = ModelConfig(layers=1, hidden=32, heads=1, seq_len=8, batch=1, vocab=64, seed=12345)
    first = demo_runner.run_compare(config, ("none", "every-layer"), repeats=1)
    again = demo_runner.run_compare(config, ("none", "every-layer"), repeats=1)
    other = demo_runner.run_compare(config.replace(layers=2), ("none", "every-layer"), repeats=1)
finally:
    demos.measure.compare = real
st.write(f"engine calls: {len(calls)}; same peaks: "
         f"{[r.peak_bytes for r in first.results] == [r.peak_bytes for r in again.results]}")
""")
    assert not at.exception
    assert "engine calls: 2; same peaks: True" in at.markdown[0].value


def test_an_invalid_config_is_shown_not_raised() -> None:
    at = _script_app("""
from demos.config import ModelConfig
from ui import demo_runner
result = demo_runner.run_compare(ModelConfig(layers=1, hidden=64, heads=3), ("none",))
import streamlit as st
st.write(f"result: {result}")
""")
    assert not at.exception
    assert "divisible by heads=3" in at.error[0].value
    assert at.markdown[0].value == "result: None"


def _result(strategy: str, peak: int, seconds: float, diff: float | None, equal: bool | None,
            fits: bool = True) -> SimpleNamespace:
    return SimpleNamespace(strategy=strategy, label=strategy, fits=fits, peak_bytes=peak,
                           activation_bytes=peak // 2, predicted_activation_bytes=peak // 2,
                           step_seconds=seconds, step_seconds_runs=[seconds] * 3,
                           max_grad_diff=diff, bitwise_equal=equal, error="over the limit")


def test_results_table_reads_against_none() -> None:
    from ui.demo_runner import gradient_badge, results_table, timing_note

    results = [_result("none", 100 * 2**20, 0.2, None, None),
               _result("every-layer", 40 * 2**20, 0.25, 0.0, True),
               _result("sqrt", 60 * 2**20, 0.24, 3e-7, False),
               _result("budget", 0, 0.0, None, None, fits=False)]
    table = results_table(results)
    assert list(table["time vs none"]) == ["1.00×", "1.25×", "1.20×", "–"]
    assert list(table["peak vs none"]) == ["100%", "40%", "60%", "–"]
    assert list(table["same gradients"]) == ["baseline", "✓ bitwise equal (max diff 0)",
                                             "✓ max diff 3.0e-07", "–"]
    assert table["peak memory"].iloc[3] == "does not fit"
    assert [gradient_badge(r) for r in results[1:3]] == ["✓ identical", "✓ 3e-07"]
    assert gradient_badge(_result("sqrt", 1, 0.1, 0.5, False)) == "✗ 5e-01"
    assert "median of 3 timed steps" in timing_note(results)
    two = [_result("none", 1, 0.2, None, None), _result("sqrt", 1, 0.3, 0.0, True)]
    for r in two:
        r.step_seconds_runs = [0.2, 0.2]
    assert "mean of 2 timed steps" in timing_note(two)
    assert "noise" not in timing_note(results)
    noisy = [results[0], _result("every-layer", 40 * 2**20, 0.15, 0.0, True)]
    assert "measured faster than none: that is timing noise" in timing_note(noisy)


def test_loss_differences_compare_every_step_with_none() -> None:
    from ui.demo_runner import loss_differences, loss_table

    losses = pd.DataFrame({"step": [0, 1] * 3,
                           "strategy": ["none"] * 2 + ["every-layer"] * 2 + ["sqrt"] * 2,
                           "loss": [5.0, 4.0, 5.0, 4.0, 5.0, 4.0 + 2e-6]})
    differences = loss_differences(losses)
    assert list(differences["strategy"]) == ["every-layer", "sqrt"]
    assert list(differences["bitwise equal at every step"]) == [True, False]
    assert differences["largest loss difference"].iloc[1] == pytest.approx(2e-6)
    assert list(loss_table(differences)["bitwise equal at every step"]) == ["✓ yes", "✗ no"]


def test_the_controls_follow_the_device() -> None:
    from demos.device import DeviceInfo
    from ui.demo_runner import budget_range, default_config, fit_default, strategy_options

    gpu = DeviceInfo("cuda", "H200", 140 * 2**30, 100 * 2**30 + 123, 16, "2.13")
    cpu = DeviceInfo("cpu", "no GPU found", 24 * 2**30, 20 * 2**30, 2, "2.13")
    low, high, step, default = budget_range(gpu)
    assert default == 100 * 1024 and high == 140 * 1024 and step == 256  # free memory, MiB
    assert budget_range(cpu)[3] == 128
    assert "offload" in strategy_options("cuda") and "offload" not in strategy_options("cpu")
    assert "none" not in strategy_options("cpu")
    assert default_config(gpu).dtype == "bfloat16" and default_config(cpu).seq_len == 128
    assert fit_default(gpu).hidden > fit_default(cpu).hidden and fit_default(gpu).batch == 1


def test_a_long_cpu_run_waits_for_a_click() -> None:
    at = _script_app("""
import streamlit as st
from demos.config import ModelConfig
from ui import demo_runner

demo_runner.SLOW_SECONDS = 1e-6  # every run counts as long here
config = ModelConfig(layers=1, hidden=32, heads=1, seq_len=8, batch=1, vocab=64, seed=777)
result = demo_runner.run_compare(config, ("none", "every-layer"), repeats=1)
st.write(f"measured: {result is not None}")
""")
    assert not at.exception
    assert "roughly" in at.warning[0].value and "other learners" in at.warning[0].value
    assert at.markdown[0].value == "measured: False"
    at.button[0].click().run()
    assert not at.exception
    assert at.markdown[0].value == "measured: True"
    assert not at.warning


def test_a_huge_config_on_compare_asks_first(app_test) -> None:
    at = app_test("pages/demos/compare.py",
                  query={"layers": "24", "hidden": "512", "heads": "8", "seq": "1024",
                         "batch": "8", "vocab": "32768"})
    assert not at.exception
    assert "roughly" in at.warning[0].value
    assert at.button and not at.table  # nothing measured before the click
