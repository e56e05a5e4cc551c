"""Idle-time runs: the slider steps next to the pages' defaults are measured only while no
learner asks for a run, behind everything else."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from memory.strategies import parse_strategies
from serving import service as service_module
from tests.runtime.conftest import FakeWorker, tiny_compare, wait_for
from ui.server import slider_neighbours


def test_background_runs_wait_until_no_learner_asked_for_a_while(make_service, monkeypatch):
    # Judged on when the worker began each step, not on what this thread sees when it
    # looks (a busy machine can hold it past the pause): the pause is long beside the
    # scheduler's own reaction, so the warm-up's prompt start is told from it under load.
    pause = 2.0
    monkeypatch.setattr(service_module, "IDLE_AFTER_S", pause)
    worker = FakeWorker(lambda job, index: 0.05)
    svc = make_service(worker=worker, use_store=False)
    learner = svc.submit(tiny_compare(seed=1), "learner")
    idle = svc.warm([tiny_compare(seed=2)], idle=True)[0]
    warm = svc.warm([tiny_compare(seed=3)])[0]
    assert learner.wait(10) and warm.wait(10) and idle.wait(20)
    assert [seed for seed, _ in worker.log] == [1, 3, 2]  # the warm-up's before the idle
    served = worker.step_ended[1, 0]  # the learner's step ended (served just after)
    # both only after a pause: the learner may draw another page meanwhile
    assert worker.step_began[3, 0] - served >= pause
    assert worker.step_began[2, 0] - served >= pause


def test_a_learner_asking_meanwhile_goes_first_and_restarts_the_pause(make_service,
                                                                     monkeypatch):
    monkeypatch.setattr(service_module, "IDLE_AFTER_S", 0.6)
    # The idle run's first step lasts until a learner interrupts it (it is given a minute:
    # on a busy machine a fixed half second could end before the learner's request came).
    worker = FakeWorker(lambda job, index: 60.0 if job.config.seed == 10
                        and not worker.preempted else 0.05)
    svc = make_service(worker=worker, use_store=False)
    idle = [svc.warm([tiny_compare(seed=s)], idle=True)[0] for s in (10, 11)]
    wait_for(lambda: idle[0].status().state == "running", timeout=10)
    learner = svc.submit(tiny_compare(seed=1), "learner")  # while an idle run holds it
    assert learner.wait(10)
    assert idle[1].wait(10) and idle[0].wait(10)
    # the idle run's step yielded to the learner and ran again once the pause was over
    assert worker.preempted == [(10, 0)]
    assert [seed for seed, _ in worker.log] == [1, 10, 11]


def test_a_learner_asking_for_an_idle_run_makes_it_theirs(make_service, monkeypatch):
    monkeypatch.setattr(service_module, "IDLE_AFTER_S", 60.0)
    svc = make_service(worker=FakeWorker(lambda job, index: 0.05), use_store=False)
    svc.submit(tiny_compare(seed=9), "learner").wait(10)  # a learner was just here
    idle = svc.warm([tiny_compare(seed=4)], idle=True)[0]
    time.sleep(0.3)
    assert not idle.done  # would wait a minute
    mine = svc.submit(tiny_compare(seed=4), "learner")
    wait_for(lambda: mine.done, timeout=5)


def _slider(key, value, step, lo, hi):
    return SimpleNamespace(key=key, value=value, step=step, min=lo, max=hi)


def test_slider_neighbours_are_one_step_either_way_within_the_range() -> None:
    at = SimpleNamespace(slider=[_slider("layers", 8, 1, 1, 48), _slider("batch", 1, 1, 1, 32),
                                 _slider("dropout", 0.1, 0.05, 0.0, 0.5)])
    moves = slider_neighbours(at)
    assert {"layers": "7"} in moves and {"layers": "9"} in moves
    assert {"batch": "2"} in moves and {"batch": "0"} not in moves
    assert {"dropout": "0.05"} in moves or {"dropout": "0.05000000000000001"} not in moves
    assert len(moves) == 5


@pytest.mark.parametrize("value", [None, "x"])
def test_a_slider_without_a_number_has_no_neighbours(value) -> None:
    assert slider_neighbours(SimpleNamespace(slider=[_slider("a", value, 1, 0, 9)])) == []


def test_only_the_named_sliders_neighbours_when_asked(monkeypatch) -> None:
    from ui import server

    at = SimpleNamespace(slider=[_slider("layers", 8, 1, 1, 48), _slider("batch", 2, 1, 1, 32),
                                 _slider("vocab", 1024, 256, 256, 8192)])
    monkeypatch.setenv(server.NEIGHBOURS_ENV, "layers, batch")
    keys = server.neighbour_keys()
    assert keys == {"layers", "batch"}
    assert {next(iter(m)) for m in slider_neighbours(at, keys)} == {"layers", "batch"}
    monkeypatch.setenv(server.NEIGHBOURS_ENV, "compare:layers, what-fits:batch")
    assert server.neighbour_keys("pages/demos/compare.py") == {"layers"}
    assert server.neighbour_keys("pages/demos/what_fits.py") == {"batch"}
    assert server.neighbour_keys("pages/demos/curves.py") == set()
    monkeypatch.setenv(server.NEIGHBOURS_ENV, "0")
    assert slider_neighbours(at, server.neighbour_keys()) == []
    monkeypatch.delenv(server.NEIGHBOURS_ENV)
    assert len(slider_neighbours(at, server.neighbour_keys())) == 6


def test_collecting_lists_no_invalid_combination(monkeypatch) -> None:
    """hidden 128 with 3 heads runs nothing: the warm-up listed it, and the load
    benchmark counted its page as a first move the store could not serve."""
    from memory.config import ModelConfig
    from ui import demo_runner

    monkeypatch.setenv(demo_runner.COLLECT_ENV, "1")
    demo_runner.collected.clear()
    demo_runner.run_compare(ModelConfig(layers=2, hidden=128, heads=3), parse_strategies("none"),
                            repeats=1)
    assert demo_runner.collected == []
    demo_runner.run_compare(ModelConfig(layers=2, hidden=128, heads=4), parse_strategies("none"),
                            repeats=1)
    assert len(demo_runner.collected) == 1
    demo_runner.collected.clear()


def test_a_queued_idle_run_does_not_hold_another_servers_learner(make_service, store_dir,
                                                                  monkeypatch) -> None:
    """An idle-time run waits behind everything; had it claimed its key when queued, a
    learner of another server sharing the database would wait for it."""
    from serving.store import ResultStore

    monkeypatch.setattr(service_module, "IDLE_AFTER_S", 60.0)
    one = make_service(worker=FakeWorker(lambda job, index: 0.02),
                       store=ResultStore(store_dir), owner="server-one")
    one.submit(tiny_compare(seed=20), "learner").wait(10)  # a learner was just here
    idle = one.warm([tiny_compare(seed=21)], idle=True)[0]
    two = make_service(worker=FakeWorker(lambda job, index: 0.02),
                       store=ResultStore(store_dir), owner="server-two")
    theirs = two.submit(tiny_compare(seed=21), "learner")
    assert theirs.status().state != "remote"
    assert theirs.wait(10) and theirs.error is None
    one._last_foreground = -60.0  # idle now: the run finds the result in the store
    assert idle.wait(10) and idle.error is None
    assert one.runs_started == 1  # only the learner's run, none for the idle one


def test_a_learner_browsing_served_pages_holds_the_idle_runs(make_service, monkeypatch):
    """A page served from the store starts no run, but a learner is there: an idle-time
    run would take the CPU their pages need."""
    pause = 0.8
    monkeypatch.setattr(service_module, "IDLE_AFTER_S", pause)
    worker = FakeWorker(lambda job, index: 0.02)
    svc = make_service(worker=worker, use_store=False)
    svc.touch()
    idle = svc.warm([tiny_compare(seed=30)], idle=True)[0]
    for _ in range(4):  # a view every 0.4 s
        time.sleep(0.4)
        last_view = time.monotonic()
        svc.touch()
    assert idle.wait(10)
    # Judged on when the worker began the step, not on what this thread sees between its
    # views (on a busy machine a 0.4 s sleep can overrun the pause): the idle run began a
    # full pause after the last view, so every view held it.
    assert worker.step_began[30, 0] - last_view >= pause


@pytest.mark.parametrize("idle", [True, False], ids=["idle-time run", "warm-up run"])
def test_a_page_drawn_meanwhile_interrupts_a_background_step(make_service, monkeypatch,
                                                              idle):
    """A learner opening a page served from the store starts no run, yet the background
    step on the device (an idle-time run's, or the warm-up's once the server listens)
    would take the CPU their page needs: it gives way at once and runs again, from its
    start, once they have gone quiet."""
    pause = 0.6
    monkeypatch.setattr(service_module, "IDLE_AFTER_S", pause)
    # The first step lasts until interrupted (a minute otherwise: a busy machine can hold
    # this thread for a while before it draws its page).
    worker = FakeWorker(lambda job, index: 60.0 if index == 0 and not worker.preempted
                        else 0.05)
    svc = make_service(worker=worker, use_store=False)
    run = svc.warm([tiny_compare(seed=20)], idle=idle)[0]
    wait_for(lambda: run.status().state == "running", timeout=10)
    # Taken before the service hears of the page: the step runs again a full pause after
    # that, whenever a busy machine lets this thread look.
    drawn = time.monotonic()
    svc.touch()  # a learner's page drew
    wait_for(lambda: worker.preempted == [(20, 0)], timeout=10)
    assert run.wait(20)
    assert worker.step_began[20, 0] - drawn >= pause  # again, once quiet


def test_the_warm_up_reports_its_state_and_counts(make_service, monkeypatch, tmp_path):
    """The warm-up's status file says what it does, and "done" once every run it listed
    (the defaults, then the slider steps next to them) has ended, with the failures."""
    import json

    from ui import server

    monkeypatch.setattr(service_module, "IDLE_AFTER_S", 0.1)
    svc = make_service(worker=FakeWorker(lambda job, index: 0.05), use_store=False)
    monkeypatch.setattr(service_module, "get_service", lambda: svc)
    status = tmp_path / "status" / "warm-up.json"
    monkeypatch.setenv(server.STATUS_ENV, str(status))
    monkeypatch.setenv(server.NEIGHBOURS_ENV, "1")
    states = []
    lists = {"--collect-warm-jobs": [tiny_compare(seed=s).request() for s in (1, 2)],
             "--collect-neighbour-jobs": [tiny_compare(seed=s).request() for s in (3, 4, 5)]}

    def collected(flag):
        states.append(json.loads(status.read_text())["state"])
        key = "jobs" if flag == "--collect-warm-jobs" else "idle_jobs"
        return {"jobs": [], "idle_jobs": [], key: lists[flag]}

    monkeypatch.setattr(server, "_collected", collected)
    server._warm_store()
    done = json.loads(status.read_text())
    assert states == ["listing", "listing"]
    assert done["state"] == "done" and done["pid"] > 0
    assert (done["runs"], done["failed"], done["idle_runs"], done["idle_failed"]) == (2, 0, 3, 0)
    assert done["failed_reasons"] == done["idle_failed_reasons"] == []


def test_a_warm_up_that_cannot_list_its_runs_says_failed(monkeypatch, tmp_path):
    import json

    from ui import server

    monkeypatch.setattr(service_module, "get_service", lambda: None)
    monkeypatch.setenv(server.STATUS_ENV, str(tmp_path / "warm-up.json"))
    monkeypatch.setattr(server, "_collected", lambda flag: None)
    server._warm_store()
    assert json.loads((tmp_path / "warm-up.json").read_text())["state"] == "failed"


def test_the_warm_up_logs_each_failed_run_with_its_job_and_reason(caplog) -> None:
    """An operator reads which run failed and why (a memory bound, a time limit), not
    only the count in the status file."""
    import logging

    from serving.jobs import Job
    from serving.worker import StepFailed
    from tests.runtime.conftest import TINY
    from ui import server

    job = Job.make("fits", TINY, parse_strategies("every-layer"), vary="batch",
                   budget_bytes=128 * 2**20)
    failed = StepFailed("memory-limit", used=806395904, bound=805306368)
    tickets = [SimpleNamespace(wait=lambda: True, error=None, job=job),
               SimpleNamespace(wait=lambda: True, error=failed, job=job)]
    with caplog.at_level(logging.WARNING, logger="ui.server"):
        assert server._finish(tickets) == ["memory-limit"]  # in the status file too
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert "kind='fits'" in message and "memory-limit" in message and "806395904" in message


def test_the_warm_up_lists_its_runs_at_the_lowest_priority() -> None:
    """The child that opens every page to list the warm-up's runs takes the smallest share
    of the CPU beside a learner's page run (and still ends on a busy machine)."""
    import subprocess
    import sys

    from ui.server import lowest_priority

    out = subprocess.run([sys.executable, "-c", "import os; print(os.nice(0))"],
                         capture_output=True, text=True, check=True,
                         preexec_fn=lowest_priority).stdout
    assert int(out) == 19


def test_the_warm_up_waits_while_a_learner_is_here(make_service, monkeypatch):
    """Once the server listens, the warm-up's steps wait as the idle-time runs do while a
    learner's pages draw, its first numbers too: the pages get the CPU (a learner who
    opens such a view joins its run, which then goes first)."""
    pause = 2.0
    monkeypatch.setattr(service_module, "IDLE_AFTER_S", pause)
    worker = FakeWorker(lambda job, index: 0.05)
    svc = make_service(worker=worker, use_store=False)
    here = time.monotonic()  # before the touch: the pause counts from the touch
    svc.touch()  # a learner's page drew just now
    warm = svc.warm([tiny_compare(seed=4, timed=True)])[0]
    assert warm.wait(20)
    assert worker.step_began[4, 0] - here >= pause
    assert worker.step_began[4, 1] - here >= pause


def test_a_page_run_for_a_learner_holds_the_background_runs(make_service, monkeypatch):
    """The router tells the service first thing on every page run, any page; the
    server's own drawing of the views before it listens is no learner."""
    from serving.service import set_service
    from ui import demo_runner

    svc = make_service(worker=FakeWorker(lambda job, index: 0.05), use_store=False)
    old = set_service(svc)
    try:
        monkeypatch.setenv(demo_runner.DRAW_ONCE_ENV, "1")
        demo_runner.learner_arrives()
        assert not svc._learners_first(time.monotonic())
        monkeypatch.delenv(demo_runner.DRAW_ONCE_ENV)
        demo_runner.learner_arrives()
        assert svc._learners_first(time.monotonic())
    finally:
        set_service(old)
