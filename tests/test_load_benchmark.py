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


class _Process:
    """A server process that runs until `code` is set."""

    def __init__(self) -> None:
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode


def test_the_wait_for_the_server_follows_its_warm_up_past_any_fixed_time_out(
    tmp_path: Path,
) -> None:
    """A fresh server on a busy machine listens only once its warm-up has measured the
    common views; the benchmark waits as long as the warm-up goes on, saying how far it
    is, not a fixed 300 s."""
    import time

    from benchmarks.load_waits import wait_listening

    status, said = tmp_path / "warm-up.json", []
    calls = iter(range(100))

    def answers(url: str) -> bool:
        n = next(calls)
        _status(status, ("listing", "defaults", "defaults")[min(n // 3, 2)])
        return n >= 8

    waited = wait_listening("http://x", _Process(), status, time.monotonic() + 30,
                            answers=answers, pause_s=0.001, say=said.append)
    assert waited.state == "defaults" and not waited.capped
    assert [s.split(" after")[0] for s in said] == ["warm-up: listing", "warm-up: defaults"]


def test_the_wait_for_the_server_ends_at_the_cap_or_when_it_exits(tmp_path: Path) -> None:
    import time

    from benchmarks.load_waits import wait_listening

    status = tmp_path / "warm-up.json"
    _status(status, "defaults")
    with pytest.raises(SystemExit, match="cap .*'defaults'"):
        wait_listening("http://x", _Process(), status, time.monotonic() + 0.05,
                       answers=lambda url: False, pause_s=0.01, say=lambda s: None)
    gone = _Process()
    gone.returncode = 1
    with pytest.raises(SystemExit, match="exited"):
        wait_listening("http://x", gone, status, time.monotonic() + 30,
                       answers=lambda url: False, pause_s=0.01, say=lambda s: None)


def test_the_idle_wait_ends_when_the_warm_up_is_done_or_at_the_cap(tmp_path: Path) -> None:
    import time

    from benchmarks.load_waits import DONE, wait_state

    status = tmp_path / "warm-up.json"
    _status(status, "neighbours")
    capped = wait_state(status, DONE, time.monotonic() + 0.05, pause_s=0.01)
    assert capped.capped and capped.state == "neighbours"
    _status(status, "done")
    done = wait_state(status, DONE, time.monotonic() + 30, pause_s=0.01)
    assert not done.capped and done.state == "done" and done.seconds < 1


def test_the_report_states_the_waits_and_their_cap() -> None:
    report = {"rounds": [], "solo": [], "server_memory_mib": {"start": 1, "warm": 2,
                                                             "after": 3},
              "warm_up_seconds": 1.0, "commit": "abc", "when": "now", "cpus": 2,
              "load_average_start": 1.0, "views": ["/compare"], "wait_cap_s": 3600,
              "waits": {"listening": {"seconds": 250.0, "state": None, "capped": False},
                        "idle_runs": {"seconds": 900.0, "state": "neighbours",
                                      "capped": True}}}
    text = markdown(report)
    assert "at most 3600 s together" in text
    assert "idle runs 900.0 s (warm-up at \"neighbours\"; cut short by the cap)" in text


def test_a_waiting_notice_is_read_and_compared_with_the_real_wait() -> None:
    from benchmarks.load_waits import duration_seconds, estimate_errors, told_in

    body = ("Waiting for the CPU: 18 ahead, about 8 s until this run starts, then about "
            "2 min to run.")
    told = told_in(body, shown_s=0.5)
    assert told is not None and (told.ahead, told.wait_s, told.run_s) == (18, 8.0, 120.0)
    assert duration_seconds("5.1 hours") == pytest.approx(18360)
    assert told_in("Running on the CPU: about 3 s left (1 s so far).", 1.0) is None
    unknown = told_in("Waiting for the CPU: 4 ahead; no estimate yet on this load.", 0.2)
    assert unknown is not None and not unknown.known and unknown.ahead == 4
    from benchmarks.load_waits import Told

    waited = [Told(0.5, 18, 8.0, 120.0, started_s=174.5),  # the review's page: 21.75x
              Told(0.0, 2, 10.0, 1.0, started_s=12.0), Told(0.0, 1, 4.0, 1.0, started_s=3.0),
              None, Told(0.0, 0, 0.0, 1.0),  # no notice; never started
              Told(0.0, 4, 0.0, 0.0, started_s=9.0, known=False)]  # said it did not know
    errors = estimate_errors(waited)
    assert errors["pages"] == 6 and errors["told_a_wait"] == 3
    assert errors["said_no_estimate"] == 1
    assert errors["factor_off_p50"] == pytest.approx(1.33, abs=0.01)
    assert errors["factor_off_p95"] == pytest.approx(21.75)
    assert errors["real_over_told_median"] == pytest.approx(1.2)


def test_the_estimate_views_are_settings_the_warm_up_does_not_measure() -> None:
    from benchmarks.load_waits import estimate_views
    from ui.server import warm_views

    views = estimate_views(12)
    assert len(views) == len({json.dumps(v, sort_keys=True) for v in views}) == 12
    assert not set(map(json.dumps, views)) & set(map(json.dumps, warm_views()))


def test_the_benchmark_takes_its_cap_and_its_estimate_round_from_the_command_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchmarks import load

    seen: dict = {}

    def fresh_class(n: int, views: list, deadline: float, estimates: int = 0) -> dict:
        import time

        seen.update(n=n, left=deadline - time.monotonic(), estimates=estimates)
        raise SystemExit(0)

    monkeypatch.setattr(load, "fresh_class", fresh_class)
    monkeypatch.setattr(load, "warm_views", lambda: [WARMED])
    with pytest.raises(SystemExit):
        load.main(["--fresh-class", "3", "--estimates", "5", "--wait-cap", "100"])
    assert seen["n"] == 3 and seen["estimates"] == 5 and 90 < seen["left"] <= 100
