"""A run of the demo service (serving.service.DemoService) and a requester's
ticket on it: the run's steps, state, result and requesters, whether anyone still waits
for it, the status a waiting page shows, and the refusal of a run before it is queued.
Which fields change under the service's lock: see serving.service."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from serving.jobs import Job
from serving.worker import StepFailed

HEARTBEAT_TIMEOUT_S = 10.0  # a waiting page heartbeats every fraction of a second
GRACE_S = 1.5  # a rerun of the same page picks its run up again within this


def request_json(job: Job) -> str:
    """The job's request as the store keeps it."""
    return json.dumps(job.request(), sort_keys=True)


class RunRefused(Exception):
    """Refused before queueing. `reason` is an id the UI words ("memory"), `numbers` the
    values it shows (need_bytes, limit_bytes)."""

    def __init__(self, reason: str, **numbers: float) -> None:
        super().__init__(f"{reason}: {numbers}")
        self.reason, self.numbers = reason, numbers


@dataclass(frozen=True)
class RunStatus:
    """What a waiting page shows. state: queued | running | remote | done | failed |
    cancelled. ahead: runs before this one; start_in / left: estimated seconds;
    progress: 0..1 of the run's steps (never above 1: st.progress refuses it)."""

    state: str
    ahead: int = 0
    start_in: float = 0.0
    run_seconds: float = 0.0
    left: float = 0.0
    progress: float = 0.0
    elapsed: float = 0.0
    restart: float = 0.0  # seconds of start_in / left that wait for the worker to restart


@dataclass(eq=False)
class Run:
    key: str
    job: Job
    step_work: list[float]
    memory_bound: int
    background: bool = False
    idle: bool = False  # background, and only while no learner has asked for a while
    claimed: bool = True  # its key is claimed in the store (an idle-time run: once it starts)
    state: str = "queued"
    next_step: int = 0
    parts: list[Any] = field(default_factory=list)
    tickets: list[Ticket] = field(default_factory=list)
    result: Any = None
    error: StepFailed | None = None
    event: threading.Event = field(default_factory=threading.Event)
    used_seconds: float = 0.0  # time the run held the device
    step_started: float | None = None
    inner: float = 0.0  # progress within the current step, 0..1
    left_since: float | None = None  # when its last requester left
    last_renew: float = 0.0
    partial: Any = None  # what is measured so far, shown while the rest runs
    partial_version: int = 0  # counts the partial results
    preemptions: int = 0  # steps of this (background) run interrupted for a learner
    created: float = field(default_factory=time.monotonic)  # when it was asked for
    # a background run a learner joined: the warm-up still waits for it when they leave
    kept: bool = False
    # what the server waits for before it listens: None, "first" (its first numbers) or
    # "whole" (the whole run); these go before the rest of the warm-up
    before_listening: str | None = None

    @property
    def steps(self) -> int:
        return len(self.step_work)

    def wanted(self, now: float) -> bool:
        """Someone still waits: the warm-up, or a ticket not released and heartbeating."""
        if self.background or self.kept:
            return True
        live = any(not t.released and now - t.last_seen < HEARTBEAT_TIMEOUT_S
                   for t in self.tickets)
        if live:
            self.left_since = None
            return True
        if self.left_since is None:
            self.left_since = now
        return now - self.left_since < GRACE_S



class _Service(Protocol):
    """What a ticket asks of its service (serving.service.DemoService)."""

    _cond: threading.Condition

    def status(self, run: Run) -> RunStatus: ...


class Ticket:
    """One requester's handle on a run."""

    def __init__(self, service: _Service, run: Run, requester: str) -> None:
        self._service, self._run, self.requester = service, run, requester
        self.released = False
        self.last_seen = time.monotonic()

    @property
    def key(self) -> str:
        return self._run.key

    @property
    def job(self) -> Job:
        return self._run.job

    @property
    def done(self) -> bool:
        return self._run.event.is_set()

    @property
    def result(self) -> Any:
        return self._run.result

    @property
    def error(self) -> StepFailed | None:
        return self._run.error

    @property
    def partial(self) -> tuple[int, Any]:
        """(version, result so far): a compare's memory before its times, its times round
        by round; a sweep's points measured so far. (0, None) before the first."""
        run = self._run
        with self._service._cond:
            return run.partial_version, run.partial

    @property
    def has_numbers(self) -> bool:
        """The run has something a page shows: its result, its failure, or what it
        measured so far (a comparison's memory before its times, a sweep's first sizes)."""
        return self.done or self.partial[1] is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the run ends (True) or the timeout passes (False); a heartbeat."""
        self.heartbeat()
        return self._run.event.wait(timeout)

    def wait_numbers(self, timeout: float) -> bool:
        """Wait until the run has numbers to show (`has_numbers`: its first partial
        result, its end) or the timeout passes (False); a heartbeat. The service notifies
        its condition with each partial result, so they draw as they come, not at the next
        poll."""
        self.heartbeat()
        end = time.monotonic() + timeout
        cond = self._service._cond
        with cond:
            while not (self.done or self._run.partial is not None):
                left = end - time.monotonic()
                if left <= 0:
                    return False
                cond.wait(min(left, 0.05))  # the run's end sets its event after notifying
        return True

    def heartbeat(self) -> None:
        self.last_seen = time.monotonic()

    def release(self) -> None:
        """This requester is gone: if it was the last, the run is cancelled."""
        self.released = True

    def status(self) -> RunStatus:
        return self._service.status(self._run)

