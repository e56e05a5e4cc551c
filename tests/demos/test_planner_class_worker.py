"""A pasted config.json's class is measured in a process of its own (planner.class_worker):
forked from a forkserver that has the libraries imported, under a time and a memory limit,
killed when its caller leaves, its result (a class's description, a fit) sent back as the
JSON planner.class_cache keeps. The process that plans never imports torch for it, so a
server's other learners never wait for its interpreter."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

import pytest

from model_classes import causal_lm_config as CC
from planner import class_cache
from planner import class_worker as W
from planner.class_json import fit_to_json
from tests.demos.class_fixtures import load, tiny

KEY = ("fp32", "sdpa", 8, "all-linear", "cuda")


def measuring() -> list:
    """The measuring children still alive (not another test's demo worker)."""
    return [c for c in multiprocessing.active_children() if c.name.startswith("measure-")]


@pytest.fixture(autouse=True)
def _data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("PLANNER_MEASURE_IN_PROCESS", raising=False)


def test_the_child_measures_what_this_process_would() -> None:
    from planner.class_memory import MeasuredClass

    cfg = tiny(load("qwen3-235b-a22b"))
    here = MeasuredClass(cfg)
    assert W.measure("describe", cfg, "mine") == json.loads(json.dumps(
        here.description("mine")))
    one = W.measure("fit", cfg, KEY, True, None)
    assert one == fit_to_json(here.fit(KEY, one_only=True))
    assert W.measure("fit", cfg, KEY, False, one) == fit_to_json(here.fit(KEY))
    assert not measuring()


def test_a_pasted_config_is_planned_without_torch_in_the_planning_process(tmp_path) -> None:
    """The whole plan of a config never seen (its class described and a variant fitted)
    leaves torch and transformers out of the process that plans: the measurement ran in a
    child, and this process's threads kept the interpreter meanwhile."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps(tiny(load("mixtral-8x7b"))), encoding="utf-8")
    code = ("import sys, io, contextlib\n"
            "from planner.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert main(['--config', {str(config)!r}, '--tuning', 'lora', '--seq', "
            "'64', '--json']) == 0\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True, env={"DATA_DIR": str(tmp_path / "d"),
                                                       "PATH": "/usr/bin:/bin"},
                         cwd=str(Path(__file__).resolve().parents[2])).stdout
    assert out.strip() == "[]"


def test_a_measurement_past_its_time_is_killed_and_said_in_one_line() -> None:
    cfg = tiny(load("llama-3.1-8b"))
    W.measure("describe", cfg, "")  # the forkserver started, its libraries loaded
    started = time.monotonic()
    with pytest.raises(W.MeasureFailed) as failed:
        W.measure("fit", cfg, KEY, False, None, seconds=0.05)
    assert time.monotonic() - started < 5
    error = failed.value
    assert error.problem == "time-limit" and error.params["seconds"] == 0
    assert "took longer than 0 s" in str(error) and "\n" not in str(error)
    assert not measuring()


def test_a_measurement_past_its_memory_is_stopped_and_said() -> None:
    with pytest.raises(W.MeasureFailed) as failed:  # no byte more than the child starts with
        W.measure("fit", tiny(load("llama-3.1-8b")), KEY, True, None, memory=1)
    error = failed.value
    assert error.problem == "memory-limit" and error.limit_bytes == 1
    assert "needed more than 1 B" in str(error)


def test_what_the_library_cannot_run_comes_back_as_one_line() -> None:
    """DeepSeek's expert groups must divide its experts: torch's view fails in the child,
    and the caller gets the library's first line."""
    cfg = {**load("deepseek-v3"), "n_group": 3}  # 256 experts in 3 groups
    with pytest.raises(W.MeasureFailed) as failed:
        W.measure("fit", cfg, KEY, True, None)
    assert failed.value.problem == "failed" and "RuntimeError" in failed.value.detail
    assert "\n" not in str(failed.value)
    with pytest.raises(CC.ClassConfigError) as refused:  # the library's own refusal
        W.measure("describe", {"model_type": "t5"}, "")
    assert refused.value.problem == "not-causal" and not isinstance(refused.value,
                                                                    W.MeasureFailed)


def test_a_caller_that_leaves_kills_its_measurement() -> None:
    """On /plan, Streamlit stops the script of a learner who left at the page's next
    element: the notice drawn while waiting. The child goes with it."""
    class Left(Exception):
        pass

    calls: list[float | None] = []

    def on_wait(waited: float | None) -> None:
        calls.append(waited)
        if waited is not None and waited > 0.3:
            raise Left

    started = time.monotonic()
    with W.waiting(on_wait), pytest.raises(Left):
        W.measure("fit", tiny(load("gemma-2-9b")), KEY, False, None, seconds=60)
    assert time.monotonic() - started < 5
    assert None not in calls and not measuring()
    calls.clear()
    with W.waiting(calls.append):
        W.measure("describe", tiny(load("gpt2")), "")
    assert calls and calls[-1] is None  # told the wait ended: the notice is taken away


def test_a_config_that_failed_is_refused_again_at_once(monkeypatch) -> None:
    """Each run of the page would measure a config again: one that hit a limit is refused
    at once for a while (FAILED_FOR_S), then measured again."""
    text = json.dumps({**tiny(load("gemma-2-9b")), "_name_or_path": "slow"})
    _, source = class_cache.from_config_json(text)
    monkeypatch.setattr(W, "TIME_LIMIT_S", 0.0001)
    with pytest.raises(W.MeasureFailed):
        source.fit(KEY)
    monkeypatch.setattr(W, "TIME_LIMIT_S", 60.0)
    started = time.monotonic()
    with pytest.raises(W.MeasureFailed) as again:
        source.fit(KEY)
    assert time.monotonic() - started < 0.5 and again.value.problem == "time-limit"
    monkeypatch.setattr(class_cache, "FAILED_FOR_S", 0.0)
    assert source.fit(KEY).one_only
