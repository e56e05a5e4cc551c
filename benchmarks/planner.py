"""Time the planner on the server: planner.recommend.plan() for each preset (cold: formula cache
cleared; warm: cached), and a whole run of the /plan page script under AppTest.

    .venv/bin/python -m benchmarks.planner      # writes benchmarks/planner.json

Target: under 0.3 s of server time for /plan with a preset."""

from __future__ import annotations

import json
import platform
import statistics
import time
from pathlib import Path

from memory import footprint as P
from memory import hardware
from memory import layer as layer_model
from memory.architectures import PRESETS
from planner import recommend as recommend_module

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).with_name("planner.json")
TARGET_S = 0.3


def _median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _cold_plan(inputs: P.PlannerInputs) -> None:
    layer_model.layer_tensors.cache_clear()
    recommend_module.plan(inputs)


def page_seconds(query: dict[str, str], repeats: int = 5) -> float:
    """One full script run of pages/plan.py (widgets, plan, chart, table, code)."""
    from streamlit.testing.v1 import AppTest

    def run() -> None:
        at = AppTest.from_file(str(ROOT / "pages/plan.py"), default_timeout=60)
        for key, value in query.items():
            at.query_params[key] = value
        at.run()
        assert not at.exception

    run()  # imports and first-run costs once
    return _median_seconds(run, repeats)


def main() -> dict:
    results: dict = {"target_s": TARGET_S, "python": platform.python_version(),
                     "machine": platform.machine(), "presets": {}}
    for key, arch in PRESETS.items():
        inputs = P.PlannerInputs(arch, gpu_bytes=24 * hardware.GiB, tuning="lora")
        results["presets"][key] = {
            "plan_cold_s": round(_median_seconds(lambda i=inputs: _cold_plan(i), 9), 5),
            "plan_warm_s": round(_median_seconds(lambda i=inputs: recommend_module.plan(i), 9), 5),
        }
    results["page_run_s"] = {
        key: round(page_seconds({"model": key}), 4) for key in ("llama-3.1-8b", "llama-3.1-70b")
    }
    worst = max(results["page_run_s"].values())
    results["meets_target"] = worst < TARGET_S
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
