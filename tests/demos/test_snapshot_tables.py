"""The demos whose results are tables (a sweep, a what-fits search, training, the compiler's
budget points) keep the tracker's event log of the runs their memory snapshot holds
(demos.results.EVENTS_COLUMN): only those runs, through the result store's JSON
and back, replayed to the run's own peak, and never in a CSV."""

from __future__ import annotations

import pickle

import pandas as pd
import pytest
from torch.cuda import _memory_viz

from demos.compiler_budget import measure_point, to_frame
from demos.results import EVENTS_COLUMN
from demos.training import train_losses
from memory import theory
from memory.config import ModelConfig
from memory.strategies import parse_strategies
from reports import memory_snapshot
from reports.report import csv_frame
from serving.jobs import Job, decode_result, encode_result

TINY = ModelConfig(layers=2, hidden=32, heads=2, seq_len=16, batch=1, vocab=64)


def _stored(job: Job) -> pd.DataFrame:
    """The job run step by step as the worker runs it, merged as the service merges it,
    then through the result store's JSON."""
    merged = job.merge([job.run_step(i, "cpu", None) for i in range(job.step_count())])
    return decode_result(encode_result(merged))


def _replayed_peak(events: list[list]) -> int:
    live = peak = 0
    for _, _, nbytes, *_ in events:
        live += nbytes
        peak = max(peak, live)
    return peak


def _renders(runs: list, parameter_bytes: int) -> dict:
    """torch's own tools read the export (as _dump_snapshot writes it) without a GPU."""
    data = pickle.loads(memory_snapshot.snapshot_pickle(runs, parameter_bytes))
    assert "total_allocated" in _memory_viz.segsum(data)
    assert "Active Memory Timeline" in _memory_viz.trace_plot(data)
    return data


@pytest.fixture(scope="module")
def sweep() -> pd.DataFrame:
    return _stored(Job.make("sweep", TINY, parse_strategies("none,every-layer"), vary="batch",
                            values=(1, 2, 3), repeats=1))


def test_a_sweep_keeps_each_strategys_largest_point(sweep: pd.DataFrame) -> None:
    kept = sweep[sweep[EVENTS_COLUMN].notna()]
    assert sorted(zip(kept["strategy"], kept["batch"], strict=True)) == [
        ("every-layer", 3), ("none", 3)]
    for row in kept.to_dict(orient="records"):  # the row's own step, replayed
        assert _replayed_peak(row[EVENTS_COLUMN]) == row["peak_bytes"]
    runs, parameters = memory_snapshot.sweep_runs(sweep, TINY, "batch")
    assert [name for name, _ in runs] == ["strategy none, batch 3",
                                          "strategy every-layer, batch 3"]
    assert parameters == theory.parameter_bytes(TINY)
    data = _renders(runs, parameters)
    phases = {e["frames"][1]["name"] for e in data["device_traces"][0]
              if e["frames"][-1]["name"].startswith("strategy every-layer")}
    assert {"forward", "recompute", "backward"} <= phases


def test_the_segment_sweep_keeps_every_k() -> None:
    """Each every-k:K runs once, all on the same model: every one is kept."""
    config = TINY.replace(layers=3)
    frame = _stored(Job.make("sweep", config, (), vary="k", values=(1, 3), repeats=1))
    runs, parameters = memory_snapshot.sweep_runs(frame, config, "k")
    assert [name for name, _ in runs] == ["strategy every-k:1", "strategy every-k:3"]
    assert parameters == theory.parameter_bytes(config)


def test_the_event_logs_stay_out_of_the_csv_and_the_cli(sweep: pd.DataFrame) -> None:
    from demos.sweep import sweep as run_sweep

    assert EVENTS_COLUMN not in csv_frame(sweep).columns
    assert "memory_events" not in csv_frame(sweep).to_csv(index=False)
    # the CLI's sweep (python -m demos sweep) asks for no event log
    assert EVENTS_COLUMN not in run_sweep(TINY, "batch", [1], parse_strategies("none"),
                                          device="cpu",
                                         repeats=1).columns


def test_what_fits_keeps_each_confirmed_step() -> None:
    frame = _stored(Job.make("fits", TINY, parse_strategies("none,every-layer"), vary="batch",
                             budget_bytes=2 * 2**20))
    assert frame["value_confirmed"].notna().all()
    for row in frame.to_dict(orient="records"):
        assert _replayed_peak(row[EVENTS_COLUMN]) == row["peak_bytes"]
    runs, parameters = memory_snapshot.fits_runs(frame, TINY)
    assert [name for name, _ in runs] == [
        f"strategy {s}, batch {int(v)}"
        for s, v in zip(frame["strategy"], frame["value_confirmed"], strict=True)]
    assert parameters == theory.parameter_bytes(TINY)
    _renders(runs, parameters)


def test_training_tracks_the_first_step_and_changes_no_loss() -> None:
    config = TINY.replace(dropout=0.1)
    plain = train_losses(config, parse_strategies("none,every-layer"), 3, device="cpu")
    tracked = train_losses(config, parse_strategies("none,every-layer"), 3, device="cpu",
                           events=True)
    assert tracked["loss"].tolist() == plain["loss"].tolist()  # bitwise: the tracker only looks
    frame = decode_result(encode_result(tracked))
    kept = frame[frame[EVENTS_COLUMN].notna()]
    assert kept["step"].tolist() == [0, 0]
    runs, parameters = memory_snapshot.training_runs(frame, config)
    assert [name for name, _ in runs] == ["strategy none, training step 1",
                                          "strategy every-layer, training step 1"]
    data = _renders(runs, parameters)
    # the step's gradients are alive at its end (the optimizer's update is not tracked)
    assert any(b["state"] == "active_allocated" and b["frames"]
               and b["frames"][0]["name"] != "parameters"
               for b in data["segments"][0]["blocks"])


def test_the_budget_sweep_keeps_its_eager_points() -> None:
    """An eager point's whole step is tracked (recomputation included), its bytes held for
    backward unchanged; the frame of the CLI and the benchmark has no event log."""
    config = TINY.replace(layers=1)
    points = [measure_point(config, "eager", s, 1)[0] for s in ("none", "every-layer")]
    assert points[1].saved_bytes < points[0].saved_bytes
    assert EVENTS_COLUMN not in to_frame(points).columns
    frame = decode_result(encode_result(to_frame(points, events=True)))
    runs, parameters = memory_snapshot.budget_runs(frame, config)
    assert [name for name, _ in runs] == ["strategy none, eager",
                                          "strategy every-layer, eager"]
    data = _renders(runs, parameters)
    phases = {(e["frames"][1]["name"], e["frames"][2]["name"])
              for e in data["device_traces"][0]
              if e["frames"][-1]["name"] == "strategy every-layer, eager"
              and len(e["frames"]) == 4}
    assert ("recompute", "layer 0") in phases
