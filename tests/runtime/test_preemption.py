"""A learner never waits behind the server's own work: a warm-up or idle-time step on the
device is interrupted in place when a learner's run arrives, and runs again afterwards.

The service tests use the fake worker with steps far longer than any timeout (a warm-up
step of 10 minutes), so they pass or fail the same on a quiet and on a busy machine; the
worker tests interrupt a real step that would run for minutes."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from memory.strategies import parse_strategies
from serving import worker as worker_module
from serving.jobs import Job
from serving.worker import DeviceWorker, StepFailed, _engine_state, _Preemption
from tests.runtime.conftest import TINY, FakeWorker, long_training, tiny_compare, wait_for

FOREVER = 600.0  # a step no test waits for


def _first_attempt_forever(seed: int, index: int = 0):
    """A fake step time: the given warm-up step takes FOREVER the first time it runs, every
    other step (and its second run) a moment."""
    attempts: Counter = Counter()

    def seconds(job: Job, step: int) -> float:
        attempts[(job.config.seed, step)] += 1
        first = attempts[(job.config.seed, step)] == 1
        return FOREVER if (job.config.seed, step) == (seed, index) and first else 0.02

    return seconds


def _sweep(seed: int, steps: int = 3) -> Job:
    return Job.make("sweep", TINY.replace(seed=seed), parse_strategies("none"), vary="layers",
                    values=tuple(range(1, steps + 1)), repeats=1)


@pytest.mark.parametrize("idle", [False, True], ids=["warm-up", "idle-time"])
def test_a_learner_never_waits_behind_a_background_step(make_service, monkeypatch,
                                                        idle) -> None:
    from serving import service as service_module

    monkeypatch.setattr(service_module, "IDLE_AFTER_S", 0.0)
    worker = FakeWorker(_first_attempt_forever(seed=9))
    svc = make_service(worker=worker, use_store=False)
    warm = svc.warm([tiny_compare(seed=9)], idle=idle)[0]
    wait_for(lambda: warm.status().state == "running", timeout=30)
    learner = svc.submit(tiny_compare(seed=1), "learner")
    # Its estimate already knows: nothing is ahead of it (the step yields at once)
    status = learner.status()
    assert status.state in ("queued", "running", "done")
    if status.state == "queued":
        assert status.ahead == 0 and status.start_in < FOREVER
    assert learner.wait(60) and learner.error is None  # not after the 10-minute step
    assert worker.preempted == [(9, 0)]
    assert warm.wait(60) and warm.error is None  # measured again, from its start
    assert [seed for seed, _ in worker.log] == [1, 9]
    assert svc.runs_started == 2  # an interrupted run is not a new run


def test_a_preempted_search_keeps_its_finished_steps(make_service) -> None:
    worker = FakeWorker(_first_attempt_forever(seed=9, index=1))
    svc = make_service(worker=worker, use_store=False)
    warm = svc.warm([_sweep(seed=9)])[0]
    wait_for(lambda: (9, 0) in worker.log, timeout=30)
    wait_for(lambda: warm.status().state == "running", timeout=30)
    learner = svc.submit(tiny_compare(seed=1), "learner")
    assert learner.wait(60)
    assert warm.wait(60) and warm.error is None
    assert worker.preempted == [(9, 1)]
    assert worker.log == [(9, 0), (1, 0), (9, 1), (9, 2)]  # step 0 was not run twice
    assert list(warm.result["step"]) == [0, 1, 2]


def test_a_learner_asking_for_the_background_run_itself_is_not_preempted(
        make_service) -> None:
    release = threading.Event()
    worker = FakeWorker(lambda job, index: 0.0 if release.is_set() else 0.3)
    svc = make_service(worker=worker, use_store=False)
    warm = svc.warm([tiny_compare(seed=9)])[0]
    wait_for(lambda: warm.status().state == "running", timeout=30)
    mine = svc.submit(tiny_compare(seed=9), "learner")  # the same run: now theirs
    assert mine.wait(60) and mine.error is None
    assert worker.preempted == [] and worker.log == [(9, 0)]


def test_a_learner_behind_another_learner_is_not_a_reason_to_preempt(make_service) -> None:
    worker = FakeWorker(lambda job, index: 0.3)
    svc = make_service(worker=worker, use_store=False)
    first = svc.submit(tiny_compare(seed=1), "a")
    wait_for(lambda: first.status().state == "running", timeout=30)
    second = svc.submit(tiny_compare(seed=2), "b")
    assert first.wait(60) and second.wait(60)
    assert worker.preempted == [] and [s for s, _ in worker.log] == [1, 2]


# ---------------------------------------------------------------- the worker process

@pytest.fixture(scope="module")
def real_worker():
    instance = DeviceWorker("cpu")
    instance.start()
    yield instance
    instance.stop()


@pytest.mark.heavy
def test_the_worker_interrupts_a_step_in_place_and_serves_the_next(real_worker) -> None:
    if worker_module.PREEMPT_SIGNAL is None:
        pytest.skip("no POSIX signals")
    pid = real_worker.pid
    started = threading.Event()
    learner_here = threading.Event()
    failures: list[StepFailed] = []

    def run_long() -> None:
        try:
            real_worker.call(long_training(), 0, should_yield=learner_here.is_set,
                             on_progress=lambda done, total: started.set())
        except StepFailed as failure:
            failures.append(failure)

    thread = threading.Thread(target=run_long)
    thread.start()
    assert started.wait(120)  # minutes of training are under way
    learner_here.set()
    thread.join(120)
    assert not thread.is_alive()
    assert [f.reason for f in failures] == ["preempted"]
    assert real_worker.pid == pid and real_worker.alive()  # no kill, no fresh start
    comparison = real_worker.call(tiny_compare(seed=5), 0)
    assert real_worker.pid == pid
    assert {r.strategy for r in comparison.results} == {"none", "every-layer"}


@pytest.mark.heavy
def test_a_preemption_between_steps_is_ignored(real_worker) -> None:
    if worker_module.PREEMPT_SIGNAL is None:
        pytest.skip("no POSIX signals")
    pid = real_worker.pid
    assert real_worker.preempt(pid)  # nothing runs: the process ignores it
    comparison = real_worker.call(tiny_compare(seed=6), 0)
    assert real_worker.pid == pid and comparison.results


# ---------------------------------------------------------------- the pieces

class _Pipe:
    def __init__(self, preemption: _Preemption) -> None:
        self.preemption, self.sent = preemption, []

    def send(self, message) -> None:
        self.preemption.handler(0, None)  # the signal comes in the middle of the write
        self.sent.append(message)


def test_a_preemption_during_a_write_waits_for_the_write_to_end() -> None:
    preemption = _Preemption()
    pipe = _Pipe(preemption)
    with pytest.raises(worker_module.Preempted), preemption.step():
        preemption.send(pipe, ("progress", 1, 2))
    assert pipe.sent == [("progress", 1, 2)]  # whole, then interrupted
    assert preemption.fired


def test_a_preemption_outside_a_step_does_nothing() -> None:
    preemption = _Preemption()
    preemption.handler(0, None)
    assert not preemption.fired
    with preemption.step():
        pass  # a new step starts clean


def test_a_step_that_leaves_a_torch_mode_behind_is_found() -> None:
    baseline = _engine_state()
    mode = TorchDispatchMode()
    mode.__enter__()  # as a step cut short inside the tracker would leave it
    try:
        assert not worker_module._restore_after_preemption(baseline)
    finally:
        mode.__exit__(None, None, None)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the lab of mistakes' setting, cut short
    try:
        assert worker_module._restore_after_preemption(baseline)
        assert torch.get_num_threads() == baseline["threads"]
    finally:
        torch.set_num_threads(threads)


def test_a_warm_up_run_a_learner_joined_and_left_is_still_measured(make_service,
                                                                   monkeypatch) -> None:
    """A fresh class joins the warm-up's runs and leaves them (time-outs, closed tabs): the
    runs were cancelled as nobody's, and the warm-up ended with its defaults unmeasured."""
    from serving import tickets as tickets_module

    monkeypatch.setattr(tickets_module, "GRACE_S", 0.0)
    # the warm-up waits without heartbeats (ui.server._finish): stale after this long
    monkeypatch.setattr(tickets_module, "HEARTBEAT_TIMEOUT_S", 0.1)
    worker = FakeWorker(lambda job, index: 0.5)
    svc = make_service(worker=worker, use_store=False)
    warm = svc.warm([tiny_compare(seed=9)])[0]
    mine = svc.submit(tiny_compare(seed=9), "learner")  # the same run: now theirs too
    mine.release()  # the learner left before it ended
    assert warm.wait(30) and warm.error is None and svc.cancelled == 0
    assert worker.log == [(9, 0)]
