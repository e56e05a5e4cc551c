"""Sweep the compiler's activation memory budget on the lab's model (GPT and Llama
layers, the /compiler-budget page's default size) beside the manual strategies, and record
what was measured: bytes saved for backward, counted FLOPs, step time, compile time.

    .venv/bin/python -m benchmarks.compiler_budget     # writes benchmarks/compiler-budget.json

`torch._functorch.config.activation_memory_budget` is a private setting of PyTorch; the
figures hold for the torch version recorded in the file."""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from demos.compiler_budget import BASE, BUDGETS, sweep_budget, to_frame
from memory.config import ARCHS

OUT = Path(__file__).with_name("compiler-budget.json")
TABLE = ["strategy", "saved_bytes", "flops", "recomputed_flops", "step_seconds",
         "compile_seconds", "max_grad_diff"]


def run(archs: tuple[str, ...] = ARCHS, repeats: int = 5, out: Path = OUT) -> dict:
    import pandas as pd

    torch.set_num_threads(1)  # a shared 2-core machine: one thread, steadier times
    report = {"torch": torch.__version__, "python": platform.python_version(),
              "machine": platform.machine(), "threads": torch.get_num_threads(),
              "date": time.strftime("%Y-%m-%d"), "budgets": list(BUDGETS),
              "repeats": repeats, "results": {}}
    for arch in archs:
        cfg = BASE.replace(arch=arch)
        start = time.perf_counter()
        frame = to_frame(sweep_budget(cfg, repeats=repeats))
        seconds = time.perf_counter() - start
        report["results"][arch] = {"config": cfg.as_dict(), "seconds": round(seconds, 1),
                                   "points": json.loads(frame.to_json(orient="records"))}
        print(f"\n# {arch}: {cfg.as_dict()} ({seconds:.0f} s)")
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print(frame[TABLE].to_string(index=False))
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=ARCHS, action="append",
                        help="one architecture (repeatable); default: all")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    run(tuple(args.arch or ARCHS), args.repeats, args.out)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
