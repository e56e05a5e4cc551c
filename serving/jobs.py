"""A demo run as plain data: what to measure, split into steps that each hold the device
for a short while, its estimated time and memory, its store key, and its result as JSON.

`Job` is what `serving.service` queues and `serving.worker` executes one step at
a time; the steps' partial results are merged into what the pages read: a `Comparison` (compare), a
DataFrame (sweep, fits, train), a `PlacementRun` (placement: serving.placement_jobs). No
Streamlit here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from demos.device import DeviceInfo
from demos.results import Comparison, StrategyResult, TimelinePoint
from memory import theory
from memory.config import ConfigError, ModelConfig
from memory.strategies import StrategySpec, parse_strategy, require_spec, spec_of_label
from serving import picture_jobs, placement_jobs, toolbox_jobs

KINDS = ("compare", "sweep", "fits", "train", "mistakes", "budget", "pictures", "toolbox",
         "placement")
# The worker's own memory beside what a run's tensors need (Python objects, the tracker's
# bookkeeping, allocator slack); a run past predicted × MEMORY_FACTOR + this is stopped.
MEMORY_SLACK_BYTES = 512 * 2**20
MEMORY_FACTOR = 2.0
FIT_TRIES = 2  # confirm runs a fits step typically makes (the search steps down ~10%)
FIT_REPEATS = 3  # timed steps at the confirmed size, whatever its size (demos.fit)
# demos.measure's timing may add rounds beyond the asked ones while the spread is
# wide, but within TIME_CAP_SECONDS of wall time: a constant, not work, so the estimates
# count the asked runs only

Progress = Callable[[int, int], None]
# multi-step runs whose steps so far make a result to show (a comparison: its memory,
# measured in its first step, while its steps are timed in the second)
PARTIAL_KINDS = ("sweep", "compare")
# The strategies the lab of mistakes' steps are estimated with: a plain, a wrong and a
# fixed step of its small models.
_MISTAKE_RUNS = (StrategySpec("none"), StrategySpec("every-layer"), StrategySpec("every-layer"))


@dataclass(frozen=True)
class Job:
    """One demo request. `options` holds the kind's settings as sorted (name, value)
    pairs (hashable, JSON-able): compare: repeats, timeline, time_steps; sweep: vary,
    values, repeats; fits: vary, budget_bytes; train: steps; mistakes: cases (ids of
    demos.mistakes.CASES, one step each; the cases fix their own small models);
    budget: budgets, eager, compiled, repeats (demos.compiler_budget: one point per
    step); pictures: serving.picture_jobs; toolbox: part and its setting
    (serving.toolbox_jobs, one step); placement: shape, budget_percent (of the plain
    step's peak; serving.placement_jobs, one step).

    `strategies` are records (memory.strategies.StrategySpec); the request, and so the
    store's key, names them by their canonical text ("every-k:2"), which `from_request`
    parses back: the one place a job's strategies are read from text."""

    kind: str
    config: ModelConfig
    strategies: tuple[StrategySpec, ...]
    options: tuple[tuple[str, Any], ...] = ()

    @staticmethod
    def make(kind: str, config: ModelConfig, strategies: Sequence[StrategySpec],
             **options: Any) -> Job:
        """A job; TypeError for a strategy given as text (parse it where it comes in)."""
        if kind not in KINDS:
            raise ConfigError(f"kind={kind!r}: allowed {', '.join(KINDS)}")
        opts = tuple(sorted((k, tuple(v) if isinstance(v, list | tuple) else v)
                            for k, v in options.items()))
        return Job(kind, config, tuple(require_spec(s) for s in strategies), opts)

    def option(self, name: str, default: Any = None) -> Any:
        return dict(self.options).get(name, default)

    def request(self) -> dict[str, Any]:
        """The canonical JSON form (also the store's record of what was asked): the
        strategies as their canonical text, as the store's keys have always had them."""
        return {"kind": self.kind, "config": self.config.as_dict(),
                "strategies": [s.label for s in self.strategies],
                "options": {k: list(v) if isinstance(v, tuple) else v for k, v in self.options}}

    @staticmethod
    def from_request(data: dict[str, Any]) -> Job:
        """The job a request (`request()`'s JSON) asks for: its strategies' texts parsed
        here, once. ConfigError for a text that names no strategy."""
        return Job.make(data["kind"], ModelConfig(**data["config"]),
                        [parse_strategy(text) for text in data["strategies"]],
                        **data.get("options", {}))

    # ------------------------------------------------------------------ steps
    def budget_points(self) -> list[tuple[str, str]]:
        """(kind, strategy) of a budget job's points, one per step."""
        from demos.compiler_budget import point_names

        return point_names(self.option("budgets", ()), self.option("eager", ()),
                           self.option("compiled", ()))

    def step_count(self) -> int:
        if self.kind == "toolbox":  # lesson 10's measurements: one short step
            return 1
        if self.kind == "pictures":  # the /pictures page's runs: serving.picture_jobs
            return picture_jobs.step_count(self)
        if self.kind == "placement":  # every method's placement in one step
            return 1
        if self.kind == "mistakes":
            return len(self.option("cases", ()))
        if self.kind == "budget":
            return len(self.budget_points())
        if self.kind == "sweep":
            return len(self.option("values", ()))
        if self.kind in ("fits", "train"):
            return len(self.strategies)
        if self.kind == "compare" and self.timed_apart():
            return 2
        return 1

    def timed_apart(self) -> bool:
        """A compare run measures its memory in one step and times its steps in the next,
        so that a learner who arrives meanwhile gets memory numbers before anyone's steps
        are timed (the scheduler takes turns step by step)."""
        return (self.kind == "compare" and bool(self.option("time_steps", True))
                and int(self.option("repeats", 1)) > 0)

    def later_part(self) -> bool:
        """A part of a page drawn below numbers another run of that page shows first (the
        /pictures page's costs and size sweep, below its memory): like a comparison's timed
        steps, it waits behind every run's first numbers, and a server's start-up does not
        wait for it."""
        return self.kind == "pictures" and picture_jobs.later_part(self)

    def _sweep_config(self, value: int) -> ModelConfig:
        vary = self.option("vary")
        return self.config if vary == "k" else self.config.replace(**{vary: value})

    def _sweep_specs(self, value: int) -> list[StrategySpec]:
        return ([StrategySpec("every-k", k=value)] if self.option("vary") == "k"
                else list(self.strategies))

    def _fit_config(self, strategy: StrategySpec, device_kind: str) -> ModelConfig:
        """The size the theory's search lands on (the confirm runs start there)."""
        from demos.fit import largest_fitting

        vary, budget = self.option("vary"), int(self.option("budget_bytes"))
        try:
            found = largest_fitting(self.config, strategy, vary, budget, device=device_kind,
                                    confirm=False)
        except ConfigError:
            return self.config
        value = found.value_predicted
        return self.config.replace(**{vary: value}) if value else self.config

    def step_runs(self, index: int, device_kind: str = "cpu"
                  ) -> list[tuple[ModelConfig, StrategySpec, int]]:
        """(config, strategy, steps) of one step, for memory.theory.cpu_seconds."""
        if self.kind == "mistakes":  # a plain, a wrong and a fixed step, tracked
            from demos.mistakes import CASE_CONFIG

            return [(CASE_CONFIG, s, theory.TRACKED_STEP_COST) for s in _MISTAKE_RUNS]
        if self.kind == "budget":  # every point: one tracked, one counted, timed steps
            kind, strategy = self.budget_points()[index]
            return [(self.config, _budget_point_spec(kind, strategy),
                     theory.TRACKED_STEP_COST + 3 + int(self.option("repeats", 1)))]
        if self.kind == "compare":  # the memory (tracked, counted), then the timed steps
            steps = (int(self.option("repeats", 1)) + 1 if index == 1  # and one untimed
                     else theory.TRACKED_STEP_COST + theory.COUNTED_STEP_COST)
            return [(self.config, s, steps) for s in self.strategies]
        if self.kind == "sweep":
            value = self.option("values")[index]
            steps = (theory.TRACKED_STEP_COST + theory.COUNTED_STEP_COST
                     + int(self.option("repeats", 1)))
            return [(self._sweep_config(value), s, steps) for s in self._sweep_specs(value)]
        strategy = self.strategies[index]
        if self.kind == "fits":
            return [(self._fit_config(strategy, device_kind), strategy,
                     FIT_TRIES * theory.TRACKED_STEP_COST + theory.COUNTED_STEP_COST
                     + FIT_REPEATS)]
        return [(self.config, strategy, int(self.option("steps", 1)))]

    def step_work(self, index: int, device_kind: str = "cpu") -> float:
        """A step's work in CPU-estimate seconds (memory.theory.cpu_seconds); the service
        scales it by what this device measured. A compiled point adds its compile."""
        if self.kind == "pictures":
            return picture_jobs.step_work(self, index)
        if self.kind == "toolbox":
            return toolbox_jobs.step_work(self)
        if self.kind == "placement":
            return placement_jobs.step_work(self, device_kind)
        if self.kind == "mistakes":  # a case's own small models: its record's estimate
            from demos.mistakes import CASES

            return CASES[self.option("cases")[index]].estimate_s
        work = theory.cpu_seconds(self.step_runs(index, device_kind))
        if self.kind == "budget" and self.budget_points()[index][0] != "eager":
            from demos.compiler_budget import compile_seconds

            work += compile_seconds(self.config)
        return work

    def work(self, device_kind: str = "cpu") -> float:
        return sum(self.step_work(i, device_kind) for i in range(self.step_count()))

    def memory_bytes(self, device_kind: str = "cpu") -> int:
        """The most memory one step's tensors will take, by the theory: parameters plus the
        predicted peak (plus gradients and optimizer state for training; the budget for a
        fits search, which never runs past it)."""
        if self.kind == "pictures":  # estimated from the family's measured tiny model
            return picture_jobs.memory_bytes(self)
        if self.kind == "toolbox":
            return toolbox_jobs.MEMORY_BYTES
        if self.kind == "placement":  # the plain step's predicted peak, exact on a CPU
            return placement_jobs.memory_bytes(self, device_kind)
        if self.kind == "fits":
            return int(self.option("budget_bytes"))
        need = 0
        if self.kind == "budget":  # the compiler's own memory (Inductor, its graphs)
            from demos.compiler_budget import COMPILER_BYTES

            need = COMPILER_BYTES
        for index in range(self.step_count()):
            for config, strategy, _ in self.step_runs(index, device_kind):
                try:
                    params = theory.parameter_bytes(config)
                    peak = theory.predicted_peak_bytes(config, strategy, device_kind)
                except (ConfigError, ValueError, ZeroDivisionError):
                    continue  # the engine explains it; nothing to bound
                extra = 3 * params if self.kind == "train" else 0  # grads + AdamW moments
                if self.kind == "budget":
                    extra = COMPILER_BYTES
                need = max(need, params + peak + extra)
        return need

    def memory_bound(self, device_kind: str = "cpu") -> int:
        """What the worker may grow by for this run before it is stopped."""
        return int(self.memory_bytes(device_kind) * MEMORY_FACTOR) + MEMORY_SLACK_BYTES

    # ------------------------------------------------------------------ running (worker)
    def run_step(self, index: int, device_kind: str, limit_bytes: int | None,
                 progress: Progress | None = None,
                 partial: Callable[[Any], None] | None = None) -> Any:
        """Run step `index` on this process's device; returns its partial result.
        `partial(result)` sees a compare's result as it fills in (the memory first, then
        the times round by round), to show before the step ends."""
        if self.kind == "pictures":  # a table, merged and stored as every table is
            return picture_jobs.run_step(self, index, device_kind)
        if self.kind == "toolbox":  # a table too; on the CPU whatever the device
            return toolbox_jobs.run_step(self)
        if self.kind == "placement":
            return placement_jobs.run_step(self, device_kind)
        if self.kind == "mistakes":  # CPU only: the live tracker measures to the byte
            from demos.mistakes import run_case

            return run_case(self.option("cases")[index])
        if self.kind == "compare":
            from demos.measure import compare

            # Measured in two parts, the memory step's partial result (its memory, shown
            # at once) comes before its FLOP count; the plain reference step for the
            # gradient check waits for the timing part.
            timing, apart = index == 1, self.timed_apart()
            return compare(self.config, list(self.strategies), device=device_kind,
                           repeats=int(self.option("repeats", 1)),
                           timeline=bool(self.option("timeline", False)) and not timing,
                           time_steps=timing, memory=not timing,
                           check_gradients=timing or not apart,
                           limit_bytes=limit_bytes,
                           on_partial=partial if timing or apart else None)
        if self.kind == "budget":
            from demos.compiler_budget import measure_point, reference_grads

            kind, strategy = self.budget_points()[index]
            point, _ = measure_point(self.config, kind, strategy,
                                     int(self.option("repeats", 1)),
                                     reference_grads(self.config))
            return {**dataclasses.asdict(point), "label": point.label}
        if self.kind == "sweep":
            from demos.sweep import sweep

            value = self.option("values")[index]
            return sweep(self.config, self.option("vary"), [value], list(self.strategies),
                         device=device_kind, repeats=int(self.option("repeats", 1)),
                         limit_bytes=limit_bytes, events=True)
        strategy = self.strategies[index]
        if self.kind == "fits":
            from demos.fit import largest_fitting

            found = largest_fitting(self.config, strategy, self.option("vary"),
                                    int(self.option("budget_bytes")), device=device_kind,
                                    confirm=True)
            return {"strategy": strategy.label, "vary": self.option("vary"),
                    "budget_bytes": int(self.option("budget_bytes")),
                    **dataclasses.asdict(found)}
        from demos.training import train_losses

        return train_losses(self.config, [strategy], int(self.option("steps", 1)),
                            progress=progress, device=device_kind, events=True)

    def merge(self, parts: Sequence[Any]) -> Any:
        """The steps' partial results as the page's result. The tracker's event logs it
        keeps for the memory snapshot (demos.results.EVENTS_COLUMN): a compare's
        every strategy; a sweep's last point per strategy (the others dropped); a fits
        search's confirmed step per strategy; training's first step per strategy; the
        budget sweep's eager points."""
        if self.kind == "compare":
            return parts[0].with_times(parts[1]) if len(parts) > 1 else parts[0]
        if self.kind == "budget":
            from demos.compiler_budget import BudgetPoint, to_frame

            names = set(BudgetPoint.__dataclass_fields__)
            return to_frame([BudgetPoint(**{k: v for k, v in part.items() if k in names})
                             for part in parts], events=True)
        if self.kind == "fits":
            return pd.DataFrame(list(parts))
        if self.kind == "mistakes":
            return list(parts)
        if self.kind == "placement":  # one step: its PlacementRun
            return parts[0]
        frame = pd.concat(list(parts), ignore_index=True)
        if self.kind == "sweep":
            from demos.sweep import keep_last_events

            return keep_last_events(frame)
        return frame


def _budget_point_spec(kind: str, point: str) -> StrategySpec:
    """The lab's strategy a compiler-budget point is estimated as: its manual strategy,
    named in the budget job's options by its text (demos.compiler_budget, whose selective
    policies are not all the lab's: estimated as the default one); a budget point, or a
    text that names no strategy of the lab, as no checkpointing."""
    if kind == "budget":
        return StrategySpec("none")
    if point.startswith("selective:"):
        return StrategySpec("selective")
    return spec_of_label(point) or StrategySpec("none")


# ---------------------------------------------------------------------- store keys

@cache
def code_version() -> str:
    """A hash of what a measurement depends on (the lab's engine, demos/ but its command
    line, the real library classes it builds, model_classes/, and the memory model it
    predicts with, memory/): a changed engine measures again."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    command_line = {"cli.py", "__main__.py"}
    engine = [p for p in (root / "demos").glob("*.py") if p.name not in command_line]
    for path in sorted([*engine, *(root / "model_classes").glob("*.py"),
                        *(root / "memory").glob("*.py")]):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def store_key(job: Job, device: DeviceInfo) -> str:
    """The result store's key: the request, the device kind and name, the torch version
    and the engine's code version."""
    text = json.dumps({"request": job.request(), "device": [device.kind, device.name],
                       "torch": device.torch_version, "code": code_version()},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------------- results as JSON

def encode_result(result: Any) -> str:
    """A merged result as JSON text (no pickle: the database may be shared)."""
    if isinstance(result, Comparison):
        return json.dumps({"type": "comparison", "data": result.to_json(timeline=True)})
    if isinstance(result, pd.DataFrame):
        return json.dumps({"type": "frame", "data": result.to_json(orient="table",
                                                                   index=False)})
    if isinstance(result, list):  # a mistakes job: demos.mistakes.CaseResult records
        return json.dumps({"type": "mistakes", "data": [r.to_json() for r in result]})
    from demos.placement_lab import PlacementRun

    if isinstance(result, PlacementRun):
        return json.dumps({"type": "placement", "data": result.to_json()})
    raise TypeError(f"cannot store a {type(result).__name__}")


def decode_result(text: str) -> Any:
    payload = json.loads(text)
    data = payload["data"]
    if payload["type"] == "mistakes":
        from demos.mistakes import CaseResult

        return [CaseResult.from_json(item) for item in data]
    if payload["type"] == "placement":
        from demos.placement_lab import PlacementRun

        return PlacementRun.from_json(data)
    if payload["type"] == "frame":
        frame = pd.read_json(io.StringIO(data), orient="table")
        for column in frame.select_dtypes(include="object").columns:  # JSON null: None, not NaN
            frame[column] = frame[column].where(frame[column].notna(), None)
        return frame
    results = []
    for item in data["results"]:  # each strategy's text parsed once, here
        timeline = item.get("timeline")
        item = {**item, "timeline": ([TimelinePoint(**p) for p in timeline]
                                     if timeline is not None else None)}
        results.append(StrategyResult.from_dict(item, parse_strategy(item["strategy"])))
    return Comparison(ModelConfig(**data["config"]), DeviceInfo(**data["device"]), results,
                      data.get("limit_bytes"), data.get("parameter_bytes"))
