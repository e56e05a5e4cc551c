"""The records a measurement gives back: plain data, no tensors, safe to cache and pickle.

`compare()` (demos.engine.measure) returns a `Comparison` of `StrategyResult`s, each with a
memory timeline of `TimelinePoint`s (demos.engine.tracker records them); `largest_fitting()`
(demos.engine.fit) returns a `FitResult`. demos.reports.report, demos.reports.figures and
the ui/ modules read these types.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pandas as pd

from demos.engine.device import DeviceInfo
from memory.config import ModelConfig


@dataclass
class TimelinePoint:
    index: int
    op: str
    phase: str  # forward | recompute | backward | loss | optimizer
    layer: int | None
    live_bytes: int


@dataclass
class StrategyResult:
    strategy: str
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
    # a refusal as an id and its numbers (demos.engine.measure.REFUSAL_IDS), worded by the UI;
    # `error` keeps the English text for the CLI and the CSV
    error_id: str | None = None
    error_args: dict = field(default_factory=dict)

    def as_dict(self, timeline: bool = False) -> dict:
        d = asdict(self)
        d["timeline"] = ([asdict(p) for p in self.timeline]
                         if timeline and self.timeline is not None else None)
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
                                 "error_args")}
            row.update({f"{k}_bytes": v for k, v in r.breakdown.items()})
            row["activation_error"] = (
                (r.activation_bytes - r.predicted_activation_bytes) / r.predicted_activation_bytes
                if r.activation_bytes is not None and r.predicted_activation_bytes else None)
            row["time_vs_none"] = (r.step_seconds / base.step_seconds
                                   if base and base.step_seconds and r.step_seconds else None)
            row["peak_vs_none"] = (r.peak_bytes / base.peak_bytes
                                   if base and base.peak_bytes and r.peak_bytes else None)
            rows.append(row)
        return pd.DataFrame(rows)

    def to_json(self, timeline: bool = False) -> dict:
        return {
            "config": self.config.as_dict(),
            "device": self.device.as_dict(),
            "limit_bytes": self.limit_bytes,
            "parameter_bytes": self.parameter_bytes,
            "results": [r.as_dict(timeline) for r in self.results],
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
