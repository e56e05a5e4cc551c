"""The load benchmark's warm-up wait ends on a fresh store: a view the server never warms
(the compiler budget page) is skipped and named once the server's own warm-up is past its
defaults, instead of being waited on for half an hour."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.load import markdown, warm_up

WARMED = ("pages/demos/compare.py", {})
NEVER = ("pages/demos/compiler_budget.py", {})


def _status(path: Path, state: str) -> None:
    path.write_text(json.dumps({"state": state, "runs": 3}))


def test_a_view_the_server_never_warms_is_skipped_once_its_warm_up_is_done(
    tmp_path: Path,
) -> None:
    status = tmp_path / "warm-up.json"
    _status(status, "defaults")
    opened: list[tuple] = []

    def shows_results(view: tuple) -> bool:
        opened.append(view)
        if len(opened) == 4:  # the server finishes its defaults while the views are opened
            _status(status, "done")
        return view == WARMED and len(opened) > 2

    seconds, skipped = warm_up([WARMED, NEVER], shows_results, status, limit_s=30,
                               pause_s=0.01)
    assert skipped == [NEVER] and seconds < 30
    assert opened.count(NEVER) >= 2  # waited on while the server still warmed


def test_the_wait_still_ends_with_a_message_when_the_server_never_finishes(
    tmp_path: Path,
) -> None:
    status = tmp_path / "warm-up.json"
    _status(status, "defaults")
    with pytest.raises(SystemExit, match="did not warm"):
        warm_up([NEVER], lambda view: False, status, limit_s=0.2, pause_s=0.05)


def test_the_report_names_the_views_it_did_not_measure() -> None:
    report = {"rounds": [], "solo": [], "server_memory_mib": {"start": 1, "warm": 2,
                                                             "after": 3},
              "warm_up_seconds": 1.0, "commit": "abc", "when": "now", "cpus": 2,
              "load_average_start": 1.0, "views": ["/compare"],
              "not_warmed": ["/compiler-budget"]}
    assert "Not measured" in markdown(report) and "/compiler-budget" in markdown(report)


def test_the_warm_ups_second_listing_is_past_its_defaults(tmp_path: Path) -> None:
    from benchmarks.load import PAST_DEFAULTS, warm_state

    status = tmp_path / "warm-up.json"
    status.write_text(json.dumps({"state": "listing"}))  # the defaults' runs are listed
    assert warm_state(status) not in PAST_DEFAULTS
    status.write_text(json.dumps({"state": "listing", "runs": 10, "failed": 0}))
    assert warm_state(status) in PAST_DEFAULTS  # the neighbours' runs are listed
    status.write_text("[]")
    assert warm_state(status) is None


def test_the_fresh_class_report_says_what_ran_beside_the_server() -> None:
    from benchmarks.load import fresh_markdown

    saved = json.loads((Path(__file__).parents[1] / "benchmarks"
                        / "load-fresh-class.json").read_text())
    assert "busy processes" not in fresh_markdown({**saved, "busy_processes": 0})
    text = fresh_markdown({**saved, "busy_processes": 2, "load_at_start": 2.4})
    assert "beside 2 busy processes" in text
    assert "started at a load average of 2.4 and answered its health check" in text


def test_the_busy_processes_run_during_the_block_and_end_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import subprocess

    from benchmarks import load

    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def popen(*args, **kwargs) -> subprocess.Popen:
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(load.subprocess, "Popen", popen)
    with load.busy_processes(2):
        assert len(started) == 2 and all(p.poll() is None for p in started)
    assert all(p.returncode is not None for p in started)
