"""Fixtures for the demo runtime: services on a temporary result store, a fake worker."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest

from demos.device import DeviceInfo
from demos.results import Comparison
from memory.config import ModelConfig
from memory.strategies import parse_strategies
from serving.jobs import Job
from serving.service import DemoService
from serving.store import ResultStore
from serving.worker import StepFailed

TINY = ModelConfig(layers=2, hidden=32, heads=1, seq_len=8, batch=1, vocab=64)
CPU = DeviceInfo("cpu", "test cpu", 8 * 2**30, 4 * 2**30, 2, "test")


def tiny_compare(seed: int = 0, timed: bool = False) -> Job:
    """A tiny comparison: one step (its memory), or `timed` two (the memory, then the
    timed steps), as the pages' comparisons."""
    return Job.make("compare", TINY.replace(seed=seed), parse_strategies("none,every-layer"),
                    repeats=1,
                    timeline=False, time_steps=timed)


def long_training(steps: int = 1000) -> Job:
    """Minutes of training on a CPU: long enough to be cancelled or stopped."""
    return Job.make("train", ModelConfig(layers=4, hidden=256, heads=4, seq_len=256, batch=4,
                                         vocab=1024), parse_strategies("none"), steps=steps)


class FakeWorker:
    """Runs no engine: each step sleeps `seconds(job, index)` and returns a marker; the
    order of the steps it ran is in `log`, the steps interrupted for a learner (as the
    real worker does when `should_yield` turns true) in `preempted`; `step_began` and
    `step_ended` hold each finished step's monotonic start and end by (seed, index)."""

    def __init__(self, seconds: Callable[[Job, int], float]) -> None:
        self.seconds, self.log, self.starts = seconds, [], 0
        self.preempted: list[tuple[int, int]] = []
        self.step_began: dict[tuple[int, int], float] = {}
        self.step_ended: dict[tuple[int, int], float] = {}

    def start(self) -> None:
        self.starts = self.starts or 1

    def stop(self) -> None:
        pass

    def call(self, job, index, *, should_stop=lambda: False, should_yield=None,
             deadline=None, **_):
        began = time.monotonic()
        end = began + self.seconds(job, index)
        while time.monotonic() < end:
            if should_stop():
                raise StepFailed("cancelled")
            if should_yield is not None and should_yield():
                self.preempted.append((job.config.seed, index))
                raise StepFailed("preempted")
            if deadline is not None and time.monotonic() > deadline:
                raise StepFailed("time-limit")
            time.sleep(0.01)
        self.log.append((job.config.seed, index))
        self.step_began[job.config.seed, index] = began
        self.step_ended[job.config.seed, index] = time.monotonic()
        if job.timed_apart():  # its parts merge as comparisons (memory, then times)
            return Comparison(job.config, CPU, [])
        return pd.DataFrame({"seed": [job.config.seed], "step": [index]})


class SlowPutStore(ResultStore):
    """Holds a finished run's result write until `release` is set (`entered` says it
    began): the run is past its last step and still current meanwhile."""

    def __init__(self, data_dir: Path, entered: threading.Event,
                 release: threading.Event) -> None:
        super().__init__(data_dir)
        self.entered, self.release = entered, release

    def put(self, *args, **kwargs) -> None:
        self.entered.set()
        assert self.release.wait(10)
        super().put(*args, **kwargs)


@pytest.fixture
def store_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.fixture
def make_service(store_dir: Path) -> Iterator[Callable[..., DemoService]]:
    made: list[DemoService] = []

    def make(**kwargs) -> DemoService:
        kwargs.setdefault("device", CPU)
        kwargs.setdefault("store", ResultStore(store_dir))
        service = DemoService(**kwargs).start(worker=False)
        made.append(service)
        return service

    yield make
    for service in made:
        service.stop()


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)
