"""A measured run as a memory snapshot in torch's own format: the dictionary that
`torch.cuda.memory._snapshot()` returns and `torch.cuda.memory._dump_snapshot()` pickles
(torch 2.13, torch/cuda/memory.py), so that PyTorch's memory viewer and
`torch.cuda._memory_viz` open the lab's run beside a learner's own.

What it holds, built from the lab's own tracking of this run (demos.tracker's event
log, on the CPU as on a GPU):
- `device_traces[0]`: every storage the step made, as torch's allocator trace records it:
  an `alloc` event when it was made, `free_requested` and `free_completed` when it died,
  with its bytes and, as frames, the op that made it, the phase (forward, recomputation,
  backward), the layer and the strategy. `time_us` is the op's index in the step: the
  lab counts ops, not microseconds. The strategies follow one another, in the
  comparison's order.
- `segments`: one segment, the state at the end: the weights (present before the trace,
  as on a GPU), the storages still alive (the gradients) and the free space between.

Addresses are the lab's own: a first-fit allocator that rounds each request up to
512 bytes, as torch's CUDA caching allocator does (c10/cuda/CUDACachingAllocator.cpp,
kMinBlockSize), so `requested_size` is the tracker's bytes and `size` the rounded block.
Besides a comparison, a results table whose rows keep the tracker's event log
(demos.results.EVENTS_COLUMN: a sweep, a what-fits search, training, the compiler's
eager points) gives its runs, each named by what it ran. No torch import: plain data and
pickle."""

from __future__ import annotations

import bisect
import pickle
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

from demos.results import EVENTS_COLUMN, Comparison
from memory import theory
from memory.config import ModelConfig

BASE_ADDRESS = 0x7F0000000000  # where the lab's one segment starts (any address would do)
ROUNDING = 512  # bytes: torch's CUDA caching allocator's smallest block


def rounded(nbytes: int) -> int:
    return max(ROUNDING, -(-nbytes // ROUNDING) * ROUNDING)


class FirstFit:
    """Addresses for blocks: the lowest free range that fits, else the top."""

    def __init__(self) -> None:
        self.free: list[tuple[int, int]] = []  # (start, size), sorted by start
        self.top = 0

    def alloc(self, size: int) -> int:
        for i, (start, length) in enumerate(self.free):
            if length >= size:
                if length == size:
                    del self.free[i]
                else:
                    self.free[i] = (start + size, length - size)
                return start
        start, self.top = self.top, self.top + size
        return start

    def release(self, start: int, size: int) -> None:
        i = bisect.bisect(self.free, (start, size))
        self.free.insert(i, (start, size))
        if i + 1 < len(self.free) and start + size == self.free[i + 1][0]:  # merge right
            self.free[i] = (start, size + self.free.pop(i + 1)[1])
        if i > 0 and self.free[i - 1][0] + self.free[i - 1][1] == start:  # merge left
            prev = self.free.pop(i - 1)
            self.free[i - 1] = (prev[0], prev[1] + self.free[i - 1][1])


def _frames(op: str, phase: str, layer: int | None, run: str) -> list[dict[str, Any]]:
    """Innermost first, as torch records them: the op, then where in the step it ran."""
    where = [{"filename": "lab", "line": 0, "name": op},
             {"filename": "lab", "line": 0, "name": phase}]
    if layer is not None:
        where.append({"filename": "lab", "line": layer, "name": f"layer {layer}"})
    return [*where, {"filename": "lab", "line": 0, "name": run}]


def _block(address: int, size: int, requested: int, state: str,
           frames: list[dict[str, Any]]) -> dict[str, Any]:
    return {"address": address, "size": size, "requested_size": requested, "state": state,
            "frames": frames}


Run = tuple[str, list[list] | None]  # (what ran, its LiveTracker event log)


def snapshot(runs: Iterable[Run], parameter_bytes: int = 0) -> dict[str, Any]:
    """torch's snapshot dictionary for the measured steps, one after another; each run's
    name is its outermost frame ("strategy every-layer", "wrong way")."""
    space = FirstFit()
    trace: list[dict[str, Any]] = []
    live: dict[tuple[str, int], tuple[int, int, int, list]] = {}  # address, size, bytes
    weights = None
    if parameter_bytes:
        weights = (space.alloc(rounded(parameter_bytes)), rounded(parameter_bytes))
    clock = 0
    for name, events in runs:
        if not events:
            continue
        last = 0
        for index, storage, nbytes, op, phase, layer in events:
            last = max(last, index)
            key = (name, storage)
            if nbytes > 0:
                size = rounded(nbytes)
                frames = _frames(op, phase, layer, name)
                address = space.alloc(size)
                live[key] = (address, size, nbytes, frames)
                trace.append({"action": "alloc", "addr": BASE_ADDRESS + address,
                              "size": size, "stream": 0, "pool_id": (0, 0),
                              "time_us": clock + index, "frames": frames})
            else:
                address, size, _, frames = live.pop(key)
                for action in ("free_requested", "free_completed"):
                    trace.append({"action": action, "addr": BASE_ADDRESS + address,
                                  "size": size, "stream": 0, "pool_id": (0, 0),
                                  "time_us": clock + index, "frames": frames})
                space.release(address, size)
        clock += last + 1
    blocks = []
    if weights is not None:
        blocks.append((weights[0], weights[1], parameter_bytes,
                       [{"filename": "lab", "line": 0, "name": "parameters"}]))
    blocks += list(live.values())
    blocks.sort(key=lambda b: b[0])
    total = space.top
    segment_blocks, offset = [], 0
    for address, size, nbytes, frames in blocks:
        if address > offset:
            segment_blocks.append(_block(BASE_ADDRESS + offset, address - offset, 0,
                                         "inactive", []))
        segment_blocks.append(_block(BASE_ADDRESS + address, size, nbytes,
                                     "active_allocated", frames))
        offset = address + size
    if offset < total:
        segment_blocks.append(_block(BASE_ADDRESS + offset, total - offset, 0, "inactive", []))
    active = sum(size for _, size, _, _ in blocks)
    segments = [{
        "device": 0, "address": BASE_ADDRESS, "total_size": total, "allocated_size": active,
        "active_size": active, "requested_size": sum(b[2] for b in blocks), "stream": 0,
        "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
        "frames": [], "blocks": segment_blocks,
    }] if total else []
    return {"segments": segments, "device_traces": [trace],
            "allocator_settings": {"source": "gradient checkpointing lab, live-tensor tracker"}}


def comparison_runs(comparison: Comparison) -> list[Run]:
    return [(f"strategy {r.strategy}", r.memory_events) for r in comparison.results]


def comparison_snapshot(comparison: Comparison) -> dict[str, Any]:
    return snapshot(comparison_runs(comparison), comparison.parameter_bytes or 0)


def table_runs(frame: pd.DataFrame, name: Callable[[dict], str],
               model: Callable[[dict], ModelConfig]) -> tuple[list[Run], int]:
    """The runs of a results table whose rows keep their event log, in its order, each
    named by `name(row)`, and the parameter bytes of the largest model among them
    (`model(row)`: the configuration the row ran)."""
    if EVENTS_COLUMN not in frame:
        return [], 0
    rows = [row for row in frame.to_dict(orient="records")
            if isinstance(row[EVENTS_COLUMN], list) and row[EVENTS_COLUMN]]
    return ([(name(row), row[EVENTS_COLUMN]) for row in rows],
            max((theory.parameter_bytes(model(row)) for row in rows), default=0))


def sweep_runs(frame: pd.DataFrame, config: ModelConfig, vary: str) -> tuple[list[Run], int]:
    """A sweep's kept steps (demos.sweep.keep_last_events): "strategy sqrt,
    layers 32"; the segment sweep's "strategy every-k:4" all run `config`."""
    if vary == "k":
        return table_runs(frame, lambda row: f"strategy {row['strategy']}", lambda row: config)
    return table_runs(frame, lambda row: f"strategy {row['strategy']}, {vary} {row[vary]}",
                      lambda row: config.replace(**{vary: int(row[vary])}))


def fits_runs(frame: pd.DataFrame, config: ModelConfig) -> tuple[list[Run], int]:
    """What fits: each strategy's confirmed step, "strategy every-layer, batch 12"."""
    return table_runs(
        frame, lambda row: f"strategy {row['strategy']}, {row['vary']} "
                           f"{int(row['value_confirmed'])}",
        lambda row: config.replace(**{row["vary"]: int(row["value_confirmed"])}))


def training_runs(frame: pd.DataFrame, config: ModelConfig) -> tuple[list[Run], int]:
    """Training: each strategy's tracked step, "strategy every-layer, training step 1"."""
    return table_runs(frame, lambda row: f"strategy {row['strategy']}, training step "
                                         f"{int(row['step']) + 1}", lambda row: config)


def budget_runs(frame: pd.DataFrame, config: ModelConfig) -> tuple[list[Run], int]:
    """The compiler page's eager points, "strategy every-layer, eager"."""
    return table_runs(frame, lambda row: f"strategy {row['strategy']}, {row['kind']}",
                      lambda row: config)


def snapshot_pickle(runs: list[Run], parameter_bytes: int = 0) -> bytes:
    """What torch.cuda.memory._dump_snapshot writes: the snapshot, pickled."""
    return pickle.dumps(snapshot(runs, parameter_bytes))
