"""Lesson 10's live measurements as demo-service jobs (serving.jobs, kind "toolbox"), so
they run in the device's worker process, take turns in the fair queue and are stored for
every learner like the other demos' runs.

A job's options are its `part` and that part's one setting (demos.toolbox_settings:
"packing" `lengths`, "autocast" `dtype`, "lora", "flops" `layers`, "checkpoint-error",
"pipeline" `microbatches`). Each is one short step on the CPU, whatever the worker's
device (the saved-tensor hooks and CPU autocast measure there; the pipeline launches two
gloo processes of its own), returning a table of the rows the engine measured
(demos.toolbox, demos.toolbox_runs, demos.pipeline_bubble), merged and stored as
serving.jobs does for every table. Its `config` is a fixed lab config the service needs
(demos.mistake_records.CASE_CONFIG: the tiny models fix their own).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from demos.toolbox_settings import options, setting

# Estimated CPU seconds on the reference machine (the service scales them by what this
# device measured): measured on a 2-core machine, each part's first run (imports included)
WORK_SECONDS = {
    "packing": 3.0,
    "autocast": 0.2,
    "lora": 1.5,
    "checkpoint-error": 0.2,
    "pipeline": 20.0,
}  # the pipeline: three processes start, two run six steps
FLOP_SECONDS_PER_LAYER = 0.15
MEMORY_BYTES = 256 * 2**20  # the tiny models take far less


def step_work(job: Any) -> float:
    part = job.option("part")
    if part == "flops":
        return FLOP_SECONDS_PER_LAYER * int(job.option("layers"))
    return WORK_SECONDS[part]


def run(part: str, value: Any = None) -> pd.DataFrame:
    """Measure `part` at its setting's `value` (its default when None) now, in this
    process (the worker's step)."""
    from demos import toolbox, toolbox_runs

    value = setting(options(part, value))
    if part == "packing":
        return pd.DataFrame(toolbox.packing(value))
    if part == "autocast":
        return pd.DataFrame(toolbox.autocast_dtypes(value))
    if part == "flops":
        return pd.DataFrame(toolbox_runs.flop_utilization(value))
    if part == "lora":
        return pd.DataFrame(toolbox.lora_saved())
    if part == "pipeline":
        from demos.pipeline_bubble import measure

        return pd.DataFrame(measure(value))
    return pd.DataFrame(toolbox_runs.checkpoint_error())


def run_step(job: Any) -> pd.DataFrame:
    return run(job.option("part"), setting(dict(job.options)))
