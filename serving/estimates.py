"""The demo service's estimates (a mixin of serving.service.DemoService): this
device's speed from the history of measured steps (kept in the store across restarts), the
seconds a run holds the device, and the status a waiting page shows (its place in the
queue, the wait before it starts, its progress). Locking as the service's: the speed
history's first read takes `_history_lock` before `_cond`, never under it."""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from demos.device import DeviceInfo
from serving.jobs import Job
from serving.store import ResultStore
from serving.tickets import Run, RunStatus

# The service's log: these are DemoService's methods.
log = logging.getLogger("serving.service")

DEFAULT_SPEED = {"cpu": 1.0, "cuda": 0.05}  # seconds per CPU-estimate second, before history
STEP_OVERHEAD_S = 0.3  # a step's fixed cost: the pipe, building the model, the first calls
MIN_HISTORY_WORK = 0.5  # steps this small tell the overhead, not the speed
RECENT_RUNS = 7  # the speed is the median of this many latest runs: it follows the load


class RunEstimates:
    """Estimates and statuses; the state is DemoService's (set in its __init__)."""

    device: DeviceInfo
    store: ResultStore | None
    worker: Any
    device_label: str
    _cond: threading.Condition
    _current: Run | None
    _history: deque[tuple[float, float]]
    _history_loaded: bool
    _history_lock: threading.Lock
    _order: Callable[[], list[Run]]

    def speed(self) -> float:
        """Measured seconds per CPU-estimate second on this device (median of recent)."""
        if not self._history_loaded and self.store is not None:
            # One thread reads the store, one asking meanwhile waits for it (it went on
            # with the default speed: a wrong estimate, even a refusal, at start). Never
            # called under self._cond: this lock is taken first.
            with self._history_lock:
                if not self._history_loaded:
                    try:
                        stored = self.store.speed_history(self.device_label)
                    except SQLAlchemyError:
                        log.exception("result store unavailable")
                        stored = []
                    with self._cond:
                        self._history.extendleft(stored)
                    self._history_loaded = True
        # A copy: the scheduler appends each step's time (under the lock) while pages ask;
        # iterating the deque itself then raised "deque mutated during iteration".
        with self._cond:
            history = list(self._history)
        # The newest last: the latest runs tell how fast this device is now (a server that
        # got busy runs everything slower; the median of all 50 kept the quiet speed, and
        # estimates came out half of the real waits).
        ratios = [max(seconds - STEP_OVERHEAD_S, 0.0) / work for work, seconds in history
                  if work >= MIN_HISTORY_WORK][-RECENT_RUNS:]
        return statistics.median(ratios) if ratios else DEFAULT_SPEED.get(self.device.kind, 1.0)

    def restart_left(self) -> float:
        """Seconds until the worker process is ready (0 while it runs); fakes without the
        method never restart."""
        start_left = getattr(self.worker, "start_left", None)
        return float(start_left()) if start_left is not None else 0.0

    def estimate(self, job: Job) -> float:
        """Estimated seconds the run holds the device."""
        return self._seconds([job.step_work(i, self.device.kind)
                              for i in range(job.step_count())], self.speed())

    @staticmethod
    def _seconds(works: Iterable[float], speed: float) -> float:
        return sum(STEP_OVERHEAD_S + work * speed for work in works)

    def _left(self, run: Run, speed: float) -> float:
        """Seconds the run still needs (its current step counted from its start)."""
        left = self._seconds(run.step_work[run.next_step:], speed)
        if run.step_started is not None:
            left = max(left - (time.monotonic() - run.step_started), 0.1)
        return left

    def status(self, run: Run) -> RunStatus:
        speed = self.speed()  # not under the lock: its first call reads the store
        restart = self.restart_left()
        with self._cond:  # the scheduler changes a run's steps and times under it (_step)
            progress = min((run.next_step + run.inner) / max(run.steps, 1), 1.0)
            total = self._seconds(run.step_work, speed)
            if run.event.is_set():
                return RunStatus(run.error.reason if run.error and run.error.reason ==
                                 "cancelled" else ("failed" if run.error else "done"),
                                 progress=1.0, run_seconds=total)
            if run.state == "remote":
                return RunStatus("remote", run_seconds=total, left=total)
            left = self._left(run, speed)
            if run.next_step > 0 or run is self._current:
                if run.step_started is None and restart:  # its step waits for the worker
                    return RunStatus("queued", start_in=restart, run_seconds=total,
                                     left=restart + left, restart=restart)
                return RunStatus("running", run_seconds=total, left=left, progress=progress,
                                 elapsed=run.used_seconds + (
                                     time.monotonic() - run.step_started
                                     if run.step_started else 0.0))
            order = self._order()
            ahead = order[:order.index(run)] if run in order else []
            start_in = 0.0
            current = self._current
            if current is not None and current.background and not run.background:
                current = None  # a background step yields to a learner at once
            # The run on the device may be past its last step (storing its result) while
            # it is still current: then nothing of it is left to wait for.
            if current is not None and current.next_step < current.steps:
                start_in += max(self._seconds([current.step_work[current.next_step]], speed)
                                - (time.monotonic() - (current.step_started
                                                       or time.monotonic())), 0.1)
            start_in += self._seconds([r.step_work[r.next_step] for r in ahead], speed)
            # A cancel (or a time-out, a crash) killed the worker: nothing is ahead, but the
            # fresh process takes seconds to start (it said "0 ahead, about 0 s" meanwhile).
            start_in += restart
            return RunStatus("queued", ahead=len(ahead) + (current is not None),
                             start_in=start_in, run_seconds=total, left=start_in + total,
                             restart=restart)
