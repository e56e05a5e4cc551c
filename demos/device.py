"""Which device to run on, and a fair first-come-first-served queue for it."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import torch

from memory.config import ConfigError


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # "cpu" or "cuda"
    name: str
    total_bytes: int | None
    free_bytes: int | None
    cores: int
    torch_version: str

    def label(self) -> str:
        if self.kind == "cuda":
            size = f" ({self.total_bytes / 2**30:.1f} GiB)" if self.total_bytes else ""
            return f"{self.name}{size}"
        return f"CPU ({self.name}), {self.cores} cores"

    def as_dict(self) -> dict:
        return asdict(self)


def _cpu_memory() -> tuple[int | None, int | None]:
    info = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                info[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None, None
    return info.get("MemTotal"), info.get("MemAvailable")


def detect_device(prefer: str = "auto") -> DeviceInfo:
    """'auto' picks CUDA when present, else the CPU. 'cuda' without a GPU is a ConfigError."""
    prefer = (prefer or "auto").lower()
    if prefer not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"device={prefer!r} is unknown; allowed auto, cpu, cuda")
    cuda = torch.cuda.is_available()
    if prefer == "cuda" and not cuda:
        raise ConfigError("device=cuda was asked for but no CUDA GPU is available; "
                          "allowed here: auto, cpu")
    cores = os.cpu_count() or 1
    if cuda and prefer in ("auto", "cuda"):
        free, total = torch.cuda.mem_get_info()
        return DeviceInfo("cuda", torch.cuda.get_device_name(), int(total), int(free), cores,
                          torch.__version__)
    total, free = _cpu_memory()
    name = "no GPU found" if not cuda else "CPU chosen"
    return DeviceInfo("cpu", name, total, free, cores, torch.__version__)


class DeviceQueue:
    """A fair FIFO lock: callers get their turn in arrival order. Thread-safe.

    A caller that gives up while waiting (its on_wait raised, e.g. the page was left)
    leaves the queue, so it never blocks the ones behind it."""

    def __init__(self, poll_seconds: float = 0.5) -> None:
        self._cond = threading.Condition()
        self._queue: list[object] = []
        self._poll = poll_seconds

    def waiting(self) -> int:
        """How many callers are queued or running."""
        with self._cond:
            return len(self._queue)

    @contextmanager
    def turn(self, on_wait: Callable[[int], None] | None = None) -> Iterator[None]:
        """Wait for this caller's turn, calling on_wait(n_ahead) about every poll interval
        while others are ahead, then yield; the turn ends when the block exits."""
        me = object()
        with self._cond:
            self._queue.append(me)
        try:
            while True:
                with self._cond:
                    ahead = self._queue.index(me)
                if ahead == 0:
                    break
                if on_wait is not None:
                    on_wait(ahead)  # called without the lock held
                with self._cond:
                    if self._queue[0] is not me:
                        self._cond.wait(self._poll)
            yield
        finally:
            with self._cond:
                self._queue.remove(me)
                self._cond.notify_all()
