"""The wait a page shows follows what the scheduler's turns take on this load: on a busy
2-core server a page said "18 ahead, about 8 s" and waited 174 s, because each step was
estimated with a fixed 0.3 s overhead and a speed measured on the large steps alone,
while every turn (the worker's start, the step, storing the result) took many times that.

These tests run the scheduler by hand on a fake clock: the fake worker's step takes k ×
its theory estimate (and each turn's start some more), and the estimate each queued run
was given is compared with the wait it then had."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator

import pytest

from memory.strategies import parse_strategies
from serving import estimates, service, tickets
from serving.estimates import DEFAULT_SPEED, STEP_OVERHEAD_S
from serving.jobs import Job
from serving.service import DemoService
from serving.tickets import Ticket
from tests.runtime.conftest import CPU, TINY, FakeWorker

# A step's work in CPU-estimate seconds: 0.02, 0.29, 2.3 and 0.32 (a class's first steps
# are mostly small ones, whose time is mostly the turn's overhead).
SIZES = [(4, 64, 64), (8, 128, 128), (8, 256, 256), (4, 128, 256)]
CLASS_SIZES = [SIZES[0], SIZES[1], SIZES[3]]


class FakeClock:
    def __init__(self) -> None:
        import time

        self.now = time.monotonic()  # runs' creation times come from the real clock
        self.sleep = time.sleep

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    for module in (service, estimates, tickets):
        monkeypatch.setattr(module, "time", types.SimpleNamespace(
            monotonic=fake.monotonic, sleep=fake.sleep, time=fake.monotonic))
    return fake


def theory_seconds(job: Job, index: int) -> float:
    """A step's estimate at the theory's speed (the service's start-up estimate)."""
    return STEP_OVERHEAD_S + job.step_work(index, "cpu") * DEFAULT_SPEED["cpu"]


class SlowWorker(FakeWorker):
    """Each step takes k × its theory estimate on the fake clock, and each turn's start
    `between` seconds more (the worker's pipe and the result's storing, waiting for the
    CPU); `mid_step` runs halfway through a step (a page asking meanwhile)."""

    def __init__(self, clock: FakeClock, k: float, between: float,
                 mid_step: Callable[[], None] = lambda: None) -> None:
        super().__init__(lambda job, index: 0.0)
        self.clock, self.k, self.between, self.mid_step = clock, k, between, mid_step
        self.began: dict[tuple[int, int], float] = {}
        self.tickets: list[Ticket] = []

    def start(self) -> None:
        self.clock.now += self.between

    def call(self, job, index, **_):  # noqa: ANN001, ANN003, ANN201 - the worker's call
        self.began.setdefault((job.config.seed, index), self.clock.now)
        seconds = self.k * theory_seconds(job, index)
        self.clock.now += seconds / 2
        for ticket in self.tickets:  # the waiting pages heartbeat meanwhile
            ticket.heartbeat()
        self.mid_step()
        self.clock.now += seconds / 2
        for ticket in self.tickets:
            ticket.heartbeat()
        return super().call(job, index)


def job(seed: int, size: tuple[int, int, int]) -> Job:
    layers, hidden, seq = size
    return Job.make("compare", TINY.replace(seed=seed, layers=layers, hidden=hidden,
                                            seq_len=seq, batch=2),
                    parse_strategies("none,every-layer"), repeats=1, timeline=False,
                    time_steps=True)


def turns(svc: DemoService) -> Iterator[None]:
    """The scheduler's loop, a turn at a time, on this thread."""
    while svc._queue:
        run = svc._next()
        assert run is not None
        take_turn = getattr(svc, "_take_turn", None)
        if take_turn is not None:
            take_turn(run)
        else:  # the scheduler before its turns were timed whole
            try:
                svc._step(run)
            finally:
                svc._current = None
        yield


def warm(svc: DemoService, count: int = 4) -> None:
    """The server's own runs before the class: every size measured once."""
    svc.warm(job(100 + i, SIZES[i % len(SIZES)]) for i in range(count))
    for _ in turns(svc):
        pass


@pytest.mark.parametrize("k", [1.0, 20.0])
def test_the_nth_in_line_is_told_its_real_wait_when_every_step_takes_k_times(
    clock: FakeClock, k: float,
) -> None:
    worker = SlowWorker(clock, k=k, between=0.2 * k)
    svc = DemoService(CPU, worker=worker, use_store=False)
    warm(svc)
    class_ = [svc.submit(job(i, CLASS_SIZES[i % 3]), f"learner-{i}") for i in range(12)]
    worker.tickets = class_
    asked = clock.now
    told = {t.job.config.seed: t.status() for t in class_}
    for _ in turns(svc):
        pass
    for seed, status in told.items():
        assert status.state == "queued" and getattr(status, "known", True)
        waited = worker.began[seed, 0] - asked
        if waited > 5 * k:  # the first few: the turn's start dominates, seconds either way
            assert waited / 2 <= status.start_in <= waited * 2, (seed, status, waited)
    last = max(told, key=lambda seed: worker.began[seed, 0])
    assert told[last].ahead == len(class_) - 1
    waited = worker.began[last, 0] - asked
    assert told[last].start_in == pytest.approx(waited, rel=0.25)


def test_a_page_asking_while_a_slow_step_runs_counts_what_is_left_of_it(
    clock: FakeClock,
) -> None:
    """Halfway through a step that takes 20 × its estimate, the learner behind it is told
    about what is left of it and of the steps ahead."""
    told: list[tuple[float, float]] = []
    waiting: list[Ticket] = []

    def ask() -> None:
        if waiting and not told:
            status = waiting[-1].status()
            told.append((clock.now, status.start_in))

    worker = SlowWorker(clock, k=20.0, between=4.0, mid_step=ask)
    svc = DemoService(CPU, worker=worker, use_store=False)
    warm(svc)
    waiting += [svc.submit(job(i, SIZES[2]), f"learner-{i}") for i in range(4)]
    worker.tickets = waiting
    for _ in turns(svc):
        pass
    when, start_in = told[0]
    waited = worker.began[waiting[-1].job.config.seed, 0] - when
    assert start_in == pytest.approx(waited, rel=0.5)


def test_with_no_turn_measured_on_this_load_the_wait_is_not_known(
    clock: FakeClock,
) -> None:
    worker = SlowWorker(clock, k=20.0, between=1.0)
    svc = DemoService(CPU, worker=worker, use_store=False)
    first, second = (svc.submit(job(i, SIZES[0]), f"learner-{i}") for i in range(2))
    assert second.status().known is False  # nothing measured: a number would be a guess
    worker.tickets = [first, second]
    for _ in turns(svc):
        pass
    third, fourth = (svc.submit(job(i, SIZES[0]), f"learner-{i}") for i in (7, 8))
    assert fourth.status().known is True  # two turns measured on this load


def test_turns_from_an_earlier_load_do_not_back_a_wait(clock: FakeClock) -> None:
    worker = SlowWorker(clock, k=1.0, between=0.1)
    svc = DemoService(CPU, worker=worker, use_store=False)
    warm(svc)
    clock.now += estimates.TURNS_WITHIN_S + 1  # quiet for a quarter of an hour
    svc.submit(job(1, SIZES[0]), "a")
    assert svc.submit(job(2, SIZES[0]), "b").status().known is False


def test_a_page_says_it_has_no_estimate_rather_than_a_guess() -> None:
    from serving.estimates import WaitStatus
    from ui.demo_status import show_status

    shown: list[str] = []

    class Notice:
        def info(self, body: str, **_: object) -> None:
            shown.append(body)

        def progress(self, value: float, text: str = "") -> None:
            shown.append(text)

    class Ticket:
        def __init__(self, status: WaitStatus) -> None:
            self._status = status

        def status(self) -> WaitStatus:
            return self._status

    show_status(Ticket(WaitStatus("queued", ahead=4, start_in=3.0, known=False)), Notice(),
                "CPU")
    show_status(Ticket(WaitStatus("running", elapsed=12.0, left=1.0, known=False)), Notice(),
                "CPU")
    show_status(Ticket(WaitStatus("queued", ahead=4, start_in=30.0)), Notice(), "CPU")
    assert "4 ahead; no estimate yet on this load" in shown[0] and "about" not in shown[0]
    assert "(12 s so far); no estimate yet on this load" in shown[1]
    assert "4 ahead, about 30 s until this run starts" in shown[2]


def test_a_waiting_page_draws_its_status_only_when_it_reads_otherwise() -> None:
    from serving.estimates import WaitStatus
    from ui.demo_status import show_status

    drawn: list[tuple[float, str]] = []

    class Notice:
        def progress(self, value: float, text: str = "") -> None:
            drawn.append((value, text))

    class Ticket:
        def __init__(self, status: WaitStatus) -> None:
            self._status = status

        def status(self) -> WaitStatus:
            return self._status

    shown = None
    for progress, elapsed in ((0.50, 1.2), (0.51, 1.3), (0.52, 1.4), (0.60, 1.4), (0.60, 2.1)):
        shown = show_status(Ticket(WaitStatus("running", elapsed=elapsed, left=1.0,
                                              progress=progress)), Notice(), "CPU", shown)
    assert [value for value, _ in drawn] == [0.5, 0.6, 0.6]  # a twentieth, a second
    assert drawn[-1][1] == "Running on the CPU: about 1 s left (2 s so far)."
