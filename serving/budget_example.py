"""The compiler page's stored example: the compiler-budget benchmark's own measurement
(benchmarks/compiler-budget.json, written by `python -m benchmarks.compiler_budget`), shown
for a request that asks exactly what the benchmark measured (the page's defaults) until
this server has measured it itself. Every point compiles the model, minutes on a small
CPU, so a fresh server would otherwise show nothing at the defaults."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pandas as pd

from memory.config import ModelConfig
from serving.jobs import Job

EXAMPLE_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "compiler-budget.json"


@dataclass(frozen=True)
class BudgetExample:
    """A stored sweep and where it was measured (not on this server)."""

    frame: pd.DataFrame
    date: str
    torch: str
    machine: str
    threads: int


@cache
def _examples(path: Path = EXAMPLE_PATH) -> tuple[tuple[dict, dict, dict], ...]:
    """(config, meta, points) per architecture in the benchmark's file; none when absent
    or unreadable (the page then offers to measure, as for any other settings)."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        meta = {key: report[key] for key in ("date", "torch", "machine", "threads",
                                               "repeats")}
        return tuple((entry["config"], meta, entry["points"])
                     for entry in report["results"].values())
    except (OSError, ValueError, KeyError, TypeError):
        return ()


def stored_example(job: Job, path: Path = EXAMPLE_PATH) -> BudgetExample | None:
    """The benchmark's sweep when `job` asks exactly what it measured, else None."""
    if job.kind != "budget":
        return None
    for config, meta, points in _examples(path):
        try:
            same_model = ModelConfig(**config) == job.config
        except (TypeError, ValueError):
            continue
        names = [(p.get("kind"), p.get("strategy")) for p in points]
        if (same_model and names == [tuple(n) for n in job.budget_points()]
                and meta["repeats"] == job.option("repeats")):
            return BudgetExample(pd.DataFrame(points), str(meta["date"]), str(meta["torch"]),
                                 str(meta["machine"]), int(meta["threads"]))
    return None
