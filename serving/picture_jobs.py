"""The /pictures page's runs as demo-service jobs (serving.jobs, kind "pictures"), so they
run in the device's worker process, take turns in the fair queue and are stored for every
learner like the other demos' runs.

A job's options are a demos.picture_settings.PictureSetup's fields and its `part`:
"memory" (one step: the tracked steps, per-block bytes and the peak), "time" (one step:
counted FLOPs and the timed rounds) or "sweep" (one step per size of SWEEP_SIZES: what is
saved for backward at that size, per image; a sweep's options leave out the size). Each
step returns a table (demos.picture_models.to_frame), which the service merges, stores
and hands back as serving.jobs does for every table. Its `config` is a fixed lab config
the service needs (demos.mistake_records.CASE_CONFIG: the tiny models fix their own).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from demos.measure import PAGE_REPEATS
from demos.picture_settings import (
    SWEEP_SIZES,
    PictureSetup,
    memory_estimate,
    step_seconds,
)

PARTS = ("memory", "time", "sweep")
# a tracked step costs about 4 plain steps (the live tracker and the saved-tensor hooks on
# every module), a counted step about 8 (torch's FLOP counter splits the ops it has no
# formula for, such as group norm), a sweep point's forward about one; measured on the
# tiny UNets
TRACKED_COST, COUNTED_COST, SWEEP_COST = 4, 8, 1
TIME_REPEATS = PAGE_REPEATS["cpu"]
SETUP_FIELDS = ("family", "size", "batch", "strategy", "n", "lora")


def options(setup: PictureSetup, part: str) -> dict[str, Any]:
    """A job's options for a part of a setup's measurement (a sweep's without the size)."""
    if part not in PARTS:
        raise ValueError(f"part={part!r}: allowed {', '.join(PARTS)}")
    values = {name: getattr(setup, name) for name in SETUP_FIELDS}
    if part == "sweep":
        values.pop("size")
    return {"part": part, **values}


def setup_of(job: Any) -> PictureSetup:
    """The setup a job measures (a sweep's at its first size)."""
    values = {name: job.option(name) for name in SETUP_FIELDS if job.option(name) is not None}
    return PictureSetup(**values)


def later_part(job: Any) -> bool:
    """The costs and the sweep: the page draws them below the memory, its first numbers."""
    return job.option("part") != "memory"


def step_count(job: Any) -> int:
    return len(SWEEP_SIZES) if job.option("part") == "sweep" else 1


def _strategies(setup: PictureSetup) -> int:
    return 1 + (setup.strategy != "none")


def step_work(job: Any, index: int) -> float:
    """A step's estimated CPU seconds on the reference machine (the service scales them
    by what this device measured)."""
    setup = setup_of(job)
    part = job.option("part")
    if part == "sweep":
        size = SWEEP_SIZES[index]
        return SWEEP_COST * _strategies(setup) * step_seconds(setup.family, size, setup.batch)
    plain = step_seconds(setup.family, setup.size, setup.batch)
    steps = TRACKED_COST if part == "memory" else COUNTED_COST + TIME_REPEATS
    return steps * _strategies(setup) * plain


def memory_bytes(job: Any) -> int:
    """The most memory one of the job's steps may take (an estimate)."""
    setup = setup_of(job)
    size = max(SWEEP_SIZES) if job.option("part") == "sweep" else setup.size
    return memory_estimate(setup.family, size, setup.batch)


def run_step(job: Any, index: int, device_kind: str) -> pd.DataFrame:
    """Run one step of the job on this process's device: its runs as a table."""
    from demos.picture_models import measure_memory, measure_time, saved_at, to_frame

    setup = setup_of(job).validated()
    part = job.option("part")
    if part == "sweep":
        return to_frame(saved_at(setup, SWEEP_SIZES[index], device=device_kind))
    if part == "memory":
        return to_frame(measure_memory(setup, device=device_kind))
    return to_frame(measure_time(setup, device=device_kind))
