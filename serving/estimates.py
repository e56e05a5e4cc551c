"""The demo service's estimates (a mixin of serving.service.DemoService): this
device's speed from the history of measured steps (kept in the store across restarts), the
seconds a run holds the device, and the status a waiting page shows (its place in the
queue, the wait before it starts, its progress). Locking as the service's: the speed
history's first read takes `_history_lock` before `_cond`, never under it.

A waiting page's numbers follow what the scheduler's latest turns took (`step_model`):
each turn's whole time on the device (the worker's start, the step, storing its result:
on a busy machine all of it waits for the CPU), the per-step overhead measured from the
small steps, and the ratio of what those turns took to what the model says for them, the
step under way counted once it runs past its estimate. With too few turns measured on
this load the status says so (`known` false) rather than give a number nothing backs."""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from demos.device import DeviceInfo
from serving.jobs import PARTIAL_KINDS, Job
from serving.store import ResultStore
from serving.tickets import Run, RunStatus

# The service's log: these are DemoService's methods.
log = logging.getLogger("serving.service")

DEFAULT_SPEED = {"cpu": 1.0, "cuda": 0.05}  # seconds per CPU-estimate second, before history
STEP_OVERHEAD_S = 0.3  # a step's fixed cost: the pipe, building the model, the first calls
MIN_HISTORY_WORK = 0.5  # steps this small tell the overhead, not the speed
RECENT_RUNS = 7  # the speed is the median of this many latest runs: it follows the load
RECENT_TURNS = 12  # the waits follow this many latest turns of the scheduler
MIN_TURNS = 2  # fewer turns measured on this load: the waits are not known
TURNS_WITHIN_S = 900.0  # older turns tell an earlier load
MIN_OVERHEAD_S = 0.05


@dataclass(frozen=True)
class WaitStatus(RunStatus):
    """A status whose numbers say whether measured turns on this load back them: with
    `known` false, start_in and left are the theory's guess and a page says it has no
    estimate yet."""

    known: bool = True


@dataclass(frozen=True)
class StepModel:
    """Seconds a turn holds the device: (overhead + speed × work) × ratio, each measured."""

    overhead: float  # seconds of a turn beyond its work (pipe, model, storing, the CPU)
    speed: float  # seconds per CPU-estimate second
    ratio: float = 1.0  # what the latest turns took ÷ what overhead and speed say for them
    known: bool = True  # measured turns on this load back it

    def one(self, work: float) -> float:
        return (self.overhead + self.speed * work) * self.ratio

    def seconds(self, works: Iterable[float]) -> float:
        return sum(self.one(work) for work in works)


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
    _turns: deque[tuple[float, float, float]]  # (ended, work, seconds) of the latest turns
    _turn: tuple[Run, int, float] | None  # the turn under way: run, step, its start
    _queue: deque[Run]
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

    def first_numbers_seconds(self, jobs: Iterable[Job]) -> float:
        """Estimated seconds until every job shows its first numbers, run one after
        another (the worker's start first): a comparison's or a sweep's first step (its
        memory, its first point), any other run whole."""
        kind, speed = self.device.kind, self.speed()
        works = [work for job in jobs
                 for work in ([job.step_work(0, kind)] if job.kind in PARTIAL_KINDS
                              else [job.step_work(i, kind) for i in range(job.step_count())])]
        return self.restart_left() + self._seconds(works, speed)

    @staticmethod
    def _seconds(works: Iterable[float], speed: float) -> float:
        return sum(STEP_OVERHEAD_S + work * speed for work in works)

    # ---------------------------------------------------------------- the waits
    def turn_began(self, run: Run) -> tuple[int, float]:
        """The scheduler gives `run` the device now: its step and the turn's start."""
        began = (run.next_step, time.monotonic())
        with self._cond:
            self._turn = (run, *began)
        return began

    def turn_ended(self, run: Run, index: int, began: float) -> None:
        """Record a finished turn's whole time (the worker's start, the step, storing its
        result), as the runs waiting behind it saw it; an interrupted or failed step
        tells nothing of a step's time."""
        now = time.monotonic()
        with self._cond:
            self._turn = None
            if run.next_step > index and index < run.steps:
                self._turns.append((now, run.step_work[index], now - began))

    def step_model(self) -> StepModel:
        """The model of a turn's seconds from the latest turns on this load."""
        speed = self.speed()  # not under the lock: its first call reads the store
        now = time.monotonic()
        with self._cond:
            turns = [(work, seconds) for ended, work, seconds in self._turns
                     if now - ended <= TURNS_WITHIN_S][-RECENT_TURNS:]
            turn = self._turn
            under_way = ((turn[0].step_work[turn[1]], now - turn[2])
                         if turn is not None and turn[1] < turn[0].steps else None)
        if len(turns) < MIN_TURNS:
            return StepModel(STEP_OVERHEAD_S, speed, known=False)
        # The overhead from the small steps (their work tells little), the speed from
        # the others with that overhead; each turn measured whole.
        small = [seconds - speed * work for work, seconds in turns
                 if work < MIN_HISTORY_WORK]
        overhead = max(statistics.median(small), MIN_OVERHEAD_S) if small else STEP_OVERHEAD_S
        large = [(seconds - overhead) / work for work, seconds in turns
                 if work >= MIN_HISTORY_WORK]
        if large:
            speed = max(statistics.median(large), 1e-4)
        model = StepModel(overhead, speed)
        # Waits add turns up: the ratio of the sums (a median misses the slow turns).
        ratio = sum(s for _, s in turns) / max(model.seconds(w for w, _ in turns), 1e-6)
        model = StepModel(overhead, speed, ratio)
        if under_way is not None and under_way[1] > model.one(under_way[0]):
            # The turn under way already took longer than the model says: it counts.
            turns.append(under_way)
            ratio = (sum(s for _, s in turns)
                     / max(StepModel(overhead, speed).seconds(w for w, _ in turns), 1e-6))
            model = StepModel(overhead, speed, ratio)
        return model

    def _under_way_left(self, model: StepModel) -> float:
        """Seconds the turn on the device still needs (0 without one)."""
        turn = self._turn
        if turn is None or turn[1] >= turn[0].steps:  # storing a finished run's result
            return 0.0
        expected = model.one(turn[0].step_work[turn[1]])
        return max(expected - (time.monotonic() - turn[2]), 0.1 * expected, 0.1)

    def _left(self, run: Run, model: StepModel) -> float:
        """Seconds the run still needs (its current step counted from its start)."""
        left = model.seconds(run.step_work[run.next_step:])
        if run.step_started is not None:
            left = max(left - (time.monotonic() - run.step_started), 0.1)
        return left

    def status(self, run: Run) -> RunStatus:
        model = self.step_model()  # not under the lock: its first call reads the store
        restart = self.restart_left()
        known = model.known
        with self._cond:  # the scheduler changes a run's steps and times under it (_step)
            progress = min((run.next_step + run.inner) / max(run.steps, 1), 1.0)
            total = model.seconds(run.step_work)
            if run.event.is_set():
                return RunStatus(run.error.reason if run.error and run.error.reason ==
                                 "cancelled" else ("failed" if run.error else "done"),
                                 progress=1.0, run_seconds=total)
            if run.state == "remote":
                return RunStatus("remote", run_seconds=total, left=total)
            left = self._left(run, model)
            if run.next_step > 0 or run is self._current:
                if run.step_started is None and restart:  # its step waits for the worker
                    return WaitStatus("queued", start_in=restart, run_seconds=total,
                                      left=restart + left, restart=restart, known=known)
                if run is not self._current and run in self._queue:
                    # Between its steps: the others' turns ahead come first.
                    left += self._wait_for_turn(run, model)
                return WaitStatus("running", run_seconds=total, left=left, progress=progress,
                                  elapsed=run.used_seconds + (
                                      time.monotonic() - run.step_started
                                      if run.step_started else 0.0), known=known)
            current = self._current
            if current is not None and current.background and not run.background:
                current = None  # a background step yields to a learner at once
            start_in = self._wait_for_turn(run, model)
            ahead = len(self._ahead(run)) + (current is not None)
            # A cancel (or a time-out, a crash) killed the worker: nothing is ahead, but the
            # fresh process takes seconds to start (it said "0 ahead, about 0 s" meanwhile).
            start_in += restart
            return WaitStatus("queued", ahead=ahead, start_in=start_in, run_seconds=total,
                              left=start_in + total, restart=restart, known=known)

    def _ahead(self, run: Run) -> list[Run]:
        order = self._order()
        return order[:order.index(run)] if run in order else []

    def _wait_for_turn(self, run: Run, model: StepModel) -> float:
        """Seconds until `run`'s next turn: the turn under way (none when a background one
        yields to this learner's run), then the next step of each run ahead."""
        current = self._current
        yields = current is not None and current.background and not run.background
        under_way = 0.0 if yields else self._under_way_left(model)
        return under_way + model.seconds(r.step_work[r.next_step] for r in self._ahead(run))
