"""The records a measurement gives back: plain data, no tensors, safe to cache and pickle.

`compare()` (demos.measure) returns a `Comparison` of `StrategyResult`s, each with a
memory timeline of `TimelinePoint`s (demos.tracker records them); `largest_fitting()`
(demos.fit) returns a `FitResult`. The reports modules (tables, sentences,
figures) and the ui/ modules read these types.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace

import pandas as pd

from demos.device import DeviceInfo
from memory.config import ModelConfig
from memory.strategies import StrategySpec

# A timed run whose CPU time is under this share of wall time × threads waited for the
# cores more than it computed; a spread (quartiles over median) above WIDE_SPREAD is wide.
BUSY_CPU_SHARE = 0.5
WIDE_SPREAD = 0.25
# The column of a results table (a sweep, a what-fits search, training losses, the
# compiler's budget points) that holds a run's tracker event log (LiveTracker.events), for
# reports.memory_snapshot; None in the rows whose log is not kept. Never in a CSV.
EVENTS_COLUMN = "memory_events"


def step_range(runs: Sequence[float]) -> tuple[float, float] | None:
    """The spread of timed runs: the middle half (quartiles), or the lowest and highest
    under four runs; None without runs."""
    ordered = sorted(runs)
    if not ordered:
        return None
    if len(ordered) >= 4:
        low, _, high = statistics.quantiles(ordered, n=4, method="inclusive")
        return low, high
    return ordered[0], ordered[-1]


@dataclass
class TimelinePoint:
    index: int
    op: str
    phase: str  # forward | recompute | backward | loss | optimizer
    layer: int | None
    live_bytes: int


@dataclass
class StrategyResult:
    spec: StrategySpec  # the strategy measured; `strategy` is its canonical text
    label: str
    fits: bool
    error: str | None
    peak_bytes: int | None
    activation_bytes: int | None
    predicted_activation_bytes: int
    predicted_peak_bytes: int
    breakdown: dict[str, int]
    step_seconds: float | None
    step_seconds_runs: list[float]
    loss: float | None
    max_grad_diff: float | None
    bitwise_equal: bool | None
    measured_by: str
    timeline: list[TimelinePoint] | None = None
    loss_held_bytes: int | None = None  # log-softmax etc., held by the loss
    tracker_peak_bytes: int | None = None  # the tracker's own peak (= peak_bytes on CPU)
    plan: list[str] = field(default_factory=list)  # the segments, e.g. "0-1 checkpoint"
    # where the step's peak was (the tracker's op, phase and layer there): memory.theory
    # .peak_cause says what set it
    peak_op: str | None = None
    peak_phase: str | None = None
    peak_layer: int | None = None
    # a refusal as an id and its numbers (demos.measure.REFUSAL_IDS), worded by the UI;
    # `error` keeps the English text for the CLI and the CSV
    error_id: str | None = None
    error_args: dict = field(default_factory=dict)
    # torch.utils.flop_counter.FlopCounterMode around the whole tracked step, and what
    # memory.theory.counted_flops predicts it counts
    flops_counted: int | None = None
    flops_predicted: float | None = None
    # the process's CPU seconds (all threads) of each timed run, beside step_seconds_runs,
    # and the threads it ran with: wall time well above CPU time / threads means the
    # process waited for the cores (other work on the machine)
    cpu_seconds_runs: list[float] = field(default_factory=list)
    threads: int | None = None
    # the tracker's storage births and deaths in the measured step (LiveTracker.events),
    # which reports.memory_snapshot exports in torch's memory-snapshot format
    memory_events: list[list] | None = None

    @property
    def strategy(self) -> str:
        """The strategy's canonical text ("every-k:2"): the tables', the CSV's and the
        stored JSON's."""
        return self.spec.label

    @property
    def cpu_seconds(self) -> float | None:
        """Median CPU seconds of the timed runs."""
        return statistics.median(self.cpu_seconds_runs) if self.cpu_seconds_runs else None

    @property
    def cpu_share(self) -> float | None:
        """CPU time over wall time × threads, all timed runs together: near 1 on an idle
        machine for well-threaded work, low when other processes took the cores."""
        wall = sum(self.step_seconds_runs)
        if not self.cpu_seconds_runs or not wall:
            return None
        return sum(self.cpu_seconds_runs) / (wall * (self.threads or 1))

    @property
    def step_range(self) -> tuple[float, float] | None:
        return step_range(self.step_seconds_runs)

    @property
    def spread_share(self) -> float | None:
        """The middle half of the timed runs (quartiles) over their median; None under
        four runs."""
        spread = self.step_range
        if len(self.step_seconds_runs) < 4 or spread is None:
            return None
        median = statistics.median(self.step_seconds_runs)
        return (spread[1] - spread[0]) / median if median else None

    @classmethod
    def from_dict(cls, data: dict, spec: StrategySpec) -> StrategyResult:
        """A result from as_dict's output (the timeline already as TimelinePoints or None)
        and its strategy's record, which whoever read the data parsed from its "strategy"
        text (serving.jobs.decode_result); the derived keys (strategy, cpu_seconds) and
        keys of a newer engine are left out."""
        names = {f.name for f in fields(cls)} - {"spec"}
        return cls(spec=spec, **{k: v for k, v in data.items() if k in names})

    def as_dict(self, timeline: bool = False) -> dict:
        """Plain data, JSON-able: the strategy as its canonical text ("strategy")."""
        d = {"strategy": self.strategy, **asdict(self)}
        del d["spec"]
        d["cpu_seconds"] = self.cpu_seconds
        d["timeline"] = ([asdict(p) for p in self.timeline]
                         if timeline and self.timeline is not None else None)
        if not timeline:  # the timeline and the event log travel only to the store
            del d["memory_events"]
        return d


@dataclass
class Comparison:
    config: ModelConfig
    device: DeviceInfo
    results: list[StrategyResult]
    limit_bytes: int | None = None
    parameter_bytes: int | None = None

    def result(self, strategy: str) -> StrategyResult:
        for r in self.results:
            if r.strategy == strategy or r.label == strategy:
                return r
        raise KeyError(strategy)

    def to_frame(self) -> pd.DataFrame:
        """One row per strategy; ratios are against 'none' where it was measured."""
        base = next((r for r in self.results if r.strategy == "none" and r.fits), None)
        rows = []
        for r in self.results:
            row = {k: v for k, v in r.as_dict().items()
                   if k not in ("timeline", "breakdown", "step_seconds_runs", "plan",
                                 "error_args", "cpu_seconds_runs")}
            row.update({f"{k}_bytes": v for k, v in r.breakdown.items()})
            spread = r.step_range  # the timed runs' range, for a chart's error bars
            row["step_seconds_low"], row["step_seconds_high"] = spread or (None, None)
            row["activation_error"] = (
                (r.activation_bytes - r.predicted_activation_bytes) / r.predicted_activation_bytes
                if r.activation_bytes is not None and r.predicted_activation_bytes else None)
            row["time_vs_none"] = (r.step_seconds / base.step_seconds
                                   if base and base.step_seconds and r.step_seconds else None)
            # CPU time against none's: the ratio the verdicts read (load hardly moves it)
            row["cpu_vs_none"] = (r.cpu_seconds / base.cpu_seconds
                                  if base and base.cpu_seconds and r.cpu_seconds else None)
            row["flops_vs_none"] = (r.flops_counted / base.flops_counted
                                    if base and base.flops_counted and r.flops_counted
                                    else None)
            row["peak_vs_none"] = (r.peak_bytes / base.peak_bytes
                                   if base and base.peak_bytes and r.peak_bytes else None)
            rows.append(row)
        return pd.DataFrame(rows)

    def busy(self) -> bool:
        """Timed while the machine was busy: a strategy's CPU time fell far below its wall
        time (BUSY_CPU_SHARE) or its spread was wide (WIDE_SPREAD). Such times are not
        representative: serving.service measures them again when the server is idle."""
        for r in self.results:
            share, spread = r.cpu_share, r.spread_share
            if (share is not None and share < BUSY_CPU_SHARE) or (
                    spread is not None and spread > WIDE_SPREAD):
                return True
        return False

    def with_times(self, timed: Comparison) -> Comparison:
        """This comparison's memory figures with the times of `timed` (the same strategies,
        timed by `compare(memory=False)`): a strategy that fit here takes its timed runs
        (and the gradient check, when that part made it) there, or that part's refusal
        when it ran out of memory while timing."""
        results = []
        for mine, theirs in zip(self.results, timed.results, strict=True):
            if not mine.fits:
                results.append(mine)
            elif not theirs.fits and theirs.error_id == "oom-timing":
                results.append(replace(mine, fits=False, error=theirs.error,
                                       error_id=theirs.error_id,
                                       error_args=dict(theirs.error_args)))
            else:
                checked = theirs.bitwise_equal is not None  # the timing part checked them
                results.append(replace(
                    mine, step_seconds=theirs.step_seconds,
                    step_seconds_runs=list(theirs.step_seconds_runs),
                    cpu_seconds_runs=list(theirs.cpu_seconds_runs), threads=theirs.threads,
                    max_grad_diff=theirs.max_grad_diff if checked else mine.max_grad_diff,
                    bitwise_equal=theirs.bitwise_equal if checked else mine.bitwise_equal))
        return replace(self, results=results)

    def to_json(self, timeline: bool = False) -> dict:
        return {
            "config": self.config.as_dict(),
            "device": self.device.as_dict(),
            "limit_bytes": self.limit_bytes,
            "parameter_bytes": self.parameter_bytes,
            "results": [r.as_dict(timeline) for r in self.results],
            "timed_while_busy": self.busy(),
        }


@dataclass
class FitResult:
    strategy: str
    vary: str
    budget_bytes: int
    value_predicted: int | None  # largest value whose predicted total fits the budget
    value_confirmed: int | None  # largest value a real run confirmed (None if not run)
    peak_bytes: int | None  # measured peak above the parameters at value_confirmed
    total_bytes: int | None  # parameters + measured peak
    predicted_total_bytes: int | None
    tokens_per_second: float | None
    step_seconds: float | None
    measured_by: str | None
    note: str = ""
    # the confirmed size's timed runs (wall and CPU seconds) and its step FLOPs, counted by
    # torch and predicted: tokens_per_second is from the median of the runs
    step_seconds_runs: list[float] = field(default_factory=list)
    cpu_seconds_runs: list[float] = field(default_factory=list)
    threads: int | None = None
    flops_counted: int | None = None
    flops_predicted: float | None = None
    # the confirmed size's tracked step (LiveTracker.events), for the memory snapshot
    memory_events: list[list] | None = None


def timed_while_busy(result: object) -> bool:
    """Whether a stored result's times were taken while the machine was busy (see
    Comparison.busy): a Comparison, or a frame of sweep rows (cpu_seconds, step_seconds,
    threads) or what-fits rows (their timed runs)."""
    if isinstance(result, Comparison):
        return result.busy()
    if not isinstance(result, pd.DataFrame) or result.empty:
        return False
    for row in result.to_dict(orient="records"):
        threads = row.get("threads") or 1
        runs, cpu = row.get("step_seconds_runs"), row.get("cpu_seconds_runs")
        if isinstance(runs, list) and isinstance(cpu, list) and runs and cpu:
            wall, used = sum(runs), sum(cpu)
            probe = StrategyResult(
                spec=StrategySpec("none"), label="", fits=True, error=None, peak_bytes=None,
                activation_bytes=None, predicted_activation_bytes=0, predicted_peak_bytes=0,
                breakdown={}, step_seconds=None, step_seconds_runs=list(runs), loss=None,
                max_grad_diff=None, bitwise_equal=None, measured_by="",
                cpu_seconds_runs=list(cpu), threads=int(threads))
            spread = probe.spread_share
            if used / (wall * threads) < BUSY_CPU_SHARE or (spread or 0) > WIDE_SPREAD:
                return True
            continue
        wall, used = row.get("step_seconds"), row.get("cpu_seconds")
        if (isinstance(wall, float | int) and isinstance(used, float | int) and wall > 0
                and not pd.isna(wall) and not pd.isna(used)
                and used / (wall * threads) < BUSY_CPU_SHARE):
            return True
    return False
