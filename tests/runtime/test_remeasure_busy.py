"""A result timed while the server was busy is measured again when it is idle."""

from __future__ import annotations

import pandas as pd

from demos.results import timed_while_busy
from serving.jobs import store_key
from tests.runtime.conftest import CPU, FakeWorker, tiny_compare, wait_for


class TimedWorker(FakeWorker):
    """Returns sweep-like rows whose CPU time is 10% of wall time on the first call (a
    busy machine) and 90% afterwards."""

    def call(self, job, index, **kwargs):
        super().call(job, index, **kwargs)
        cpu = 0.1 if len(self.log) == 1 else 0.9
        return pd.DataFrame({"strategy": ["none"], "step_seconds": [1.0],
                             "cpu_seconds": [cpu], "threads": [1], "call": [len(self.log)]})


def test_a_busy_result_is_served_then_measured_again_when_idle(make_service, store_dir,
                                                              monkeypatch) -> None:
    worker = TimedWorker(lambda job, index: 0.01)
    svc = make_service(worker=worker)
    idle = {"now": False}
    monkeypatch.setattr(type(svc), "_idle", lambda self: idle["now"])
    job = tiny_compare(seed=5)
    ticket = svc.submit(job, "a")
    ticket.wait(10)
    first = ticket.result
    assert timed_while_busy(first)
    assert svc.cached(job)["call"].iloc[0] == 1  # served at once, busy or not
    assert len(worker.log) == 1  # not while the server is busy
    idle["now"] = True
    wait_for(lambda: len(worker.log) == 2, timeout=10)
    key = store_key(job, CPU)
    wait_for(lambda: svc.store.get(key)["call"].iloc[0] == 2, timeout=10)
    assert not timed_while_busy(svc.store.get(key))
    assert svc.cached(job)["call"].iloc[0] == 2
    wait_for(lambda: svc.waiting() == 0, timeout=10)
    assert len(worker.log) == 2  # once: an idle result is not measured again
