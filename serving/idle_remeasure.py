"""Measuring busy-timed results again (a mixin of serving.service.DemoService): a
stored result timed while the machine was busy is noted, and measured once more per
process as a background run when nothing waits and the machine is idle; meanwhile the old
result is served."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

from demos.device import DeviceInfo
from demos.results import timed_while_busy
from serving.jobs import MEMORY_FACTOR, MEMORY_SLACK_BYTES, Job
from serving.tickets import Run

# Results timed while the machine was busy (demos.results.timed_while_busy) are measured
# again, once per process, when nothing waits and the load average per core is under this.
IDLE_LOAD_PER_CORE = 0.5


class BusyRemeasuring:
    """The busy results to measure again; the state is DemoService's (its __init__)."""

    device: DeviceInfo
    memory_limit: int | None
    _cond: threading.Condition
    _current: Run | None
    _active: dict[str, Run]
    _busy: OrderedDict[str, Job]
    _remeasured: set[str]

    def _note_busy(self, key: str, job: Job, result: Any) -> None:
        """Remember a result timed while the machine was busy, to measure it again."""
        if key not in self._remeasured and timed_while_busy(result):
            with self._cond:
                self._busy[key] = job

    def _idle(self) -> bool:
        try:
            return os.getloadavg()[0] / (os.cpu_count() or 1) < IDLE_LOAD_PER_CORE
        except OSError:
            return False

    def _remeasure_run(self) -> Run | None:
        """A background run that measures a busy-timed result again (called with the
        lock held, nothing queued): it replaces the stored row when it ends; meanwhile the
        old result is served."""
        if not self._busy or self._current is not None or not self._idle():
            return None
        key, job = self._busy.popitem(last=False)
        self._remeasured.add(key)
        if key in self._active:
            return None
        kind = self.device.kind
        bound = min(job.memory_bytes(kind), self.memory_limit or 2**62)
        return Run(key, job, [job.step_work(i, kind) for i in range(job.step_count())],
                    int(bound * MEMORY_FACTOR) + MEMORY_SLACK_BYTES, background=True)
