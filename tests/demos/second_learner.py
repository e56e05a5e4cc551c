"""A second learner timed beside a hostile paste: a thread that plans a preset (Llama 3.1
8B, its shipped terms, about 50 ms alone) over and over while the test pastes what no
real config.json is, in the same process, as the server runs every learner's page in
one. The earlier planner built a tuple of 10^9 layer types for such a paste (8 GiB,
30-47 s): the other learners' pages timed out meanwhile."""

from __future__ import annotations

import statistics
import threading
import time
from types import TracebackType

from planner.cli import build_parser, inputs, report


class SecondLearner:
    """`with SecondLearner() as other: ...` plans beside the block; `other.alone` is one
    plan's median seconds before, `other.gaps` the seconds between one plan's end and the
    next one's (the first measured from the block's start)."""

    def __init__(self) -> None:
        args = build_parser().parse_args(["--model", "llama-3.1-8b"])
        self._plan = lambda: report(inputs(args))
        self._plan()  # its first plan loads the shipped terms
        times = []
        for _ in range(3):
            started = time.perf_counter()
            self._plan()
            times.append(time.perf_counter() - started)
        self.alone = statistics.median(times)
        self.plans = 0
        self.gaps: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="second-learner", daemon=True)

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop.is_set():
            self._plan()
            now = time.perf_counter()
            self.gaps.append(now - last)
            self.plans += 1
            last = now

    def __enter__(self) -> SecondLearner:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    @property
    def longest_wait(self) -> float:
        """The longest this learner went without a new plan, in seconds."""
        return max(self.gaps)
