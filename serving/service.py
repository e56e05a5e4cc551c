"""The demo runtime of a server process: one queue per device, the result store, the
worker process. Plain Python objects owned by the process (never a Streamlit cache, so no
client message can clear them), each behind a lock.

* `submit(job, requester)` gives a `Ticket`. A result the store holds is served at once;
  a request for a key already queued or running (in this process, or claimed by another
  process sharing the database) waits for that one run.
* One scheduler thread runs the steps of the queued runs in the worker process, one step
  at a time, round-robin: a long search (what-fits, a sweep) yields the device after each
  step, so a short run that arrives meanwhile runs after at most one step of it. Learners'
  runs that have shown nothing yet go first, the shortest next step first (equal ones in
  arrival order, one waiting OVERDUE_S first: `_first_numbers_first`). The background
  runs, the start-up warm-up's and then the idle-time ones (the neighbours of the pages'
  defaults: `warm(jobs, idle=True)`), go only once no learner has asked for a run or
  drawn a page for IDLE_AFTER_S. A learner never waits behind a background step: when their
  run arrives or their page draws, the step on the device is interrupted in place (the
  worker process lives on, serving.worker) and runs again, from its start, once the
  learners have gone quiet. The server's own drawing before it listens is no learner.
* A run every requester has left (released its ticket, or stopped sending heartbeats) is
  cancelled: the worker is killed and restarted, the device is free. A run is capped in
  time; a finished result is always stored, whoever still waits for it.
* A run's result so far (a comparison's memory as soon as the tracked runs end, then its
  times round by round; a sweep's points step by step) is on its tickets while the rest
  runs, for the page to show.
* Estimates: each step's work is `memory.theory.cpu_seconds`; this device's measured
  seconds per unit of work (the median of the latest few runs, kept in the store across
  restarts) turns work into a run's estimate. A waiting page's numbers follow the
  scheduler's latest turns, each timed whole (serving.estimates.step_model), and say so
  when none on this load backs them. While the worker process restarts (after a cancel,
  a time-out, a crash) the wait includes the restart.

Its parts: the runs and tickets (serving.tickets), the estimates and statuses
(serving.estimates), measuring busy-timed results again (serving.idle_remeasure),
the leases and runs other processes measure (serving.housekeeping).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from demos.device import DeviceInfo, detect_device
from serving.estimates import RunEstimates
from serving.housekeeping import Housekeeping
from serving.idle_remeasure import BusyRemeasuring
from serving.jobs import MEMORY_FACTOR, MEMORY_SLACK_BYTES, PARTIAL_KINDS, Job, store_key
from serving.store import ResultStore
from serving.tickets import Run, RunRefused, Ticket, request_json
from serving.worker import DeviceWorker, StepFailed

log = logging.getLogger(__name__)

MAX_RUN_SECONDS = 900.0  # no run holds the device longer (its steps' time together)
MIN_CAP_SECONDS = 60.0
CAP_FACTOR = 6.0  # × the run's estimate: the cap of an estimated run
MEMORY_CACHE = 256  # decoded results kept in this process
IDLE_AFTER_S = 5.0  # idle-time runs start this long after a learner's last run or request
# A learner's run that has shown nothing this long after it was asked for goes before
# every shorter first step (in arrival order): shortest first never starves it.
OVERDUE_S = 30.0


class DemoService(RunEstimates, BusyRemeasuring, Housekeeping):
    def __init__(self, device: DeviceInfo | None = None, store: ResultStore | None = None,
                 worker: DeviceWorker | None = None, *, owner: str | None = None,
                 memory_limit: int | None = None, time_cap_s: float = MAX_RUN_SECONDS,
                 use_store: bool = True) -> None:
        self.device = device or detect_device()
        self.store = (store or ResultStore()) if use_store else None
        self.worker = worker or DeviceWorker(self.device.kind)
        self.owner = owner or f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        if memory_limit is None:
            from demos.measure import default_limit

            memory_limit = default_limit(self.device)
        self.memory_limit = memory_limit
        self.time_cap_s = time_cap_s
        self._cond = threading.Condition()
        self._queue: deque[Run] = deque()
        self._current: Run | None = None
        self._active: dict[str, Run] = {}  # queued, running or remote, by key
        self._remote: list[Run] = []
        self._results: OrderedDict[str, Any] = OrderedDict()
        self._history: deque[tuple[float, float]] = deque(maxlen=50)
        self._history_loaded = False
        self._history_lock = threading.Lock()
        # the scheduler's latest turns, whole, and the one under way (the waits' estimates)
        self._turns: deque[tuple[float, float, float]] = deque(maxlen=50)
        self._turn: tuple[Run, int, float] | None = None
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._last_foreground = -IDLE_AFTER_S  # when a learner last asked or was served
        self.runs_started = 0  # engine runs this process made (tests, benchmarks)
        self.cancelled = 0
        # stored results timed while busy, to measure again when idle (key -> job), and
        # the keys already measured again
        self._busy: OrderedDict[str, Job] = OrderedDict()
        self._remeasured: set[str] = set()

    @property
    def device_label(self) -> str:
        return f"{self.device.kind}:{self.device.name}"

    # ------------------------------------------------------------------ life cycle
    def start(self, worker: bool = True) -> DemoService:
        """Start the scheduler and housekeeping threads (and the worker process)."""
        with self._cond:
            if self._threads:
                return self
            for target, name in ((self._schedule, "demo-scheduler"),
                                 (self._housekeep, "demo-housekeeping")):
                thread = threading.Thread(target=target, name=name, daemon=True)
                thread.start()
                self._threads.append(thread)
        if worker:
            threading.Thread(target=self._start_worker, name="demo-worker-start",
                             daemon=True).start()
        return self

    def _start_worker(self) -> None:
        try:
            self.worker.start()
        except Exception:  # noqa: BLE001 - the first run starts it again, and says why
            log.warning("the demo worker did not start", exc_info=True)

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self.worker.stop()
        for thread in self._threads:
            thread.join(5)

    def _order(self) -> list[Run]:
        """The queued runs in the order they will get the device next: the learners' runs
        (`_first_numbers_first`), then, only while no learner is here (none has asked for a
        run or drawn a page for IDLE_AFTER_S), the warm-up's (`_first_numbers_first`
        too: the server listens once their first numbers are in, and their timed steps
        wait behind every first step), then the idle-time runs. A learner's pages get the
        CPU; a learner who opens a view the warm-up has not measured yet joins its run,
        which then goes first."""
        now = time.monotonic()
        if self._learners_first(now):
            return _first_numbers_first([r for r in self._queue if not r.background], now)
        warm = _first_numbers_first([r for r in self._queue if r.background and not r.idle],
                                    now)
        return sorted(warm, key=_listen_rank) + [r for r in self._queue if r.idle]

    def _learners_first(self, now: float) -> bool:
        """A learner's run is queued, or a learner asked for a run or drew a page within
        IDLE_AFTER_S: no background step now (lock held)."""
        return (now - self._last_foreground < IDLE_AFTER_S
                or any(not r.background for r in self._queue))

    def _yields(self, run: Run) -> bool:
        """Whether a background step on the device gives way now: a learner's run waits,
        or a learner is here (`_order`). The step is interrupted at once, not finished on
        the CPU the learner's page needs, and runs again from its start once the learners
        have gone quiet."""
        if not run.background:
            return False
        with self._cond:
            return self._learners_first(time.monotonic())

    def waiting(self) -> int:
        """Runs queued or running in this process."""
        with self._cond:
            return len(self._queue) + (self._current is not None)

    # ------------------------------------------------------------------ submitting
    def touch(self) -> None:
        """A learner is here (a demo page ran, served or not): idle-time runs wait."""
        with self._cond:
            self._last_foreground = time.monotonic()

    def cached(self, job: Job) -> Any:
        """The result, if this process or the store has it (no run started)."""
        key = store_key(job, self.device)
        with self._cond:
            if key in self._results:
                self._results.move_to_end(key)
                return self._results[key]
        if self.store is None:
            return None
        try:
            result = self.store.get(key)
        except SQLAlchemyError:
            log.exception("result store unavailable")
            return None
        if result is not None:
            self._remember(key, result)
            self._note_busy(key, job, result)
        return result

    def in_progress(self, job: Job) -> bool:
        """The job's run is queued or running (here, or on another server sharing the
        store): a learner asking for it joins that run and adds no work."""
        key = store_key(job, self.device)
        with self._cond:
            return key in self._active

    def partial_of(self, job: Job) -> Any:
        """What the job's run under way has measured so far (None when it has nothing
        yet or is not under way here), without joining it."""
        key = store_key(job, self.device)
        with self._cond:
            run = self._active.get(key)
            return run.partial if run is not None else None

    def _remember(self, key: str, result: Any) -> None:
        with self._cond:
            self._results[key] = result
            self._results.move_to_end(key)
            while len(self._results) > MEMORY_CACHE:
                self._results.popitem(last=False)

    def submit(self, job: Job, requester: str = "", background: bool = False,
               idle: bool = False) -> Ticket:
        """A ticket for the job's result: done at once when known, else queued (or
        waiting for the same run elsewhere). RunRefused when it cannot fit. `background`:
        behind every learner; `idle` (background too): only while the server is idle."""
        kind = self.device.kind
        key = store_key(job, self.device)
        background = background or idle
        with self._cond:
            if not background:
                self._last_foreground = time.monotonic()
            run = self._active.get(key)
            if run is not None:
                run.kept = run.kept or (run.background and not background)
                run.background = run.background and background
                run.idle = run.idle and idle
                return self._ticket(run, requester)
        result = self.cached(job)
        if result is not None:
            return self._finished(key, job, result, requester)
        need = job.memory_bytes(kind)
        if (job.kind in ("fits", "train") and self.memory_limit is not None
                and need > self.memory_limit):
            raise RunRefused("memory", need_bytes=need, limit_bytes=self.memory_limit)
        step_work = [job.step_work(i, kind) for i in range(job.step_count())]
        bound = min(need, self.memory_limit or 2**62)
        run = Run(key, job, step_work, int(bound * MEMORY_FACTOR) + MEMORY_SLACK_BYTES,
                   background=background, idle=idle)
        claim_mine = True
        # An idle-time run claims its key only when it starts: queued for long behind
        # everything, a claim would make another server's learner wait for it.
        run.claimed = self.store is None or not idle
        if self.store is not None and not idle:
            try:
                claim = self.store.claim(key, self.owner, job.kind, self.device_label,
                                         request_json(job))
            except SQLAlchemyError:
                log.exception("result store unavailable")
            else:
                if claim.ready:
                    self._remember(key, claim.result)
                    return self._finished(key, job, claim.result, requester)
                claim_mine = claim.mine
        with self._cond:
            existing = self._active.get(key)  # another thread of ours got here first
            if existing is not None:
                existing.kept = existing.kept or (existing.background and not background)
                existing.background = existing.background and background
                existing.idle = existing.idle and idle
                return self._ticket(existing, requester)
            self._active[key] = run
            if claim_mine:
                run.last_renew = time.monotonic()
                self._queue.append(run)
            else:
                run.state = "remote"
                self._remote.append(run)
            ticket = self._ticket(run, requester)
            self._cond.notify_all()
        return ticket

    def _ticket(self, run: Run, requester: str) -> Ticket:
        ticket = Ticket(self, run, requester)
        run.tickets.append(ticket)
        return ticket

    def _finished(self, key: str, job: Job, result: Any, requester: str) -> Ticket:
        run = Run(key, job, [0.0], 0, state="done", result=result)
        run.event.set()
        return Ticket(self, run, requester)

    def before_listening(self, first: Iterable[Ticket], whole: Iterable[Ticket]) -> None:
        """The warm-up runs the server waits for before it listens: the first numbers of
        `first`, the whole of `whole`. Their steps go before the rest of the warm-up's:
        every first number, then the whole ones' later steps, then the others."""
        with self._cond:
            for ticket in first:
                ticket._run.before_listening = "first"
            for ticket in whole:
                ticket._run.before_listening = "whole"
            self._cond.notify_all()

    def warm(self, jobs: Iterable[Job], idle: bool = False) -> list[Ticket]:
        """Queue runs nobody waits for yet (the common views), behind every learner;
        `idle`: only while no learner has asked for a run for IDLE_AFTER_S (the slider
        steps next to the defaults, so a learner's first move is served from the store)."""
        tickets = []
        for job in jobs:
            try:
                tickets.append(self.submit(job, "idle-time" if idle else "warm-up",
                                           background=True, idle=idle))
            except RunRefused:
                continue
        return tickets

    # ------------------------------------------------------------------ the scheduler
    def _next(self) -> Run | None:
        with self._cond:
            while not self._stopping:
                now = time.monotonic()
                for run in [r for r in self._queue if not r.wanted(now)]:
                    self._queue.remove(run)
                    self._end(run, error=StepFailed("cancelled"))
                order = self._order()
                if not order and (again := self._remeasure_run()) is not None:
                    order = [again]
                    self._queue.append(again)
                if order:
                    run = order[0]
                    self._queue.remove(run)
                    self._current = run
                    run.state = "running"
                    return run
                self._cond.wait(0.25)
        return None

    def _schedule(self) -> None:
        while (run := self._next()) is not None:
            self._take_turn(run)

    def _take_turn(self, run: Run) -> None:
        """One step of `run`, timed whole for the estimates (the worker's start and the
        result's storing too: the runs behind it wait for all of it)."""
        index, began = self.turn_began(run)
        try:
            self._step(run)
        except Exception:  # noqa: BLE001 - the scheduler must live on
            log.exception("demo run failed")
            self._end(run, error=StepFailed("error", "internal error"))
        finally:
            with self._cond:
                self._current = None
            self.turn_ended(run, index, began)

    def _step(self, run: Run) -> None:
        """Run the next step of `run`; requeue it (at the back) or finish it."""
        index = run.next_step
        if not run.claimed and not self._claim_at_start(run):
            return
        if run.next_step == 0 and not run.parts and not run.preemptions:
            self.runs_started += 1
        cap = min(self.time_cap_s, max(MIN_CAP_SECONDS, CAP_FACTOR * self._seconds(
            run.step_work, self.speed())))
        try:
            self.worker.start()  # not counted in the run's time
        except StepFailed as failure:
            self._end(run, error=failure)
            return
        started = time.monotonic()
        with self._cond:
            run.step_started, run.inner = started, 0.0

        def on_progress(done: int, total: int) -> None:
            run.inner = done / max(total, 1)

        def on_partial(part: Any) -> None:
            self._set_partial(run, run.job.merge([*run.parts, part]))

        preempted = False
        try:
            part = self.worker.call(
                run.job, index, limit_bytes=self.memory_limit, memory_bound=run.memory_bound,
                deadline=started + cap - run.used_seconds,
                should_stop=lambda: not run.wanted(time.monotonic()),
                should_yield=lambda: self._yields(run),
                on_progress=on_progress, on_tick=lambda: self._renew(run),
                on_partial=on_partial)
        except StepFailed as failure:
            if failure.reason == "preempted":
                preempted = True
                self._requeue_preempted(run)
                return
            if failure.reason == "time-limit":
                failure.numbers.setdefault("cap", cap)
            # Ended first: until then the run is active, and a learner asking for the same
            # demo while the fresh worker starts (seconds) would join it and get its error.
            self._end(run, error=failure)
            if failure.reason in ("cancelled", "time-limit", "memory-limit", "crashed"):
                self._start_worker()  # a fresh process for whoever is next
            return
        finally:
            seconds = time.monotonic() - started
            with self._cond:
                if not preempted:  # an interrupted step's time is not the run's
                    run.used_seconds += seconds
                run.step_started = None
        # Under the lock, in one go: status() (a page) reads next_step, inner and the
        # history while this thread ends a step. Counting the step and clearing its progress
        # together keeps the bar at the steps done (it showed one step more between steps,
        # and 2.0 after the last); next_step moving between status's check and its index
        # of step_work raised IndexError.
        with self._cond:
            if run.step_work[index] > 0:
                self._history.append((run.step_work[index], seconds))
            run.parts.append(part)
            run.next_step += 1
            run.inner = 0.0
            if run.next_step < run.steps:
                if run.job.kind in PARTIAL_KINDS:
                    run.partial, run.partial_version = (run.job.merge(run.parts),
                                                        run.partial_version + 1)
                run.state = "queued"
                self._queue.append(run)  # round-robin: the others' turn first
                self._cond.notify_all()
                return
        result = run.job.merge(run.parts)
        if self.store is not None:
            try:
                self.store.put(run.key, self.owner, result, run.used_seconds,
                               sum(run.step_work), kind=run.job.kind,
                               device=self.device_label, request=request_json(run.job))
            except SQLAlchemyError:
                log.exception("result store unavailable")
        self._remember(run.key, result)
        self._note_busy(run.key, run.job, result)
        self._end(run, result=result)

    def _requeue_preempted(self, run: Run) -> None:
        """A background step interrupted for a learner: the run goes back to the head of
        the queue (first of the background runs once no learner waits), its step to be
        run again from its start; its parts so far are kept."""
        with self._cond:
            run.preemptions += 1
            run.inner = 0.0
            run.state = "queued"
            self._queue.appendleft(run)
            self._cond.notify_all()

    def _claim_at_start(self, run: Run) -> bool:
        """Claim an idle-time run's key as it starts: False when another process has the
        result (it is served) or measures it now (the run follows that one)."""
        assert self.store is not None
        try:
            claim = self.store.claim(run.key, self.owner, run.job.kind, self.device_label,
                                     request_json(run.job))
        except SQLAlchemyError:
            log.exception("result store unavailable")
            run.claimed = True  # measured here; its result is stored if the store is back
            return True
        if claim.ready:
            self._remember(run.key, claim.result)
            self._end(run, result=claim.result)
            return False
        if not claim.mine:
            with self._cond:
                run.state = "remote"
                self._remote.append(run)
            return False
        run.claimed, run.last_renew = True, time.monotonic()
        return True

    def _set_partial(self, run: Run, partial: Any) -> None:
        with self._cond:
            run.partial, run.partial_version = partial, run.partial_version + 1
            self._cond.notify_all()  # a page waiting for its first numbers draws them now

    def _end(self, run: Run, result: Any = None, error: StepFailed | None = None) -> None:
        with self._cond:
            if self._active.get(run.key) is run:
                del self._active[run.key]
            if self._current is run:  # ended: not ahead of anyone while the worker restarts
                self._current = None
            run.result, run.error = result, error
            run.state = "done" if error is None else "failed"
            if not run.background:
                self._last_foreground = time.monotonic()
            if error is not None and error.reason == "cancelled":
                self.cancelled += 1
            self._cond.notify_all()
        if error is not None and self.store is not None:
            try:
                self.store.release(run.key, self.owner)
            except SQLAlchemyError:
                log.exception("result store unavailable")
        run.event.set()


def _shown(run: Run) -> bool:
    """The run has shown numbers (a comparison's memory, a sweep's first values), or its
    page shows another run's first (Job.later_part): its next step only adds to them."""
    return (run.next_step > 0 and run.job.kind in PARTIAL_KINDS) or run.job.later_part()


def _listen_rank(run: Run) -> int:
    """A warm-up run's place while the server waits to listen (`before_listening`): the
    first numbers it waits for, then the later steps of the runs it waits for whole, then
    the rest."""
    if run.before_listening is not None and not _shown(run):
        return 0
    return 1 if run.before_listening == "whole" else 2


def _first_numbers_first(runs: list[Run], now: float) -> list[Run]:
    """Learners' runs in the order they get the device: a run that has shown nothing yet
    before one that has (a comparison's timed steps, a sweep's later values), and among
    them the shortest next step first, so a class arriving at once sees its first numbers
    after the short steps rather than behind one long one (a lesson's large timeline held
    twenty learners for minutes); equal steps keep their arrival order, and a run that has
    shown nothing OVERDUE_S after it was asked for goes first."""
    def key(run: Run) -> tuple[bool, bool, float]:
        shown = _shown(run)
        overdue = not shown and now - run.created > OVERDUE_S
        return (not overdue, shown, 0.0 if overdue else run.step_work[run.next_step])

    return sorted(runs, key=key)


# ---------------------------------------------------------------------- the process's one

_service: DemoService | None = None
_service_lock = threading.Lock()


def get_service() -> DemoService:
    """This process's service, created and started on first use."""
    global _service
    with _service_lock:
        if _service is None:
            _service = DemoService().start()
        return _service


def note_learner() -> None:
    """A learner's page is drawing (any page: the router calls it first): the running
    service's background runs give way at once. Starts no service."""
    with _service_lock:
        running = _service
    if running is not None:
        running.touch()


def set_service(service: DemoService | None) -> DemoService | None:
    """Replace the process's service (tests); returns the old one, not stopped."""
    global _service
    with _service_lock:
        old, _service = _service, service
        return old
