"""Faults 3 and 4 with the real worker process: cancel on leave, the time cap, the memory
bound, finished results kept and shared (also between two services on one database)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from memory.strategies import parse_strategies
from serving.jobs import Job
from serving.store import ResultStore
from serving.tickets import GRACE_S, RunRefused
from serving.worker import DeviceWorker, StepFailed, rss_bytes
from tests.runtime.conftest import TINY, long_training, tiny_compare, wait_for

pytestmark = pytest.mark.heavy  # its tests take seconds each: run first


@pytest.fixture(scope="module")
def worker():
    """One worker process for the module (spawning one costs seconds)."""
    instance = DeviceWorker("cpu")
    instance.start()
    yield instance
    instance.stop()


def test_a_run_whose_requester_left_is_killed_and_the_device_is_free(make_service,
                                                                      worker) -> None:
    svc = make_service(worker=worker)
    ticket = svc.submit(long_training(), "learner")
    wait_for(lambda: ticket.status().state == "running" and worker.pid is not None)
    pid = worker.pid
    time.sleep(0.5)
    ticket.release()  # the page was left
    wait_for(lambda: ticket.done, timeout=GRACE_S + 10)
    assert ticket.error is not None and ticket.error.reason == "cancelled"
    assert rss_bytes(pid) is None  # the process is gone: a cancel is a kill
    assert svc.waiting() == 0 and svc.cancelled == 1
    assert not ResultStore(svc.store.data_dir).pending(ticket.key)  # the claim is released
    short = svc.submit(tiny_compare(seed=3), "next learner")
    assert short.wait(60) and short.error is None  # a fresh worker serves the next one


def test_a_waiting_page_that_stops_heartbeating_counts_as_gone(make_service, worker,
                                                                monkeypatch) -> None:
    from serving import tickets as tickets_module

    monkeypatch.setattr(tickets_module, "HEARTBEAT_TIMEOUT_S", 1.0)
    svc = make_service(worker=worker)
    ticket = svc.submit(long_training(), "closed tab")  # never waits again, never released
    wait_for(lambda: ticket.done, timeout=20)
    assert ticket.error is not None and ticket.error.reason == "cancelled"


def test_a_run_past_its_time_cap_is_stopped(make_service, worker) -> None:
    svc = make_service(worker=worker, time_cap_s=1.5)
    ticket = svc.submit(long_training(), "learner")
    # Timed from its step's start: before it the worker starts (a torch import, not the
    # run's time), which a busy machine stretches past any fixed bound.
    wait_for(lambda: ticket.done or ticket.status().elapsed > 0, timeout=240)
    running = time.monotonic()
    while not ticket.wait(0.2):
        pass
    assert ticket.error is not None and ticket.error.reason == "time-limit"
    assert ticket.error.numbers["cap"] == 1.5
    assert time.monotonic() - running < 15  # at its cap, not after minutes of training


def test_a_finished_result_is_kept_and_served_to_the_next_visitor(make_service, worker,
                                                                   store_dir) -> None:
    svc = make_service(worker=worker)
    job = tiny_compare(seed=11, timed=True)  # two steps: memory, then the times
    first = svc.submit(job, "first")
    assert first.wait(60) and first.error is None
    again = svc.submit(job, "second")
    assert again.done and again.result.results[1].peak_bytes == \
        first.result.results[1].peak_bytes
    assert first.result.results[1].step_seconds is not None
    restarted = make_service(worker=worker)  # a restarted server: only the database remains
    assert restarted.submit(job, "third").done
    assert svc.runs_started == 1 and restarted.runs_started == 0


def test_two_services_on_one_database_make_one_run(make_service, store_dir) -> None:
    """Two server processes (two services with their own workers and owners) asked for
    one key at the same moment: one measures, the other waits for its row."""
    workers = [DeviceWorker("cpu"), DeviceWorker("cpu")]
    try:
        services = [make_service(worker=w, store=ResultStore(store_dir)) for w in workers]
        job = tiny_compare(seed=21)
        tickets: list = [None, None]
        barrier = threading.Barrier(2)

        def ask(i: int) -> None:
            barrier.wait()
            tickets[i] = services[i].submit(job, f"learner-{i}")

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # Both learners wait (heartbeat) together: one blocking wait of 120 s left the
        # other silent, and on a busy machine (the worker starting in over 10 s) its run
        # was taken for abandoned and cancelled.
        end = time.monotonic() + 120
        while not all([ticket.wait(0.2) for ticket in tickets]):  # a list: each one waits
            assert time.monotonic() < end, "timed out"
        assert all(ticket.error is None for ticket in tickets), [t.error for t in tickets]
        assert sum(s.runs_started for s in services) == 1
        peaks = [[r.peak_bytes for r in t.result.results] for t in tickets]
        assert peaks[0] == peaks[1]
    finally:
        for w in workers:
            w.stop()


def test_a_run_over_the_memory_limit_is_refused_before_it_starts(make_service) -> None:
    svc = make_service(memory_limit=64 * 2**20)
    fits = Job.make("fits", TINY, parse_strategies("none"), vary="batch", budget_bytes=256 * 2**20)
    with pytest.raises(RunRefused) as refused:
        svc.submit(fits, "learner")
    assert refused.value.reason == "memory"
    assert refused.value.numbers == {"need_bytes": 256 * 2**20, "limit_bytes": 64 * 2**20}
    assert svc.waiting() == 0


def test_a_step_growing_past_its_bound_is_killed(worker) -> None:
    with pytest.raises(StepFailed) as failed:
        worker.call(long_training(), 0, memory_bound=1)
    assert failed.value.reason == "memory-limit" and failed.value.numbers["used"] > 1
    assert not worker.alive()
    worker.start()


def test_the_memory_bound_follows_the_prediction_not_the_free_memory() -> None:
    small, large = tiny_compare(), long_training()
    assert small.memory_bound() < large.memory_bound() < 4 * 2**30


def test_a_checkpointed_step_gives_its_memory_back_to_the_system() -> None:
    """glibc kept a checkpointed step's freed tensors in the heap: the worker grew by four
    times what the tracker measured (485 against 120 MiB) and a what-fits search overran
    its memory bound. The worker starts with a fixed mmap threshold; what the step freed
    goes back."""
    from memory.config import ModelConfig

    instance = DeviceWorker("cpu")
    try:
        instance.start()
        environ = Path(f"/proc/{instance.pid}/environ").read_bytes().split(b"\0")
        assert b"MALLOC_MMAP_THRESHOLD_=1048576" in environ
        config = ModelConfig(layers=8, hidden=128, heads=4, seq_len=256, batch=34, vocab=768)
        job = Job.make("compare", config, parse_strategies("every-layer"), repeats=0,
                       time_steps=False)
        base = instance.rss() or 0
        # a limit under the plain step's need: no plain reference step, only every layer
        result = instance.call(job, 0, limit_bytes=200 * 2**20)
        tracked = result.results[0].peak_bytes
        assert 100 * 2**20 < tracked < 140 * 2**20, tracked
        assert instance.alive()  # not stopped for growing past its restart threshold
        assert instance.rss() is not None and instance.rss() - base < tracked
    finally:
        instance.stop()
