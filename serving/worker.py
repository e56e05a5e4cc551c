"""The engine's own process: one per device, started with multiprocessing's "spawn" by the
server, so that a run's memory goes back to the system when the process ends and a cancel
is a kill.

`DeviceWorker.call(job, step, ...)` sends one step of a `serving.jobs.Job` over a pipe
and waits for its partial result, forwarding the engine's progress and what it measured so
far (a comparison's memory before its timed steps). While it waits it watches
the caller's `should_stop` (every requester left), the step's deadline and the process's
resident memory: any of them kills the process (and a fresh one is started for the next
step). After a step, a worker that has grown past `restart_growth` bytes over its idle
size is replaced, so the memory a large run took comes back.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from serving.jobs import Job

POLL_SECONDS = 0.05
START_TIMEOUT_S = 120.0
DEFAULT_START_SECONDS = 12.0  # a fresh worker imports torch and warms the engine (2-core CPU)
RESTART_GROWTH_BYTES = 300 * 2**20
# glibc keeps a freed block under its dynamic mmap threshold (which climbs to 32 MiB) in
# the heap. A checkpointed step frees and allocates its rebuilt layers again, and a worker
# grew by four times what its tensors ever held (every layer at batch 34: 485 MiB of RSS
# for a 120 MiB tracked peak), past its memory bound. A fixed 1 MiB threshold maps each
# larger tensor on its own and gives it back when freed (130 MiB there), with step times
# inside their noise. An operator's own setting is kept.
WORKER_ENV = {"MALLOC_MMAP_THRESHOLD_": str(2**20)}


class StepFailed(Exception):
    """A step did not finish. `reason` is an id the UI words: cancelled, time-limit,
    memory-limit, crashed, config (an invalid request: `detail` says why), error."""

    def __init__(self, reason: str, detail: str = "", **numbers: float) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason, self.detail, self.numbers = reason, detail, numbers


def rss_bytes(pid: int) -> int | None:
    """Resident memory of a process (Linux /proc), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


PREEMPT_SIGNAL = getattr(signal, "SIGUSR1", None)  # None: no pre-emption (not POSIX)


class Preempted(BaseException):
    """Raised inside a worker's step when the server wants the device for a learner.
    A BaseException: the engine's own `except Exception` handlers let it through."""


@dataclass
class _Preemption:
    """The worker process's side of a pre-emption: raise `Preempted` in a running step,
    never between steps or while a message is being written to the pipe (a torn message
    would break the pipe): one that comes then is raised right after the write."""

    in_step: bool = False
    sending: bool = False
    pending: bool = False
    fired: bool = False

    def handler(self, signum: int, frame: Any) -> None:
        if not self.in_step or self.fired:
            return
        if self.sending:
            self.pending = True
            return
        self.fired = True
        raise Preempted

    @contextmanager
    def step(self) -> Iterator[None]:
        self.fired = self.pending = False
        self.in_step = True
        try:
            yield
        finally:
            self.in_step = False

    def send(self, conn: Connection, message: tuple) -> None:
        self.sending = True
        try:
            conn.send(message)
        finally:
            self.sending = False
        if self.pending and self.in_step and not self.fired:
            self.fired = True
            raise Preempted


def _engine_state() -> dict[str, Any]:
    """What a step may leave behind when it is interrupted: torch's thread count and the
    compiler's memory budget (put back), and what must be empty again (checked)."""
    import torch

    state: dict[str, Any] = {
        "threads": torch.get_num_threads(),
        "grad": torch.is_grad_enabled(),
        "inference": torch.is_inference_mode_enabled(),
        "autocast": torch.is_autocast_enabled("cpu"),
        "dispatch_modes": torch._C._len_torch_dispatch_stack(),
        "function_modes": torch._C._len_torch_function_stack(),
        "saved_tensor_hooks": torch._C._autograd._top_saved_tensors_default_hooks(False),
    }
    if "torch._functorch.config" in sys.modules:
        state["budget"] = sys.modules["torch._functorch.config"].activation_memory_budget
    return state


def _restore_after_preemption(baseline: dict[str, Any]) -> bool:
    """Put back what an interrupted step may have changed; False when the process is no
    longer as a fresh one would be (then it exits and a fresh one serves the next step)."""
    import torch

    torch.set_num_threads(baseline["threads"])
    if "torch._functorch.config" in sys.modules:
        sys.modules["torch._functorch.config"].activation_memory_budget = baseline.get(
            "budget", 1.0)
    if "torch._dynamo" in sys.modules:
        sys.modules["torch._dynamo"].reset()  # a compile cut short leaves no cache entry
    now = _engine_state()
    return all(now[key] == value for key, value in baseline.items() if key != "budget")


def _serve(conn: Connection, device_kind: str) -> None:
    """The worker process: warm the engine, then run steps until the pipe closes."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from demos.measure import warm_up
    from memory.config import ConfigError

    preemption = _Preemption()
    if PREEMPT_SIGNAL is not None:
        signal.signal(PREEMPT_SIGNAL, preemption.handler)
    warm_up()
    baseline = _engine_state()
    conn.send(("ready", os.getpid()))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        job, index, limit_bytes = message

        def progress(done: int, total: int) -> None:
            preemption.send(conn, ("progress", done, total))

        def partial(result: Any) -> None:
            # pickled now: a snapshot of what is measured
            preemption.send(conn, ("partial", result))

        try:
            with preemption.step():
                part = job.run_step(index, device_kind, limit_bytes, progress, partial)
        except Preempted:
            clean = _restore_after_preemption(baseline)
            conn.send(("error", "preempted", ""))
            if not clean:
                return  # the next step starts a fresh process
        except ConfigError as error:
            conn.send(("error", "config", str(error)))
        except Exception as error:  # noqa: BLE001 - reported to the page, worker lives on
            if preemption.fired:  # raised inside torch's C++ (a backward hook), re-wrapped
                clean = _restore_after_preemption(baseline)
                conn.send(("error", "preempted", ""))
                if not clean:
                    return
                continue
            conn.send(("error", "error", f"{type(error).__name__}: {error}"))
        else:
            conn.send(("done", part))


@contextmanager
def _no_main_module() -> Iterator[None]:
    """Spawn re-imports the parent's __main__ in the child (a script without a main guard,
    the server's entry point): the worker needs none of it, so hide it while starting."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """These environment variables (where not set already) for a process started inside;
    the parent's own environment as it was afterwards."""
    added = {k: v for k, v in values.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


class DeviceWorker:
    """The worker process of one device. Thread-safe for one caller at a time (the
    service's scheduler); `stop` may be called from anywhere."""

    def __init__(self, device_kind: str = "cpu",
                 restart_growth: int = RESTART_GROWTH_BYTES) -> None:
        self.device_kind = device_kind
        self.restart_growth = restart_growth
        self._ctx = multiprocessing.get_context("spawn")
        self._process: Any = None
        self._conn: Connection | None = None
        self._idle_rss: int | None = None
        self._lock = threading.Lock()
        self.starts = 0  # how many processes were started (tests, the benchmark)
        self.last_start_seconds: float | None = None  # how long the last start took
        self._starting_since: float | None = None

    # `stop()` (another thread: the server shutting down) may set _process to None
    # between two reads of it: read it once.
    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    def alive(self) -> bool:
        process = self._process
        return process is not None and process.is_alive()

    def start_left(self) -> float:
        """Seconds until a worker is ready to run a step: 0 while one is alive; while one
        starts (after a cancel or a crash: a kill and a fresh process), what the last start
        took less the time since this one began; before the first start, a default."""
        if self.alive():
            return 0.0
        expected = self.last_start_seconds or DEFAULT_START_SECONDS
        since = self._starting_since
        if since is None:
            return expected
        return max(expected - (time.monotonic() - since), 1.0)

    def start(self) -> None:
        """Start the process (if not running) and wait until its engine is warm."""
        with self._lock:
            if self.alive():
                return
            began = self._starting_since = time.monotonic()
            try:
                self._start()
            finally:
                self._starting_since = None
            self.last_start_seconds = time.monotonic() - began

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=_serve, args=(child, self.device_kind),
                                    name=f"demo-worker-{self.device_kind}", daemon=True)
        with _no_main_module(), _environment(WORKER_ENV):
            process.start()
        child.close()
        if not parent.poll(START_TIMEOUT_S):
            process.kill()
            raise StepFailed("crashed", "the worker did not start")
        parent.recv()
        self._process, self._conn = process, parent
        self._idle_rss = rss_bytes(process.pid)
        self.starts += 1

    def stop(self) -> None:
        """Kill the process at once (a cancel, a time-out, too much memory, shutdown)."""
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if process is not None:
            process.kill()
            process.join(5)
        if conn is not None:
            conn.close()

    def rss(self) -> int | None:
        return rss_bytes(self.pid) if self.pid else None

    def call(self, job: Job, index: int, *, limit_bytes: int | None = None,
             memory_bound: int | None = None, deadline: float | None = None,
             should_stop: Callable[[], bool] = lambda: False,
             should_yield: Callable[[], bool] | None = None,
             on_progress: Callable[[int, int], None] | None = None,
             on_tick: Callable[[], None] | None = None,
             on_partial: Callable[[Any], None] | None = None) -> Any:
        """Run step `index` of `job`; its partial result, or StepFailed (the process is
        killed for cancelled / time-limit / memory-limit, and restarted next time).
        `should_yield` true: the step is interrupted in place (StepFailed "preempted",
        the process lives on), unless it ends first."""
        self.start()
        assert self._conn is not None and self._process is not None
        conn, pid = self._conn, self._process.pid
        base = self._idle_rss or rss_bytes(pid) or 0
        conn.send((job, index, limit_bytes))
        yielding = False
        while True:
            try:
                ready = conn.poll(POLL_SECONDS)
            except (EOFError, OSError):
                ready = False
            if ready:
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    self.stop()
                    raise StepFailed("crashed", "the worker process ended") from None
                if message[0] == "progress":
                    if on_progress is not None:
                        on_progress(message[1], message[2])
                    continue
                if message[0] == "partial":
                    if on_partial is not None:
                        on_partial(message[1])
                    continue
                if message[0] == "error":
                    raise StepFailed(message[1], message[2])
                self._after_step()
                return message[1]
            if not self.alive():
                self.stop()
                raise StepFailed("crashed", "the worker process ended")
            if should_stop():
                self.stop()
                raise StepFailed("cancelled")
            if not yielding and should_yield is not None and should_yield():
                yielding = self.preempt(pid)
            if deadline is not None and time.monotonic() > deadline:
                self.stop()
                raise StepFailed("time-limit")
            if memory_bound is not None:
                rss = rss_bytes(pid) or 0
                if rss - base > memory_bound:
                    self.stop()
                    raise StepFailed("memory-limit", used=rss - base, bound=memory_bound)
            if on_tick is not None:
                on_tick()

    def preempt(self, pid: int) -> bool:
        """Ask the process to interrupt its step (its answer is StepFailed "preempted",
        or the step's result when it ended first). False where signals are missing."""
        if PREEMPT_SIGNAL is None:
            return False
        try:
            os.kill(pid, PREEMPT_SIGNAL)
        except OSError:  # it just ended: the loop sees that
            return False
        return True

    def _after_step(self) -> None:
        """Replace a worker that kept what a large run took."""
        rss = self.rss()
        if rss is not None and self._idle_rss is not None and \
                rss - self._idle_rss > self.restart_growth:
            self.stop()
