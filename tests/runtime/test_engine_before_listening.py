"""The server listens once its engine's worker can run a learner's first demo, and after
a bounded wait when the worker does not start."""

from __future__ import annotations

import time
from types import SimpleNamespace

from ui.server import wait_for_engine


class _Worker:
    def __init__(self, ready_after: float) -> None:
        self.ready_at = time.monotonic() + ready_after

    def alive(self) -> bool:
        return time.monotonic() >= self.ready_at


def test_the_server_waits_for_its_worker() -> None:
    waited = wait_for_engine(SimpleNamespace(worker=_Worker(0.5)), limit_s=30)
    assert waited is not None and 0.4 <= waited < 30


def test_a_worker_that_does_not_start_holds_the_server_for_a_bounded_time() -> None:
    began = time.monotonic()
    assert wait_for_engine(SimpleNamespace(worker=_Worker(3600)), limit_s=0.3) is None
    assert time.monotonic() - began < 30
