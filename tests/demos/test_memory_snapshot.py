"""A demo run exported as torch's memory snapshot (reports.memory_snapshot): built
from the tracker's event log of this run, it replays to the tracker's own peak, and torch's
own tools read it without a GPU: `torch.cuda._memory_viz`'s segment summary and trace
(which check the allocator's accounting), and its plotting functions `trace_plot` and
`segment_plot` (the HTML of PyTorch's memory viewer, with the snapshot inside)."""

from __future__ import annotations

import base64
import json
import pickle
import re

import pytest
from torch.cuda import _memory_viz

from demos.measure import compare
from demos.results import Comparison
from memory.config import ModelConfig
from memory.strategies import parse_strategies
from reports.memory_snapshot import (
    BASE_ADDRESS,
    ROUNDING,
    FirstFit,
    comparison_runs,
    comparison_snapshot,
    snapshot_pickle,
)
from serving.jobs import decode_result, encode_result

CONFIG = ModelConfig(layers=3, hidden=32, heads=2, seq_len=16, batch=2, vocab=64)
STRATEGIES = parse_strategies("every-layer,selective")


@pytest.fixture(scope="module")
def comparison() -> Comparison:
    return compare(CONFIG, STRATEGIES, device="cpu", time_steps=False)


def _replayed_peaks(snap: dict) -> dict[str, int]:
    """The largest live bytes (requested, weights left out) per strategy, replaying the
    trace as torch's viewer does."""
    live, peaks, sizes = 0, {}, {}
    for event in snap["device_traces"][0]:
        strategy = event["frames"][-1]["name"].removeprefix("strategy ")
        if event["action"] == "alloc":
            requested = event["size"]  # the rounded block; the request is kept below
            sizes[event["addr"]] = requested
            live += requested
        elif event["action"] == "free_completed":
            live -= sizes.pop(event["addr"])
        peaks[strategy] = max(peaks.get(strategy, 0), live)
    return peaks


def test_the_snapshot_replays_the_tracked_step(comparison: Comparison) -> None:
    snap = comparison_snapshot(comparison)
    assert set(snap) >= {"segments", "device_traces"}
    trace = snap["device_traces"][0]
    by_strategy = {r.strategy: r for r in comparison.results}
    order = list(dict.fromkeys(e["frames"][-1]["name"] for e in trace))
    assert order == [f"strategy {r.strategy}" for r in comparison.results]
    for result in comparison.results:
        births = [e for e in result.memory_events if e[2] > 0]
        allocs = [e for e in trace if e["action"] == "alloc"
                  and e["frames"][-1]["name"] == f"strategy {result.strategy}"]
        assert len(allocs) == len(births) > 0
        # every block is the tracker's bytes rounded up to torch's 512-byte blocks
        assert all(a["size"] == max(ROUNDING, -(-b[2] // ROUNDING) * ROUNDING)
                   for a, b in zip(allocs, births, strict=True))
        assert {a["frames"][1]["name"] for a in allocs} >= {"forward", "backward"}
    # replayed with the tracker's own bytes, each step's peak is the tracker's peak
    exact = snapshot_exact(comparison)
    for strategy, peak in exact.items():
        assert peak == by_strategy[strategy].peak_bytes, strategy
    assert any(e["frames"][1]["name"] == "recompute" for e in trace
               if e["frames"][-1]["name"] == "strategy every-layer")
    # the rounded blocks' replay is at least the requested bytes
    rounded = _replayed_peaks(snap)
    assert all(rounded[s] >= exact[s] for s in exact)


def snapshot_exact(comparison: Comparison) -> dict[str, int]:
    """The per-strategy peak of the event log itself (requested bytes)."""
    peaks = {}
    for r in comparison.results:
        live = peak = 0
        for _, _, nbytes, *_ in r.memory_events:
            live += nbytes
            peak = max(peak, live)
        peaks[r.strategy] = peak
    return peaks


def test_every_field_of_torchs_snapshot_is_there(comparison: Comparison) -> None:
    """The keys of torch 2.13's Snapshot, Segment, Block, Frame and TraceEntry (the
    TypedDicts in torch.cuda.memory._snapshot's docstring; OOM's device_free aside)."""
    from torch.cuda import memory

    doc = memory._snapshot.__doc__
    for name in ("segment_pool_id", "allocated_size", "active_size", "requested_size",
                 "pool_id", "device_traces"):
        assert name in doc  # the fields below are still torch's
    snap = comparison_snapshot(comparison)
    (segment,) = snap["segments"]
    assert set(segment) >= {"address", "total_size", "stream", "segment_type",
                            "segment_pool_id", "allocated_size", "active_size", "blocks"}
    for block in segment["blocks"]:
        assert set(block) >= {"size", "requested_size", "address", "state", "frames"}
    for event in snap["device_traces"][0]:
        assert set(event) >= {"action", "addr", "frames", "size", "stream", "pool_id"}
        assert all(set(f) >= {"filename", "line", "name"} for f in event["frames"])


def test_the_end_state_holds_the_weights_and_the_gradients(comparison: Comparison) -> None:
    snap = comparison_snapshot(comparison)
    (segment,) = snap["segments"]
    assert segment["address"] == BASE_ADDRESS
    assert sum(b["size"] for b in segment["blocks"]) == segment["total_size"]
    active = [b for b in segment["blocks"] if b["state"] == "active_allocated"]
    assert active[0]["frames"][0]["name"] == "parameters"
    assert active[0]["requested_size"] == comparison.parameter_bytes
    # the last strategy's gradients (alive when its step ended), one per parameter
    last = comparison.results[-1].memory_events
    alive = {e[1] for e in last if e[2] > 0} - {e[1] for e in last if e[2] < 0}
    assert len(active) - 1 >= len(alive) > 0


def test_torchs_memory_viz_reads_the_export(comparison: Comparison) -> None:
    data = pickle.loads(snapshot_pickle(comparison_runs(comparison),
                                        comparison.parameter_bytes))  # as _dump_snapshot writes
    summary = _memory_viz.segsum(data)  # raises on any accounting error
    (segment,) = data["segments"]
    assert "segments: 1" in summary
    allocated = sum(b["requested_size"] for b in segment["blocks"]
                    if b["state"] == "active_allocated")
    assert f"total_allocated: {_memory_viz.Bytes(allocated)}" in summary
    text = _memory_viz.trace(data)
    events = len(data["device_traces"][0])
    assert text.startswith(f"Device 0 ----------------\n{events} entries\n")
    assert text.count("free completed for") == sum(
        1 for e in data["device_traces"][0] if e["action"] == "free_completed")
    for plot, kind in ((_memory_viz.trace_plot, "Active Memory Timeline"),
                       (_memory_viz.segment_plot, "Allocator State History")):
        html = plot(data)
        assert repr(kind) in html
        files = json.loads(re.search(r"const local_files = (\[.*\])", html).group(1))
        embedded = base64.b64decode(files[0]["base64"]).rstrip(b"\x00")
        assert pickle.loads(embedded) == data


def test_the_event_log_survives_the_result_store(comparison: Comparison) -> None:
    again = decode_result(encode_result(comparison))
    assert comparison_snapshot(again) == comparison_snapshot(comparison)
    assert "memory_events" not in comparison.results[0].as_dict()  # not in the CLI's JSON


def test_first_fit_reuses_freed_space() -> None:
    space = FirstFit()
    a, b, c = space.alloc(512), space.alloc(1024), space.alloc(512)
    assert (a, b, c) == (0, 512, 1536)
    space.release(b, 1024)
    assert space.alloc(512) == 512  # the freed hole, not the top
    space.release(a, 512)
    space.release(512, 512)
    assert space.free == [(0, 1536)]  # the three neighbours merged
    assert space.alloc(1536) == 0 and space.top == 2048


def test_a_mistake_case_exports_its_three_runs() -> None:
    from demos.mistakes import run_case
    from reports.memory_snapshot import snapshot

    r = run_case("whole-model-one-segment")
    data = snapshot([("plain", r.plain.memory_events), ("wrong", r.wrong.memory_events),
                     ("fixed", r.fixed.memory_events)])
    runs = [e["frames"][-1]["name"] for e in data["device_traces"][0]]
    assert list(dict.fromkeys(runs)) == ["plain", "wrong", "fixed"]
    for name, m in (("plain", r.plain), ("wrong", r.wrong), ("fixed", r.fixed)):
        live = peak = 0
        for _, _, nbytes, *_ in m.memory_events:
            live += nbytes
            peak = max(peak, live)
        assert peak == m.peak_bytes, name  # the case's own peak, replayed
    assert "Active Memory Timeline" in _memory_viz.trace_plot(data)
    _memory_viz.segsum(data)
