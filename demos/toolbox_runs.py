"""Lesson 10's measured steps beside demos.toolbox's saved tensors:

* `flop_utilization`: the lab's model (demos.model) stepped without checkpointing and with
  every layer checkpointed; torch's FlopCounterMode counts each step's FLOPs (the model's
  FLOPs are the step without checkpointing, the hardware's the step the GPU or CPU really
  ran, recomputation included) and each step is timed, so that model and hardware FLOPs
  per second, and their ratio HFU/MFU, come from this run;
* `checkpoint_error`: a checkpointed function that runs other ops when it is recomputed,
  caught as torch's CheckpointError with `debug=True` and without: the lines of the
  messages this run produced.

Each returns plain rows (dicts), which serving.toolbox_jobs turns into a table.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import statistics
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.checkpoint import CheckpointError, checkpoint

from demos.installed_torch import counter_counts_attention
from demos.measure import Step
from demos.mistake_records import CASE_CONFIG
from demos.model import build_model, make_batch
from demos.toolbox_settings import FLOP_LAYERS, FLOP_REPEATS
from memory import theory
from memory.strategies import StrategySpec

# ------------------------------------------------------------------ MFU against HFU
FLOP_STRATEGIES = ("none", "every-layer")


def flop_config(layers: int) -> Any:
    """The lab's small model (the lab of mistakes' size) at `layers` layers."""
    if layers not in FLOP_LAYERS:
        raise ValueError(f"layers={layers}: allowed {FLOP_LAYERS}")
    return CASE_CONFIG.replace(layers=layers)


def flop_utilization(layers: int, repeats: int = FLOP_REPEATS) -> list[dict[str, Any]]:
    """Per strategy (no checkpointing, every layer checkpointed): the FLOPs torch's
    counter counted in one whole step, the course's prediction of that count
    (memory.theory.counted_flops), and the step's median wall and CPU seconds over
    `repeats` interleaved steps."""
    cfg = flop_config(layers)
    model = build_model(cfg)
    idx, tgt = make_batch(cfg)
    step = Step(cfg, model, idx, tgt, torch.device("cpu"))
    specs = [StrategySpec(name) for name in FLOP_STRATEGIES]
    plans = [theory.plan_for(cfg, spec, "cpu") for spec in specs]
    attention = counter_counts_attention("cpu")
    counted = [step.counted(spec, plan) for spec, plan in zip(specs, plans, strict=True)]
    walls: list[list[float]] = [[] for _ in specs]
    cpus: list[list[float]] = [[] for _ in specs]
    for spec, plan in zip(specs, plans, strict=True):  # one untimed step each
        step.timed(spec, plan)
    for _ in range(repeats):
        for i, (spec, plan) in enumerate(zip(specs, plans, strict=True)):
            wall, cpu = step.timed_with_cpu(spec, plan)
            walls[i].append(wall)
            cpus[i].append(cpu)
    return [
        {
            "strategy": spec.label,
            "layers": layers,
            "flops": int(flops),
            "predicted_flops": float(
                theory.counted_flops(cfg, spec, "cpu", attention_counted=attention)["total"]
            ),
            "wall_s": statistics.median(wall),
            "cpu_s": statistics.median(cpu),
            "repeats": repeats,
        }
        for spec, flops, wall, cpu in zip(specs, counted, walls, cpus, strict=True)
    ]


def hfu_over_mfu(rows: list[dict[str, Any]]) -> float:
    """HFU/MFU of the checkpointed step: the FLOPs it ran over the model's FLOPs (the step
    without checkpointing), both counted; the time and the device's peak cancel."""
    by = {row["strategy"]: row for row in rows}
    return by["every-layer"]["flops"] / by["none"]["flops"]


# ------------------------------------------------------------------ CheckpointError
def _block(x: torch.Tensor, state: dict[str, bool]) -> torch.Tensor:
    y = x.sin()
    if state["first run"]:  # a flag the recomputation sees changed: it skips the cos
        y = y.cos()
    return y


BLOCK_SOURCE = inspect.getsource(_block)
HEAD_LINES = 3  # the debug message's opening lines shown


@contextlib.contextmanager
def _debug_logs_alone() -> Iterator[None]:
    """Only torch's own handler on the logger its debug mode records operators with
    (torch/testing/_internal/logging_tensor.py, "LoggingTensor"), and that logger as it
    was afterwards: its records carry arguments a plain handler cannot format (a test
    runner's log capture raised on them), and each debug run adds a filter it never
    removes."""
    logger = logging.getLogger("LoggingTensor")
    handlers, filters = logger.handlers[:], logger.filters[:]
    level, propagate = logger.level, logger.propagate
    logger.handlers.clear()
    try:
        yield
    finally:
        logger.handlers[:], logger.filters[:] = handlers, filters
        logger.setLevel(level)
        logger.propagate = propagate


def _caught(debug: bool) -> str:
    state = {"first run": True}
    x = torch.randn(4, requires_grad=True)
    with _debug_logs_alone():
        out = checkpoint(_block, x, state, use_reentrant=False, debug=debug)
        state["first run"] = False
        try:
            out.sum().backward()
        except CheckpointError as error:
            return str(error)
    raise AssertionError("the recomputation did not raise CheckpointError")


def _section(lines: list[str], start: str) -> list[str]:
    """The operator lines ("$1: f32[4] = torch._ops.aten.sin.default($0)") after the line
    `start`, up to the next blank line after them."""
    found, taken = False, []
    for line in lines:
        if line.strip() == start:
            found = True
            continue
        if found and line.startswith("$"):
            taken.append(line)
        elif found and taken and not line.strip():
            break
    return taken


def checkpoint_error() -> list[dict[str, Any]]:
    """The CheckpointError a changed recomputation raises, caught twice: with
    `debug=True` its opening lines, the operators it logged for the original forward and
    for the recomputation, its ERROR line and how many lines it has in all (the rest are
    stack traces); without debug its lines. Rows: (message, part, line)."""
    rows: list[dict[str, Any]] = []
    debug = _caught(debug=True).splitlines()
    head = [line for line in debug if line.strip()][:HEAD_LINES]
    parts = {
        "head": head,
        "forward": _section(debug, "Operations executed during the original forward:"),
        "recompute": _section(debug, "Operations executed during recomputation:"),
        "error": [line.strip() for line in debug if line.strip().startswith("ERROR:")],
    }
    for part, lines in parts.items():
        rows += [
            {"message": "debug", "part": part, "line": line, "total": len(debug)} for line in lines
        ]
    plain = _caught(debug=False).strip().splitlines()
    first = plain[: plain.index("")] if "" in plain else plain  # up to the first blank line
    rows += [
        {"message": "plain", "part": "head", "line": line, "total": len(plain)} for line in first
    ]
    return rows
