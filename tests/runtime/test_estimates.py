"""Wait estimates a learner can trust: a worker restart counts in the wait, and the speed
follows what the latest runs took."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from serving.store import ResultStore
from serving.worker import DEFAULT_START_SECONDS, DeviceWorker
from tests.runtime.conftest import FakeWorker, tiny_compare, wait_for


class _RestartingWorker(FakeWorker):
    """Like the real worker after a kill: not alive, a fresh process taking `start_s` to
    start (held until `go`)."""

    def __init__(self, start_s: float) -> None:
        super().__init__(lambda job, index: 0.02)
        self.start_s, self.go, self.starting = start_s, threading.Event(), threading.Event()
        self.began: float | None = None

    def start_left(self) -> float:
        if self.go.is_set():
            return 0.0
        since = self.began or time.monotonic()
        return max(self.start_s - (time.monotonic() - since), 1.0)

    def start(self) -> None:
        if not self.go.is_set():
            self.began = time.monotonic()
            self.starting.set()
            assert self.go.wait(10)


def test_a_run_waiting_for_a_restarting_worker_is_told_the_restart(make_service) -> None:
    """After a cancel the fresh worker takes seconds to start; the next run's notice said
    "0 ahead, about 0 s" the whole time."""
    worker = _RestartingWorker(start_s=15.0)
    svc = make_service(worker=worker, use_store=False)
    ticket = svc.submit(tiny_compare(seed=3), "a")
    try:
        assert worker.starting.wait(10)
        status = ticket.status()
        assert status.state == "queued"
        assert status.start_in >= 10.0 and status.restart >= 10.0
        assert status.left >= status.start_in
    finally:
        worker.go.set()
    assert ticket.wait(10) and ticket.error is None


def test_the_real_worker_reports_its_restart_time() -> None:
    worker = DeviceWorker("cpu")
    assert worker.start_left() == DEFAULT_START_SECONDS  # never started: the default
    worker.last_start_seconds = 9.0
    assert worker.start_left() == 9.0
    worker._starting_since = time.monotonic() - 4.0  # started 4 s ago
    assert worker.start_left() == pytest.approx(5.0, abs=0.5)
    worker._starting_since = time.monotonic() - 60.0  # slower than last time
    assert worker.start_left() == 1.0


class _HistoryStore(ResultStore):
    """Forty quiet runs (1 s per CPU-estimate second), then the server got busy: the
    latest eight took twice as long. Newest first, as the store returns them."""

    def speed_history(self, device: str, limit: int = 50) -> list[tuple[float, float]]:
        busy = [(2.0, 0.3 + 4.0)] * 8
        quiet = [(2.0, 0.3 + 2.0)] * 40
        return busy + quiet


def test_the_speed_follows_the_latest_runs(make_service, store_dir: Path) -> None:
    """The median of the last 50 runs kept the quiet speed: under load, every estimate
    came out about half the real wait."""
    svc = make_service(worker=FakeWorker(lambda job, index: 0.02),
                       store=_HistoryStore(store_dir))
    assert svc.speed() == pytest.approx(2.0)


def test_a_run_measured_now_moves_the_estimate(make_service) -> None:
    svc = make_service(worker=FakeWorker(lambda job, index: 0.02), use_store=False)
    with svc._cond:
        svc._history.extend([(2.0, 2.3)] * 40)
    assert svc.speed() == pytest.approx(1.0)
    with svc._cond:
        svc._history.extend([(2.0, 6.3)] * 5)  # five slow runs just now
    wait_for(lambda: svc.speed() == pytest.approx(3.0), timeout=1)
