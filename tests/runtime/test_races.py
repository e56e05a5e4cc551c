"""Races between the pages' threads (submit, status, estimate) and the service's scheduler
and housekeeping threads. Each test holds one thread inside the window with events, so it
fails on the code that had the window every time, not by chance."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy import inspect

from memory.strategies import parse_strategies
from serving import store as store_module
from serving.jobs import Job
from serving.store import ResultStore
from serving.worker import DeviceWorker, StepFailed
from storage.database import engine_for
from tests.runtime.conftest import TINY, FakeWorker, SlowPutStore, tiny_compare, wait_for


class _ProgressWorker(FakeWorker):
    """Reports each step's progress as complete (done == total) before returning, as the
    engine does; `start` holds once `hold_start` is set, until `go` is."""

    def __init__(self) -> None:
        super().__init__(lambda job, index: 0.02)
        self.hold_start, self.in_start, self.go = (threading.Event(), threading.Event(),
                                                   threading.Event())

    def start(self) -> None:
        if self.hold_start.is_set():
            self.in_start.set()
            assert self.go.wait(10)
            self.hold_start.clear()
        super().start()

    def call(self, job, index, *, on_progress=None, **kwargs):
        part = super().call(job, index, **kwargs)
        if on_progress is not None:
            on_progress(3, 3)
        if index == 0:
            self.hold_start.set()  # the scheduler's next step starts with worker.start()
        return part


def test_progress_is_the_steps_done_between_steps_and_never_above_one(
        make_service, store_dir) -> None:
    """After a step, `next_step` counted it while `inner` still said 1.0 for it: between
    two steps the bar showed one step more (100 % of a two-step run after its first), and
    while the run stored its result it said 2.0 (over st.progress's 0..1)."""
    entered, release = threading.Event(), threading.Event()
    worker = _ProgressWorker()
    svc = make_service(worker=worker, store=SlowPutStore(store_dir, entered, release))
    ticket = svc.submit(Job.make("sweep", TINY.replace(seed=1), parse_strategies("none"),
                                 vary="layers",
                                 values=(1, 2), repeats=1), "a")
    try:
        assert worker.in_start.wait(10)  # step 0 done, step 1 not begun
        between = ticket.status()
        worker.go.set()
        assert entered.wait(10)  # both steps done, the result being stored
        storing = ticket.status()
    finally:
        worker.go.set()
        release.set()
    assert between.state == "running" and between.progress == pytest.approx(0.5)
    assert storing.state == "running" and 0.0 <= storing.progress <= 1.0
    assert ticket.wait(10) and ticket.error is None


class _HoldingSteps(list):
    """A run's step list whose len() (the "is a step left" check of a queued run's wait)
    holds the thread that armed it until the run's last step ended, or 1 s."""

    def __init__(self, steps: list[float], run) -> None:
        super().__init__(steps)
        self.run, self.armed_by, self.checking = run, None, threading.Event()

    def __len__(self) -> int:
        if threading.current_thread() is self.armed_by:
            self.armed_by = None
            self.checking.set()
            # On the fixed code the scheduler cannot move on meanwhile: then 1 s passes.
            with contextlib.suppress(AssertionError):
                wait_for(lambda: self.run.next_step >= super(_HoldingSteps, self).__len__(),
                         timeout=1.0)
        return super().__len__()


def test_a_queued_runs_wait_reads_the_current_runs_step_once(make_service) -> None:
    """564ff00 checked `next_step < steps`, then indexed `step_work[next_step]`, reading
    `next_step` again: the scheduler, which advanced it without the lock, could end the
    last step in between, and the page got the same IndexError."""
    # Long waits that end as soon as the test sets `go`: on a starved test process a 10 s
    # wait ran out before the second run was even submitted, and both runs ended.
    go = threading.Event()
    worker = FakeWorker(lambda job, index: 0.0 if go.wait(120) else 0.0)
    svc = make_service(worker=worker, use_store=False)
    first = svc.submit(tiny_compare(seed=1), "a")
    wait_for(lambda: first.status().state == "running")
    run = first._run  # the window needs a hook inside the run's own step list
    hook = _HoldingSteps(run.step_work, run)
    run.step_work = hook
    second = svc.submit(tiny_compare(seed=2), "b")
    hook.armed_by = threading.current_thread()
    threading.Thread(target=lambda: hook.checking.wait(120) and go.set(), daemon=True).start()
    try:
        status = second.status()  # the worker ends first's only step while this checks
    finally:
        go.set()
    assert status.state == "queued" and status.start_in >= 0
    assert first.wait(10) and second.wait(10)


class _SlowWork(float):
    """A step's work from the stored history; comparing it holds the thread `holds` (a
    page computing the speed) until `go`, after telling `entered`."""

    holds: threading.Thread | None = None
    entered = threading.Event()
    go = threading.Event()

    def __ge__(self, other: float) -> bool:
        if threading.current_thread() is _SlowWork.holds:
            _SlowWork.entered.set()
            assert _SlowWork.go.wait(10)
        return float(self) >= other


class _HistoryStore(ResultStore):
    def speed_history(self, device: str, limit: int = 50) -> list[tuple[float, float]]:
        return [(_SlowWork(1.0), 1.3), (_SlowWork(2.0), 2.3)]


def test_a_page_can_estimate_while_the_scheduler_records_a_steps_time(
        make_service, store_dir) -> None:
    """`speed()` (a page's estimate, a queued run's status) iterated the history deque
    while the scheduler appended a finished step's time to it: RuntimeError, deque
    mutated during iteration, into the page."""
    _SlowWork.entered.clear()
    _SlowWork.go.clear()
    svc = make_service(worker=FakeWorker(lambda job, index: 0.02),
                       store=_HistoryStore(store_dir))
    errors: list[BaseException] = []
    estimates: list[float] = []

    def page() -> None:
        try:
            estimates.append(svc.estimate(tiny_compare(seed=0)))
        except BaseException as error:  # noqa: BLE001 - the test reports it
            errors.append(error)

    thread = threading.Thread(target=page)
    _SlowWork.holds = thread
    thread.start()
    try:
        assert _SlowWork.entered.wait(10)  # the page is inside the history
        ticket = svc.submit(tiny_compare(seed=1), "b")
        assert ticket.wait(10) and ticket.error is None  # its step's time was recorded
    finally:
        _SlowWork.go.set()
        thread.join(10)
        _SlowWork.holds = None
    assert not errors, errors
    assert estimates and estimates[0] > 0


class _FailsFirst(FakeWorker):
    def __init__(self) -> None:
        super().__init__(lambda job, index: 0.02)
        self.failed = False

    def call(self, job, index, **kwargs):
        if not self.failed:
            self.failed = True
            raise StepFailed("error", "boom")
        return super().call(job, index, **kwargs)


class _SlowReleaseStore(ResultStore):
    """Holds a failed run's release of its claim until `go`."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.entered, self.go = threading.Event(), threading.Event()

    def release(self, key: str, owner: str) -> None:
        self.entered.set()
        assert self.go.wait(10)
        super().release(key, owner)


def test_a_result_is_stored_when_a_failed_runs_release_removed_the_new_claim(
        make_service, store_dir) -> None:
    """A failed run leaves the queue, then gives its claim up in the store. A learner
    asking for the same demo in between claims the row again (the same owner: this
    process) and queues a new run; the release then deletes that claim, and the new run's
    `put` (an UPDATE of the claimed row) stored nothing: the result was lost."""
    store = _SlowReleaseStore(store_dir)
    svc = make_service(worker=_FailsFirst(), store=store)
    first = svc.submit(tiny_compare(seed=1), "a")
    try:
        assert store.entered.wait(10)  # first failed, its claim not yet given up
        second = svc.submit(tiny_compare(seed=1), "b")
    finally:
        store.go.set()
    assert first.wait(10) and first.error is not None
    assert second.wait(10) and second.error is None
    assert ResultStore(store_dir).get(second.key) is not None


def test_two_threads_creating_the_result_table_at_once_both_go_on(
        store_dir, monkeypatch: pytest.MonkeyPatch) -> None:
    """The table is created on first use when storage.database prepared the database before
    serving.store declared it. Two threads (the warm-up and a page) could both find it
    missing and both CREATE it: the second got "table demo_results already exists"."""
    engine = engine_for(store_dir)
    store_module.demo_results.drop(engine)  # as before serving.store was imported
    both_checked = threading.Barrier(2, timeout=1.0)
    real_create = store_module.demo_results.create

    def create(bind, checkfirst: bool = False) -> None:
        """SQLAlchemy's checkfirst, with both threads checked before either creates."""
        missing = not inspect(bind).has_table(store_module.demo_results.name)
        with contextlib.suppress(threading.BrokenBarrierError):  # only one got here
            both_checked.wait()
        if missing:
            real_create(bind, checkfirst=False)

    monkeypatch.setattr(store_module.demo_results, "create", create)
    monkeypatch.setattr(store_module, "_created", set())
    errors: list[BaseException] = []

    def first_use() -> None:
        try:
            ResultStore(store_dir).count()
        except BaseException as error:  # noqa: BLE001 - the test reports it
            errors.append(error)

    threads = [threading.Thread(target=first_use) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not errors, errors
    assert inspect(engine).has_table(store_module.demo_results.name)


class _SlowRestart(FakeWorker):
    """A step runs until cancelled; the fresh worker started after a cancel (the kill)
    holds in `start` until `go` (a real one imports torch and warms the engine)."""

    def __init__(self) -> None:
        super().__init__(lambda job, index: 0.02 if self.killed else 30.0)
        self.restarting, self.go, self.killed = (threading.Event(), threading.Event(),
                                                 False)

    def start(self) -> None:
        if self.killed and not self.go.is_set():
            self.restarting.set()
            assert self.go.wait(10)
        super().start()

    def call(self, job, index, **kwargs):
        try:
            return super().call(job, index, **kwargs)
        except StepFailed:
            self.killed = True
            raise


def test_a_learner_asking_while_the_worker_restarts_after_a_cancel_gets_a_new_run(
        make_service) -> None:
    """A cancelled run stayed in the active runs while the worker process was restarted
    (seconds with a real engine): a learner asking for the same demo then joined the dead
    run and was told "The run was cancelled" for a run they never left."""
    worker = _SlowRestart()
    svc = make_service(worker=worker, use_store=False)
    first = svc.submit(tiny_compare(seed=1), "a")
    wait_for(lambda: first.status().state == "running")
    first.release()  # learner a leaves: cancelled after the grace time
    try:
        assert worker.restarting.wait(10)  # killed, the fresh worker is starting
        assert first.done and svc.waiting() == 0  # ended, no longer on the device
        again = svc.submit(tiny_compare(seed=1), "b")
    finally:
        worker.go.set()
    assert first.wait(10) and first.error is not None and first.error.reason == "cancelled"
    assert again.wait(10) and again.error is None


class _SlowHistoryStore(ResultStore):
    """Stored speed history three times the default (1 s per CPU-estimate second), read
    once `go` is set."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.entered, self.go = threading.Event(), threading.Event()

    def speed_history(self, device: str, limit: int = 50) -> list[tuple[float, float]]:
        self.entered.set()
        assert self.go.wait(10)
        return [(2.0, 6.3), (4.0, 12.3)]


def test_a_page_asking_the_speed_while_another_loads_it_waits_for_the_history(
        make_service, store_dir) -> None:
    """The first `speed()` marked the history loaded before reading it: a second page
    asking meanwhile got the default speed (its estimate, or a refusal, off by the
    device's real speed)."""
    store = _SlowHistoryStore(store_dir)
    svc = make_service(worker=FakeWorker(lambda job, index: 0.02), store=store)
    speeds: list[float] = []
    loader = threading.Thread(target=lambda: speeds.append(svc.speed()))
    loader.start()
    try:
        assert store.entered.wait(10)
        asker = threading.Thread(target=lambda: speeds.append(svc.speed()))
        asker.start()
        asker.join(1.0)  # the old code answered at once; the fixed one waits for the load
    finally:
        store.go.set()
    loader.join(10)
    asker.join(10)
    assert speeds == [pytest.approx(3.0)] * 2


class _StoppedBetweenReads(DeviceWorker):
    """Its process reads as the live one once, then as gone: what `stop()` from another
    thread does between two reads of it."""

    def __init__(self) -> None:
        self.reads: list[object] = []
        super().__init__("cpu")

    @property
    def _process(self) -> object:
        return self.reads.pop(0) if self.reads else None

    @_process.setter
    def _process(self, value: object) -> None:
        pass


def test_a_worker_stopped_by_another_thread_reads_as_gone_not_as_an_error() -> None:
    """The scheduler asks `alive()` while it waits for a step; the server's `stop()` from
    another thread set the process to None between the check and `.is_alive()`: an
    AttributeError ended the run as an internal error instead of "crashed"."""
    worker = _StoppedBetweenReads()
    process = SimpleNamespace(pid=4242, is_alive=lambda: True)
    worker.reads = [process]
    assert worker.alive()
    worker.reads = [process]
    assert worker.pid == 4242
