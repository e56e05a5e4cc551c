"""Vary one parameter over a list of values and collect one row per (value, strategy)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from demos.measure import compare
from demos.results import EVENTS_COLUMN
from memory.config import ConfigError, ModelConfig
from memory.strategies import StrategySpec, require_spec

SWEEPABLE = ("layers", "seq_len", "batch", "vocab", "hidden", "k")
COLUMNS = ["value", "strategy", "label", "fits", "error", "peak_bytes", "activation_bytes",
           "predicted_activation_bytes", "predicted_peak_bytes", "step_seconds", "loss",
           "max_grad_diff", "measured_by"]


def parse_vary(text: str) -> tuple[str, list[int]]:
    """'layers=2,4,8' -> ('layers', [2, 4, 8]); 'seq' is accepted for seq_len."""
    name, sep, values = str(text).partition("=")
    name = name.strip().replace("-", "_")
    name = {"seq": "seq_len"}.get(name, name)
    if not sep or name not in SWEEPABLE:
        raise ConfigError(f"vary={text!r}: write NAME=V1,V2,... with NAME one of "
                          f"{', '.join(SWEEPABLE)}")
    try:
        numbers = [int(v) for v in values.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"vary={text!r}: values must be whole numbers") from None
    if not numbers:
        raise ConfigError(f"vary={text!r}: give at least one value")
    return name, numbers


def sweep(base: ModelConfig, vary: str, values: Sequence[int],
          strategies: Sequence[StrategySpec],
          device: str = "auto", repeats: int = 3,
          progress: Callable[[int, int], None] | None = None,
          limit_bytes: int | None = None, events: bool = False) -> pd.DataFrame:
    """One row per (value, strategy), with a column named after `vary` (and 'value').
    vary='k' sweeps the segment length of every-k (strategies are then ignored).
    progress(done, total) is called after each value. `events`: the tracker's event log
    of each strategy's last point in EVENTS_COLUMN (keep_last_events)."""
    if vary not in SWEEPABLE:
        raise ConfigError(f"vary={vary!r} cannot be swept; allowed {', '.join(SWEEPABLE)}")
    specs = [require_spec(s) for s in strategies]
    values = list(values)
    if not values:
        raise ConfigError("sweep: give at least one value")
    configs = []
    for v in values:  # validate everything before running anything
        cfg = base if vary == "k" else base.replace(**{vary: v}).validated()
        if vary == "k" and not 1 <= v <= base.layers:
            raise ConfigError(f"k={v} is out of range; allowed 1..{base.layers} (the layers)")
        configs.append(cfg)
    rows = []
    for n, (v, cfg) in enumerate(zip(values, configs, strict=True)):
        specs_here = [StrategySpec("every-k", k=v)] if vary == "k" else specs
        comparison = compare(cfg, specs_here, device=device, repeats=repeats,
                             limit_bytes=limit_bytes)
        frame = comparison.to_frame()
        if events:
            frame[EVENTS_COLUMN] = [r.memory_events for r in comparison.results]
        frame.insert(0, "value", v)
        frame.insert(0, vary, v)
        rows.append(frame)
        if progress is not None:
            progress(n + 1, len(values))
    out = pd.concat(rows, ignore_index=True)
    out = out[[vary] + [c for c in COLUMNS if c in out.columns]
              + [c for c in out.columns if c not in COLUMNS and c != vary]]
    return keep_last_events(out) if events else out


def keep_last_events(frame: pd.DataFrame) -> pd.DataFrame:
    """The event log of each strategy's last measured point only, the others set to None:
    a stored sweep keeps one tracked step per strategy, not one per point. The curves run
    their values in ascending order, so that is the largest model a strategy ran; in the
    segment sweep each every-k:K runs once, all on the same model."""
    if EVENTS_COLUMN not in frame:
        return frame
    tracked = frame[frame[EVENTS_COLUMN].notna()]
    last = set(tracked.index.to_series().groupby(tracked["strategy"]).max())
    frame = frame.copy()
    frame[EVENTS_COLUMN] = [e if i in last else None
                            for i, e in zip(frame.index, frame[EVENTS_COLUMN], strict=True)]
    return frame
