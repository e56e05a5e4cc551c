"""The demo service's housekeeping (a mixin of serving.service.DemoService): the
store leases of queued and running runs are renewed, runs another process measures are
followed until their result is stored (or measured here when their measurer is gone), and
queued runs nobody waits for are dropped by the scheduler, woken here."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from serving.store import LEASE_SECONDS, ResultStore
from serving.tickets import Run, request_json
from serving.worker import StepFailed

# The service's log: these are DemoService's methods.
log = logging.getLogger("serving.service")


class Housekeeping:
    """Leases and remote runs; the state is DemoService's (set in its __init__)."""

    store: ResultStore | None
    owner: str
    device_label: str
    _cond: threading.Condition
    _queue: deque[Run]
    _remote: list[Run]
    _stopping: bool
    _remember: Callable[[str, Any], None]
    _end: Callable[..., None]

    def _renew(self, run: Run) -> None:
        now = time.monotonic()
        if self.store is not None and now - run.last_renew > LEASE_SECONDS / 3:
            run.last_renew = now
            try:
                self.store.renew(run.key, self.owner)
            except SQLAlchemyError:
                log.exception("result store unavailable")

    # ------------------------------------------------------------------ housekeeping
    def _housekeep(self) -> None:
        """Renew the leases of queued runs, follow runs other processes measure, and drop
        queued runs nobody waits for."""
        for tick in itertools.count():
            with self._cond:
                if self._stopping:
                    return
                queued = list(self._queue)
                remote = list(self._remote)
                self._cond.notify_all()  # the scheduler drops abandoned queued runs
            for run in queued:
                self._renew(run)
            for run in remote:
                self._follow(run)
            time.sleep(0.25 if tick else 0.05)

    def _follow(self, run: Run) -> None:
        now = time.monotonic()
        if not run.wanted(now):
            with self._cond:
                self._remote.remove(run)
            self._end(run, error=StepFailed("cancelled"))
            return
        assert self.store is not None
        try:
            result = self.store.get(run.key)
            if result is None and not self.store.pending(run.key):
                claim = self.store.claim(run.key, self.owner, run.job.kind, self.device_label,
                                         request_json(run.job))
                result = claim.result
                if claim.mine:  # its measurer is gone: measure it here
                    with self._cond:
                        self._remote.remove(run)
                        run.state, run.last_renew = "queued", now
                        self._queue.append(run)
                        self._cond.notify_all()
                    return
        except SQLAlchemyError:
            log.exception("result store unavailable")
            return
        if result is not None:
            with self._cond:
                self._remote.remove(run)
            self._remember(run.key, result)
            self._end(run, result=result)
