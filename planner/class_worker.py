"""A config.json's class measured in a process of its own, with a time and a memory limit.

Measuring a pasted config.json (planner.class_memory: transformers' class under fake
tensors, a second or a few) runs in a child process, never in the process that asked: a
server's page threads keep the interpreter while it runs, and what a config makes the
child do (build a class, allocate, loop) ends with the child. The children are forked
from multiprocessing's "forkserver", a clean process that imported torch, transformers and
PEFT once (PRELOAD), so a child starts in milliseconds with them loaded. Each child

* may take MEMORY_LIMIT_BYTES of address space above what it starts with (RLIMIT_AS: past
  it an allocation fails, reported as the memory limit) and runs at a lower priority than
  the server's own threads (nice NICE);
* is killed after TIME_LIMIT_S seconds, or when the caller's `on_wait` (called about every
  POLL_S while it waits) raises: on the /plan page that is Streamlit stopping the script of
  a learner who left or changed the page.

At most SLOTS children run at once; a caller beyond them waits for a slot (its `on_wait`
called meanwhile). A child sends back JSON: a class's description
(MeasuredClass.description) or a fit (planner.class_json). A limit reached, or a step the
library cannot run, is a MeasureFailed: a ClassConfigError with a problem id the page
words ("time-limit", "memory-limit", "failed") and one line for the command line.

Limits from the environment: PLANNER_MEASURE_SECONDS (default 60), PLANNER_MEASURE_GIB
(2), PLANNER_MEASURE_SLOTS (2); PLANNER_MEASURE_IN_PROCESS=1 measures in the calling
process without limits (a debugger's choice).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from multiprocessing.reduction import ForkingPickler
from typing import Any

from i18n.units import format_bytes
from model_classes.causal_lm_config import ClassConfigError


def _number(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


TIME_LIMIT_S = _number("PLANNER_MEASURE_SECONDS", 60.0)
MEMORY_LIMIT_BYTES = int(_number("PLANNER_MEASURE_GIB", 2.0) * 2**30)
SLOTS = int(_number("PLANNER_MEASURE_SLOTS", 2))
NICE = 5
POLL_S = 0.1
# what every measurement imports, loaded once in the forkserver (model_classes.causal_lm.
# load_libraries's list, and the measuring code)
PRELOAD = ["planner.class_worker", "planner.class_memory", "planner.class_json", "peft",
           "transformers.masking_utils", "transformers.modeling_layers",
           "transformers.models.auto.modeling_auto", "torch._subclasses.fake_tensor"]


class MeasureFailed(ClassConfigError):
    """A measurement that did not end with a result: `problem` "time-limit" (after
    `seconds`), "memory-limit" (over `limit_bytes`) or "failed" (the library could not run
    a step of the model, or the child ended: `detail` says how). A caller that left ends
    the wait with what its `on_wait` raised instead."""

    def __init__(self, problem: str, message: str, model_type: str = "", *,
                 seconds: float = 0.0, limit_bytes: int = 0, detail: str = "") -> None:
        super().__init__(problem, message, model_type)
        self.seconds, self.limit_bytes, self.detail = seconds, limit_bytes, detail

    @property
    def params(self) -> dict[str, Any]:
        """The numbers the page's words name."""
        return {"seconds": round(self.seconds), "size": self.limit_bytes,
                "detail": self.detail, "model_type": self.model_type}


OnWait = Callable[[float | None], None]
_ON_WAIT: ContextVar[OnWait | None] = ContextVar("measure_on_wait", default=None)
_SLOTS = threading.BoundedSemaphore(SLOTS)
_CONTEXT_LOCK = threading.Lock()
_STARTING = threading.Lock()  # one child started at a time: __main__ is hidden meanwhile


@contextmanager
def waiting(on_wait: OnWait) -> Iterator[None]:
    """Within the block, a measurement that waits calls `on_wait(seconds waited)` about
    every POLL_S, and `on_wait(None)` when it ended; whatever `on_wait` raises ends the
    wait (and kills the child)."""
    token = _ON_WAIT.set(on_wait)
    try:
        yield
    finally:
        _ON_WAIT.reset(token)


@contextmanager
def _no_main_module() -> Iterator[None]:
    """A child of multiprocessing runs its parent's __main__ again before its task (a
    script, or the Streamlit page the script runner made __main__: the /plan page itself):
    the child needs none of it, so it is hidden while a child starts, as the demo
    service's worker does (serving.worker)."""
    with _STARTING:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if main is not None:
                sys.modules["__main__"] = main


def _context() -> Any:
    with _CONTEXT_LOCK:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        return context


def warm() -> None:
    """Start the forkserver now: it imports PRELOAD in the background (a few seconds of
    CPU), so that a first measurement finds them loaded."""
    if os.environ.get("PLANNER_MEASURE_IN_PROCESS") == "1":
        return
    from multiprocessing import forkserver

    _context()
    forkserver.ensure_running()


# ---------------------------------------------------------------- in the child


def _vm_bytes(field: str = "VmSize") -> int:
    """This process's address space (VmSize), or the most it ever took (VmPeak)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


NEAR_LIMIT_BYTES = 64 * 2**20
_LIMIT: list[int] = []  # the child's address-space limit, once set


def _limit_self(memory: int, seconds: float) -> None:
    """The child's limits: its address space (a soft limit it lifts to word a failure)
    and CPU time, and a lower priority."""
    import resource

    if memory:
        limit = _vm_bytes() + memory
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        _LIMIT.append(limit)
    cpu = int(seconds) + 10  # a backstop: the parent kills it at `seconds` of wall time
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    os.nice(NICE)


def _at_memory_limit() -> bool:
    """Whether this child came within NEAR_LIMIT_BYTES of its address-space limit: an
    allocation refused there surfaces from a library as MemoryError, but also as a
    SystemError or a RuntimeError of its own; each is the memory limit. The limit is
    lifted first (the measurement is over), so that this check can allocate."""
    import resource

    if not _LIMIT:
        return False
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    return _vm_bytes("VmPeak") >= _LIMIT[0] - NEAR_LIMIT_BYTES


def run_task(task: str, args: tuple) -> Any:
    """One measurement, JSON-ready: "describe" (cfg, label), "fit" (cfg, key, one_only,
    the b = 1 fit to complete or None, as JSON) or "picture" (an image model's cfg,
    precision, LoRA rank, targets, batch)."""
    from planner.class_json import fit_from_json, fit_to_json
    from planner.class_memory import MeasuredClass

    if task == "describe":
        cfg, label = args
        return MeasuredClass(cfg).description(label)
    if task == "picture":  # an image model (planner.picture_measure.measure's args)
        from planner.picture_measure import measure as measure_picture

        return measure_picture(*args)
    if task == "fit":
        cfg, key, one_only, one = args
        fit = MeasuredClass(cfg).fit(key, one_only=one_only,
                                     one=fit_from_json(one) if one is not None else None)
        return fit_to_json(fit)
    raise ValueError(f"unknown task {task!r}")


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300] if text else ''}".rstrip(": ")


def _child(conn: Any, task: str, args: tuple, memory: int, seconds: float) -> None:
    # Pickled before the limit: at the limit, pickling even this tuple can fail.
    out_of_memory = ForkingPickler.dumps(("memory",))
    try:
        _limit_self(memory, seconds)
        message: tuple = ("ok", json.dumps(run_task(task, args)))
    except ClassConfigError as error:
        message = ("config", error.problem, str(error), error.model_type)
    except MemoryError:
        message = ("memory",)
    except Exception as error:  # the library could not run a step: one line for the caller
        message = ("memory",) if _at_memory_limit() else ("failed", _first_line(error))
    try:
        conn.send(message)
    except MemoryError:
        conn.send_bytes(out_of_memory)
    finally:
        conn.close()


# ---------------------------------------------------------------- in the caller


def _model_type(args: tuple) -> str:
    cfg = args[0] if args and isinstance(args[0], dict) else {}
    text = cfg.get("text_config")
    found = (text if isinstance(text, dict) else cfg).get("model_type", "") or cfg.get(
        "_class_name", "")  # a diffusers config names its class
    return found if isinstance(found, str) else ""


def _failure(message: tuple, task: str, args: tuple, seconds: float, memory: int
             ) -> ClassConfigError:
    model_type = _model_type(args)
    if message[0] == "config":
        return ClassConfigError(message[1], message[2], message[3])
    if message[0] == "memory":
        return MeasureFailed("memory-limit", f"measuring this {model_type} class needed more "
                             f"than {format_bytes(memory)} of memory, the limit of one "
                             "measurement: no real model does", model_type,
                             limit_bytes=memory)
    if message[0] == "time":
        return MeasureFailed("time-limit", f"measuring this {model_type} class took longer "
                             f"than {seconds:,.0f} s, the limit of one measurement: a real "
                             "model takes a few seconds", model_type, seconds=seconds)
    library = "diffusers" if isinstance(args[0] if args else None, dict) and \
        "_class_name" in args[0] else "transformers"
    return MeasureFailed("failed", f"{library} could not run a training step of this "
                         f"{model_type} model: {message[1]}", model_type, detail=message[1])


def _wait_for_slot(on_wait: OnWait | None, started: float) -> None:
    while not _SLOTS.acquire(timeout=POLL_S):
        if on_wait is not None:
            on_wait(time.monotonic() - started)


def measure(task: str, *args: Any, seconds: float | None = None,
            memory: int | None = None) -> Any:
    """run_task(task, args) in a child process under the limits (default TIME_LIMIT_S,
    MEMORY_LIMIT_BYTES); its result, or ClassConfigError (MeasureFailed for a limit, a
    step that failed, or a caller that left)."""
    seconds = TIME_LIMIT_S if seconds is None else seconds
    memory = MEMORY_LIMIT_BYTES if memory is None else memory
    if os.environ.get("PLANNER_MEASURE_IN_PROCESS") == "1":
        return json.loads(json.dumps(run_task(task, args)))
    on_wait = _ON_WAIT.get()
    started = time.monotonic()
    _wait_for_slot(on_wait, started)
    try:
        result = _run_child(task, args, seconds, memory, on_wait, started)
    except ClassConfigError:
        if on_wait is not None:
            on_wait(None)
        raise
    finally:
        _SLOTS.release()
    if on_wait is not None:
        on_wait(None)
    return result


def _run_child(task: str, args: tuple, seconds: float, memory: int,
               on_wait: OnWait | None, started: float) -> Any:
    context = _context()
    mine, theirs = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(theirs, task, args, memory, seconds),
                            name=f"measure-{task}", daemon=True)
    with _no_main_module():
        child.start()
    theirs.close()
    deadline = time.monotonic() + seconds
    message: tuple | None = None
    try:
        while message is None:
            if mine.poll(POLL_S):
                try:
                    message = mine.recv()
                except (EOFError, OSError):
                    message = _ended(child)
            elif not child.is_alive() and not mine.poll(0):
                message = _ended(child)
            elif time.monotonic() > deadline:
                message = ("time",)
            elif on_wait is not None:
                on_wait(time.monotonic() - started)
    finally:
        mine.close()
        if child.is_alive():
            child.kill()
        child.join(5)
    if message[0] == "ok":
        return json.loads(message[1])
    raise _failure(message, task, args, seconds, memory)


def _ended(child: Any) -> tuple:
    """The message of a child that ended without one: over its CPU time (SIGXCPU), or
    how it ended."""
    import signal

    child.join(1)
    code = child.exitcode
    if code == -signal.SIGXCPU:
        return ("time",)
    how = ("still running" if code is None else f"signal {-code}" if code < 0
           else f"exit code {code}")
    return ("failed", f"the measuring process ended ({how})")
