"""The worst slider corners of every demo page: engine time and figure build time.

/timeline?layers=24 once spent 7.5 s in the engine and 214 s building its chart (one
Plotly shape per layer segment). This benchmark runs each demo page's heaviest
settings on this machine's device, times the engine call the page makes and the figure it
builds (the builder plus the JSON Streamlit sends, as st.plotly_chart does), and writes
the table to benchmarks/figure-corners.json.

    .venv/bin/python -m benchmarks.figure_corners            # every corner
    .venv/bin/python -m benchmarks.figure_corners --quick    # figure-heavy corners only

The corners with the most figure elements (depth and strategies at their maximum) use the
smallest widths, since the figure's size depends on the number of ops, not on their size;
that once-slow case (/timeline?layers=24 at the page's other defaults) is run as it is.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from demos.device import detect_device
from demos.fit import largest_fitting
from demos.measure import PAGE_REPEATS, compare
from demos.sweep import sweep
from demos.training import train_losses
from memory.config import ModelConfig, demo_default, slider_ranges
from memory.strategies import examples, parse_strategies
from reports import compare_figures, fits_and_loss_figures, sweep_figures, timeline_figures

OUT = Path(__file__).with_name("figure-corners.json")
FIGURE_LIMIT_S = 1.0  # a figure must build in well under a second


@dataclass
class Corner:
    page: str
    name: str
    config: ModelConfig
    run: Callable[[], Any]  # the engine call the page makes
    build: Callable[[Any], go.Figure]  # the figure the page draws from its result
    heavy_engine: bool = False  # skipped with --quick


def _timeline(result) -> go.Figure:
    frame = timeline_figures.timeline_frame({r.spec: r.timeline for r in result.results
                                             if r.fits and r.timeline})
    return timeline_figures.timeline_figure(frame)


def corners(kind: str) -> list[Corner]:
    ranges = slider_ranges(kind)
    top = {field: ranges[field][1] for field in ranges}
    default = demo_default(kind)
    # the figure-heaviest settings: deepest model, every strategy, smallest widths
    deep = ModelConfig(layers=int(top["layers"]), hidden=int(ranges["hidden"][0]), heads=1,
                       seq_len=int(ranges["seq_len"][0]), batch=1,
                       vocab=int(ranges["vocab"][0]))
    every = [*parse_strategies("none"), *examples(kind)]
    page_timeline = parse_strategies("none,every-layer,sqrt,selective:save-matmuls")
    for_fits = parse_strategies("none,every-layer,selective:save-matmuls")
    repeats = PAGE_REPEATS[kind]
    small = ModelConfig(layers=8, hidden=128, heads=4, seq_len=64, batch=2, vocab=1024)

    def fits_frame(cfg: ModelConfig, vary: str, budget: int) -> pd.DataFrame:
        rows = []
        for spec in for_fits:
            found = largest_fitting(cfg, spec, vary, budget, device=kind)
            rows.append({"strategy": spec.label, **vars(found)})
        return pd.DataFrame(rows)

    return [
        Corner("compare", "default", default,
               lambda: compare(default, for_fits[:2], device=kind, repeats=repeats),
               lambda r: compare_figures.peak_and_time_figure(r.results)),
        Corner("compare", f"layers={deep.layers}, every strategy", deep,
               lambda: compare(deep, every, device=kind, repeats=repeats),
               lambda r: compare_figures.peak_and_time_figure(r.results)),
        Corner("compare (breakdown)", f"layers={deep.layers}, every strategy", deep,
               lambda: compare(deep, every, device=kind, repeats=0),
               lambda r: compare_figures.breakdown_figure(r.results)),
        Corner("timeline", "default", default,
               lambda: compare(default, page_timeline, device=kind, timeline=True,
                               time_steps=False), _timeline),
        Corner("timeline", f"layers={deep.layers}, every strategy", deep,
               lambda: compare(deep, every, device=kind, timeline=True, time_steps=False),
               _timeline),
        Corner("timeline", f"?layers={deep.layers}, other sliders at default",
               default.replace(layers=deep.layers),
               lambda: compare(default.replace(layers=deep.layers), page_timeline,
                               device=kind, timeline=True, time_steps=False), _timeline,
               heavy_engine=True),
        Corner("curves", "depth sweep 2…32", small,
               lambda: sweep(small, "layers", [2, 4, 8, 16, 24, 32],
                             page_timeline[:3], device=kind, repeats=3),
               lambda f: sweep_figures.sweep_figure(f, "layers", "layers N",
                                                    theory="predicted_activation_bytes"),
               heavy_engine=True),
        Corner("curves", f"segment sweep at {deep.layers} layers",
               small.replace(layers=deep.layers),
               lambda: sweep(small.replace(layers=deep.layers), "k",
                             [1, 2, 4, 5, 8, 16, deep.layers], [], device=kind,
                             repeats=3),
               lambda f: sweep_figures.segment_figure(f, deep.layers), heavy_engine=True),
        Corner("what-fits", "grow batch, largest budget", deep,
               lambda: fits_frame(deep, "batch", 512 * 2**20),
               lambda f: fits_and_loss_figures.fits_figure(f, "batch", 512 * 2**20),
               heavy_engine=True),
        Corner("same-result", "100 steps", small,
               lambda: train_losses(small.replace(layers=4, hidden=64, seq_len=32, batch=8,
                                                  vocab=128, dropout=0.1),
                                    for_fits, 100),
               lambda f: fits_and_loss_figures.loss_figure(f), heavy_engine=True),
    ]


def measure(corner: Corner) -> dict[str, Any]:
    start = time.perf_counter()
    result = corner.run()
    engine = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    fig = corner.build(result)
    spec = fig.to_json()  # what st.plotly_chart sends
    build, build_cpu = time.perf_counter() - start, time.process_time() - cpu
    points = sum(len(trace.x) for trace in fig.data if getattr(trace, "x", None) is not None)
    return {"page": corner.page, "corner": corner.name, "config": corner.config.as_dict(),
            "engine_seconds": round(engine, 3), "figure_seconds": round(build, 3),
            "figure_cpu_seconds": round(build_cpu, 3),
            "traces": len(fig.data), "shapes": len(fig.layout.shapes), "points": points,
            "figure_bytes": len(spec)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="only the corners whose engine run is short")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    info = detect_device()
    # A server process pays Plotly's validators' first import once, not per figure.
    fits_and_loss_figures.loss_figure(
        pd.DataFrame({"step": [0], "strategy": ["none"], "loss": [1.0]})).to_json()
    rows = []
    print(f"{'page':22s} {'corner':52s} {'engine s':>9s} {'figure s':>9s} {'cpu s':>6s}"
          f" {'traces':>6s} {'points':>7s}")
    for corner in corners(info.kind):
        if args.quick and corner.heavy_engine:
            continue
        row = measure(corner)
        rows.append(row)
        print(f"{row['page']:22s} {row['corner']:52s} {row['engine_seconds']:9.2f} "
              f"{row['figure_seconds']:9.3f} {row['figure_cpu_seconds']:6.3f} "
              f"{row['traces']:6d} {row['points']:7d}",
              flush=True)
    # judged on this process's CPU time: on a shared machine the wall time also counts
    # other people's work
    slowest = max(row["figure_cpu_seconds"] for row in rows)
    args.out.write_text(json.dumps({
        "device": info.label(), "machine": platform.machine(), "python": platform.python_version(),
        "figure_limit_seconds": FIGURE_LIMIT_S, "slowest_figure_cpu_seconds": slowest,
        "quick": args.quick, "corners": rows}, indent=2) + "\n")
    print(f"slowest figure: {slowest:.3f} s of CPU (limit {FIGURE_LIMIT_S} s); wrote {args.out}")
    return 0 if slowest < FIGURE_LIMIT_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
