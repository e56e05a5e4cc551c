"""A long search must not hold everyone; the queue shows place and wait."""

from __future__ import annotations

import threading

from memory.strategies import parse_strategies
from serving.jobs import Job
from tests.runtime.conftest import TINY, FakeWorker, SlowPutStore, tiny_compare, wait_for


def _search(seed: int, steps: int = 4) -> Job:
    return Job.make("sweep", TINY.replace(seed=seed), parse_strategies("none"), vary="layers",
                    values=tuple(range(1, steps + 1)), repeats=1)


def test_a_short_run_passes_a_long_search_after_one_of_its_steps(make_service) -> None:
    # The search's first step lasts until the short run has arrived (a fixed 0.5 s step
    # could end first on a busy machine, and a 'waited < 1 s' fail); the order of the
    # steps, not a wall-clock wait, says the short run went after that one step, not
    # after the whole search.
    arrived = threading.Event()

    def seconds(job: Job, index: int) -> float:
        if job.kind != "sweep":
            return 0.05
        if index == 0:
            assert arrived.wait(30)
        return 0.1

    worker = FakeWorker(seconds)
    svc = make_service(worker=worker, use_store=False)
    search = svc.submit(_search(seed=1), "a")
    wait_for(lambda: search.status().state == "running")
    short = svc.submit(tiny_compare(seed=2), "b")
    assert short.status().state == "queued" and short.status().ahead == 1
    assert short.status().start_in > 0
    arrived.set()
    assert short.wait(10) and search.wait(10)
    assert [seed for seed, _ in worker.log] == [1, 2, 1, 1, 1]  # after one of four steps


def test_new_runs_keep_their_arrival_order_and_the_warm_up_waits(make_service) -> None:
    worker = FakeWorker(lambda job, index: 0.1)
    svc = make_service(worker=worker, use_store=False)
    first = svc.submit(tiny_compare(seed=1), "a")
    svc.warm([tiny_compare(seed=9)])
    rest = [svc.submit(tiny_compare(seed=s), "b") for s in (2, 3)]
    assert rest[1].status().ahead >= 2
    for ticket in [first, *rest]:
        ticket.wait(10)
    wait_for(lambda: len(worker.log) == 4)
    assert [seed for seed, _ in worker.log] == [1, 2, 3, 9]


def test_the_wait_estimate_counts_the_runs_ahead(make_service) -> None:
    worker = FakeWorker(lambda job, index: 0.3)
    svc = make_service(worker=worker, use_store=False)
    tickets = [svc.submit(tiny_compare(seed=s), str(s)) for s in range(3)]
    last = tickets[-1].status()
    assert last.ahead == 2
    one = svc.estimate(tiny_compare(seed=0))
    assert last.start_in >= one  # at least the one queued between
    for ticket in tickets:
        ticket.wait(10)


def test_a_queued_run_can_ask_its_wait_while_the_run_ahead_stores_its_result(
        make_service, store_dir) -> None:
    """The run on the device is still current while it stores its result (past its last
    step): a page asking a queued run's status then got an IndexError (CI, stop 16)."""
    entered, release = threading.Event(), threading.Event()
    worker = FakeWorker(lambda job, index: 0.05)
    svc = make_service(worker=worker, store=SlowPutStore(store_dir, entered, release))
    first = svc.submit(tiny_compare(seed=1), "a")
    assert entered.wait(10)  # first ran its last step and is writing its result
    second = svc.submit(tiny_compare(seed=2), "b")
    try:
        status = second.status()
        assert status.state == "queued" and status.ahead == 1
        assert status.start_in >= 0
    finally:
        release.set()
    assert first.wait(10) and second.wait(10)
    assert first.error is None and second.error is None
