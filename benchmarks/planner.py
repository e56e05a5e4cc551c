"""Time the planner on the server: planner.recommend.plan() for each preset (its class's
terms shipped with the planner; cold: formula cache cleared; warm: cached), each preset's
first plan in a fresh process (imports included), a whole run of the /plan page script
under AppTest, and a plan for a pasted config.json measured on its transformers class
(Llama 3.1 70B, Qwen3-235B-A22B): the first time (nothing cached: the class measured under
fake tensors), seen before by an earlier process (its fits read from the data folder) and
by this one.

    .venv/bin/python -m benchmarks.planner      # writes benchmarks/planner.json

Targets: under 0.3 s of server time for /plan with a preset or a config seen before; a
config's first plan within 2 s. Wall time and CPU time are both written (CPU time does
not grow with other processes' load). What every measurement uses whatever the config
(transformers' model code, PEFT, fake tensors) is imported once per process before the
first config and timed apart: `import_planner_libraries`."""

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
from planner import preset_classes
from planner import recommend as recommend_module

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).with_name("planner.json")
TARGET_S = 0.3


def _median_seconds(fn, repeats: int, clock=time.perf_counter) -> float:
    """The median time of fn on `clock` (wall by default)."""
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def _median_cpu_seconds(fn, repeats: int) -> float:
    """The median CPU time of fn (it does not grow with other processes' load)."""
    return _median_seconds(fn, repeats, clock=time.process_time)


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


CLASS_CONFIGS = ("llama-3.1-70b", "qwen3-235b-a22b")
FRESH = """
import json, sys, time
wall, cpu = time.perf_counter(), time.process_time()
from memory import footprint as P
from memory.architectures import PRESETS
from planner import recommend
from planner.preset_classes import preset_source
recommend.plan(P.PlannerInputs(PRESETS[sys.argv[1]], source=preset_source(sys.argv[1]),
                               tuning="lora"))
print(json.dumps({"wall_s": round(time.perf_counter() - wall, 3),
                  "cpu_s": round(time.process_time() - cpu, 3),
                  "imported_torch": "torch" in sys.modules}))
"""


def fresh_process_seconds(preset: str) -> dict:
    """A preset's first plan in a new Python process, its imports included (the
    interpreter's own start-up apart)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", FRESH, preset], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def _timed(fn) -> dict:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return {"wall_s": round(time.perf_counter() - wall, 3),
            "cpu_s": round(time.process_time() - cpu, 3)}


def _config_text(name: str) -> str:
    """A family's config.json as the tests plan it (a preset's as shipped)."""
    from tests.demos.class_fixtures import path

    return path(name).read_text(encoding="utf-8")


def class_seconds(name: str) -> dict:
    """plan() for a config.json of tests/demos/hf_configs, measured on its class: first
    (an empty data folder), from disk (a new process's view: the in-process sources
    dropped), and again in this process. The import of torch and transformers is timed
    apart, once, before."""
    from planner import class_cache

    text = _config_text(name)

    def run() -> None:
        arch, source = class_cache.from_config_json(text)
        recommend_module.plan(P.PlannerInputs(arch, source=source, tuning="lora"))

    out: dict = {}
    with preset_classes.fresh_data_dir():
        out["first"] = _timed(run)
        class_cache._SOURCES.clear()
        out["seen_before_from_disk"] = _timed(run)
        out["seen_before_in_process"] = _timed(run)
    return out


def pasted_page_seconds(name: str) -> dict:
    """The whole /plan page (AppTest: plan, chart, table, the class's terms, code) for a
    pasted config.json with LoRA: the first time (its class measured) and again."""
    from streamlit.testing.v1 import AppTest

    out: dict = {}
    with preset_classes.fresh_data_dir():
        at = AppTest.from_file(str(ROOT / "pages/plan.py"), default_timeout=120)
        at.query_params["model"] = "config"
        at.query_params["tuning"] = "lora"
        at.run()  # the page asks for a config.json
        at.text_area(key="plan_config_json").set_value(_config_text(name))
        out["first"] = _timed(at.run)
        assert not at.exception and not at.error
        out["again"] = _timed(at.run)
    return out


def main() -> dict:
    results: dict = {"target_s": TARGET_S, "python": platform.python_version(),
                     "machine": platform.machine(), "presets": {}}
    for key, arch in PRESETS.items():
        inputs = P.PlannerInputs(arch, gpu_bytes=24 * hardware.GiB, tuning="lora",
                                 source=preset_classes.preset_source(key))
        formula = inputs.with_(source=None)  # the course's formula alone, as before
        results["presets"][key] = {
            "first_plan_fresh_process": fresh_process_seconds(key),
            "plan_cold_s": round(_median_seconds(lambda i=inputs: _cold_plan(i), 9), 5),
            "plan_warm_s": round(_median_seconds(lambda i=inputs: recommend_module.plan(i), 9), 5),
            "plan_warm_cpu_s": round(_median_cpu_seconds(
                lambda i=inputs: recommend_module.plan(i), 9), 5),
            "formula_plan_warm_cpu_s": round(_median_cpu_seconds(
                lambda i=formula: recommend_module.plan(i), 9), 5),
        }
    results["page_run_s"] = {
        key: round(page_seconds({"model": key}), 4) for key in ("llama-3.1-8b", "llama-3.1-70b")
    }
    results["import_torch_transformers"] = _timed(_import_libraries)
    # once per process, whatever the config: transformers' model code, PEFT, fake tensors
    results["import_planner_libraries"] = _timed(_load_planner_libraries)
    results["class_configs"] = {name: class_seconds(name) for name in CLASS_CONFIGS}
    results["pasted_page"] = {name: pasted_page_seconds(name) for name in CLASS_CONFIGS}
    worst = max(results["page_run_s"].values())
    results["meets_target"] = worst < TARGET_S
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    return results


def _import_libraries() -> None:
    import transformers  # noqa: F401

    from planner import class_memory  # noqa: F401


def _load_planner_libraries() -> None:
    from model_classes.causal_lm import load_libraries

    load_libraries()


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
