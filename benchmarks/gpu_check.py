"""The GPU checks that `python -m demos bench` does not make, and the helpers
benchmarks/gpu_check.sh needs. Uses only the engine's public functions
(demos.measure.compare, memory.theory, demos.device.DeviceQueue).
See docs/GPU_CHECK.md.

    python benchmarks/gpu_check.py wheels                 # name==version to carry to the GPU
    python benchmarks/gpu_check.py env                    # versions; exit 1 if an import fails
    python benchmarks/gpu_check.py stub-playwright DIR    # an import stand-in, no browser tests
    python benchmarks/gpu_check.py verify-bench results-cuda.json
    python benchmarks/gpu_check.py dtypes | layer-shape | faults   [--out DIR]

Each check prints its figures, merges them into DIR/results-cuda-checks.json (DIR: $OUT, else
benchmarks/; results-cpu-checks.* without CUDA) and rewrites the .md beside it, so what
finished survives a timeout. Exit status 1 when a check fails. On a machine without CUDA,
`faults` runs its CPU part (the limit guard and the queue); the other checks need CUDA.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make demos/ importable
    sys.path.insert(0, str(ROOT))

from benchmarks.gpu_environment import (  # noqa: E402 - after the path set-up above
    carried_packages,
    environment,
    write_playwright_stub,
)

HELD_TOLERANCE = 0.01  # held bytes vs the prediction: within 1%
PEAK_WARN = 0.05  # allocator peak vs the prediction: workspaces and rounding, reported

# --- checking measured rows ----------------------------------------------------------------
def _rel(measured, predicted) -> float | None:
    if measured is None or not predicted:
        return None
    return measured / predicted - 1


def row_problems(row: dict, none_held: int | None = None) -> list[str]:
    """What is wrong with one measured result (a StrategyResult as a dict, or a row of the
    bench's JSON): held bytes off the prediction by more than 1%. Offload predicts 0 on the
    GPU: there the bytes left must be under 1% of what `none` holds."""
    if not row.get("fits"):
        return []
    held, predicted = row.get("activation_bytes"), row.get("predicted_activation_bytes")
    name = row.get("strategy")
    if held is None:
        return [f"{name}: fits but nothing was measured"]
    if predicted == 0:
        if none_held and held > HELD_TOLERANCE * none_held:
            return [f"{name}: {held} bytes stayed on the device, predicted 0"]
        return []
    err = _rel(held, predicted)
    if err is not None and abs(err) > HELD_TOLERANCE:
        return [f"{name}: held {held} bytes, predicted {predicted} ({err:+.2%})"]
    return []


def summarize_rows(rows: list[dict]) -> dict:
    """Per strategy: held and peak against the prediction, time and peak against none."""
    base = next((r for r in rows if r.get("strategy") == "none" and r.get("fits")), None)
    none_held = base.get("activation_bytes") if base else None
    out, problems, warnings = [], [], []
    for r in rows:
        entry = {"strategy": r.get("strategy"), "fits": r.get("fits"), "error": r.get("error")}
        if r.get("fits"):
            entry.update(
                held_bytes=r.get("activation_bytes"),
                predicted_held_bytes=r.get("predicted_activation_bytes"),
                held_error=_rel(r.get("activation_bytes"), r.get("predicted_activation_bytes")),
                peak_bytes=r.get("peak_bytes"), predicted_peak_bytes=r.get("predicted_peak_bytes"),
                peak_error=_rel(r.get("peak_bytes"), r.get("predicted_peak_bytes")),
                step_seconds=r.get("step_seconds"),
                time_vs_none=(r["step_seconds"] / base["step_seconds"]
                              if base and base.get("step_seconds") and r.get("step_seconds")
                              else None),
                peak_vs_none=(r["peak_bytes"] / base["peak_bytes"]
                              if base and base.get("peak_bytes") and r.get("peak_bytes")
                              else None),
                max_grad_diff=r.get("max_grad_diff"), measured_by=r.get("measured_by"))
            if entry["peak_error"] is not None and abs(entry["peak_error"]) > PEAK_WARN:
                warnings.append(f"{r.get('strategy')}: allocator peak {entry['peak_error']:+.1%} "
                                f"off the prediction")
        problems += row_problems(r, none_held)
        out.append(entry)
    return {"rows": out, "problems": problems, "warnings": warnings}


def verify_bench(path: Path) -> dict:
    """The bench's results against the criteria (docs/GPU_CHECK.md), config by config."""
    data = json.loads(Path(path).read_text())
    configs = []
    for section in data["configs"]:
        summary = summarize_rows(section["results"])
        configs.append({"name": section["name"], "config": section["config"], **summary,
                        "seed_comparison": section.get("seed_comparison")})
    return {"device": data.get("device_label"), "configs": configs,
            "problems": [f"{c['name']}: {p}" for c in configs for p in c["problems"]],
            "warnings": [f"{c['name']}: {w}" for c in configs for w in c["warnings"]]}


# --- the measuring checks -------------------------------------------------------------------
def _kind() -> str:
    from demos.device import detect_device

    return detect_device("auto").kind


def dtypes_and_offload(repeats: int = 7) -> dict:
    """The GPU demo's default model in float32 and bfloat16: none, every-layer, selective and
    offload, timed interleaved (median of `repeats`)."""
    from demos.measure import compare
    from memory.config import demo_default

    out = {"problems": [], "warnings": [], "dtypes": {}}
    for dtype in ("float32", "bfloat16"):
        cfg = demo_default("cuda").replace(dtype=dtype)
        comp = compare(cfg, _specs("none,every-layer,selective,offload"), device="cuda",
                       repeats=repeats)
        summary = summarize_rows([r.as_dict() for r in comp.results])
        out["dtypes"][dtype] = {"config": cfg.as_dict(), "device": comp.device.label(),
                                "parameter_bytes": comp.parameter_bytes, **summary}
        out["problems"] += [f"{dtype}: {p}" for p in summary["problems"]]
        out["warnings"] += [f"{dtype}: {w}" for w in summary["warnings"]]
        out["problems"] += [f"{dtype}: {r.strategy} did not fit: {r.error}"
                            for r in comp.results if not r.fits]
    return out


SEED_SHAPE = {"hidden": 2048, "heads": 16, "seq_len": 1024, "batch": 2, "vocab": 32000,
              "dtype": "bfloat16"}


def layer_shape(base=None, layers: tuple[int, int] = (2, 4)) -> dict:
    """Bytes one layer holds, measured two ways: (held by none at `layers[1]` minus at
    `layers[0]`) per extra layer, and (none minus every-layer) per layer plus the input
    each checkpoint keeps; against 34·b·s·h and this model's own formula."""
    from demos.measure import compare
    from memory import theory, worked_examples
    from memory.config import ModelConfig

    kind = _kind()
    base = base or ModelConfig(layers=layers[1], **SEED_SHAPE)
    few, many = (compare(base.replace(layers=n), _specs("none,every-layer"), repeats=0)
                 for n in layers)
    for comp in (few, many):
        bad = [f"{r.strategy}: {r.error}" for r in comp.results if not r.fits]
        if bad:
            return {"config": base.as_dict(), "problems": bad, "warnings": []}
    b, s, h = base.batch, base.seq_len, base.hidden
    sbh = b * s * h
    by_depth = ((many.result("none").activation_bytes - few.result("none").activation_bytes)
                / (layers[1] - layers[0]))
    none, every = many.result("none"), many.result("every-layer")
    by_checkpoint = ((none.activation_bytes - every.activation_bytes) / layers[1]
                     + sbh * base.dtype_bytes)
    predicted = theory.predicted_block_bytes(base.replace(layers=layers[1]), kind)
    k34 = worked_examples.korthikanti_layer_bytes(b, s, h, base.heads)
    problems = [f"{how}: {value:.0f} bytes per layer, predicted {predicted} "
                f"({value / predicted - 1:+.2%})"
                for how, value in (("by depth", by_depth), ("by checkpointing", by_checkpoint))
                if abs(value / predicted - 1) > HELD_TOLERANCE]
    return {"config": base.replace(layers=layers[1]).as_dict(), "device": many.device.label(),
            "layers_compared": list(layers), "measured_per_layer_by_depth": by_depth,
            "measured_per_layer_by_checkpoint": by_checkpoint, "predicted_per_layer": predicted,
            "korthikanti_34sbh": k34, "measured_over_sbh": by_depth / sbh,
            "measured_over_34sbh": by_depth / k34,
            "explanation": theory.explain_differences(base, kind),
            "problems": problems, "warnings": []}


def _allocated() -> int | None:
    import torch

    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    return torch.cuda.memory_allocated()


def limit_fault(small=None) -> dict:
    """A config over the limit is refused as 'does not fit' (no exception), device memory is
    back at its baseline, and the next run works. Any device."""
    from demos.measure import compare
    from memory.config import ModelConfig

    small = small or ModelConfig(layers=2, hidden=64, heads=2, seq_len=32, batch=1, vocab=256)
    before = _allocated()
    refused = compare(small, _specs("none,every-layer"), repeats=0, limit_bytes=64 * 2**10).results
    after = _allocated()
    again = compare(small, _specs("none"), repeats=1).results[0]
    problems = [f"{r.strategy} ran under a 64 KiB limit" for r in refused if r.fits]
    problems += [f"{r.strategy}: no reason given" for r in refused if not r.error]
    if before != after:
        problems.append(f"allocated {before} bytes before, {after} after the refusal")
    if not again.fits:
        problems.append(f"the next run failed: {again.error}")
    return {"refused": [{"strategy": r.strategy, "fits": r.fits, "error": r.error}
                        for r in refused],
            "allocated_before": before, "allocated_after": after,
            "next_run_fits": again.fits, "problems": problems}


def oom_fault(headroom: int = 2 * 2**30) -> dict:
    """CUDA only: a real out-of-memory, in the middle of a step and while building the
    model, each comes back as 'does not fit'; memory returns to its baseline; the next run
    works. The allocator is capped at `headroom` above what is allocated (the same
    torch.OutOfMemoryError as a full card, without filling 141 GB first)."""
    import torch

    from demos.measure import compare
    from memory.config import ModelConfig, demo_default

    mid_step = demo_default("cuda").replace(batch=64)  # logits alone: 4 GiB
    huge = ModelConfig(layers=96, hidden=8192, heads=64, seq_len=4096, batch=64, vocab=262144)
    small = ModelConfig(layers=2, hidden=128, heads=2, seq_len=64, batch=1, vocab=1024)
    out = {"problems": [], "cases": []}
    total = torch.cuda.get_device_properties(0).total_memory
    # First a run that fits: cuBLAS keeps its workspace, allocated at the first matmul.
    compare(small, _specs("none"), device="cuda", repeats=1)
    for name, cfg in (("out of memory mid-step", mid_step), ("model too large", huge)):
        before = _allocated()
        torch.cuda.set_per_process_memory_fraction(min(1.0, (before + headroom) / total))
        try:
            result = compare(cfg, _specs("none"), device="cuda", time_steps=False,
                             limit_bytes=10**16).results[0]
        finally:
            torch.cuda.set_per_process_memory_fraction(1.0)
        after = _allocated()
        case = {"case": name, "config": cfg.as_dict(), "fits": result.fits,
                "error": result.error, "allocated_before": before, "allocated_after": after}
        out["cases"].append(case)
        if result.fits or "does not fit" not in (result.error or ""):
            out["problems"].append(f"{name}: expected 'does not fit', got {result.error!r}")
        if after != before:
            out["problems"].append(f"{name}: allocated {before} bytes before, {after} after")
    again = compare(small, _specs("none,every-layer"), device="cuda", repeats=1)
    out["next_run_fits"] = all(r.fits for r in again.results)
    if not out["next_run_fits"]:
        out["problems"].append("the next run after the faults did not fit")
    return out


def take_turns(cfg=None, runs: int = 2) -> dict:
    """`runs` compares asked for at once from threads, through one DeviceQueue, as the demo
    pages do: they must run one after the other, in arrival order, and each must fit."""
    from demos.device import DeviceQueue
    from demos.measure import compare
    from memory.config import ModelConfig

    cfg = cfg or ModelConfig(layers=2, hidden=128, heads=2, seq_len=64, batch=1, vocab=1024)
    queue = DeviceQueue(poll_seconds=0.01)
    spans: dict[int, tuple[float, float]] = {}
    waited: dict[int, list[int]] = {}
    fits: dict[int, bool] = {}
    errors: list[str] = []

    def worker(n: int) -> None:
        try:
            with queue.turn(on_wait=lambda ahead: waited.setdefault(n, []).append(ahead)):
                deadline = time.perf_counter() + 10
                while n == 0 and queue.waiting() < runs and time.perf_counter() < deadline:
                    time.sleep(0.005)  # the first run starts once every run has asked
                start = time.perf_counter()
                comp = compare(cfg, _specs("none,every-layer"), repeats=1)
                spans[n] = (start, time.perf_counter())
                fits[n] = all(r.fits for r in comp.results)
        except Exception as exc:  # noqa: BLE001 - reported as a problem
            errors.append(f"run {n}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(runs)]
    for t in threads:
        t.start()
        time.sleep(0.02)  # arrive in order
    for t in threads:
        t.join(120)
    order = sorted(spans, key=lambda n: spans[n][0])
    overlaps = [(a, b) for a, b in zip(order, order[1:], strict=False)
                if spans[b][0] < spans[a][1]]
    problems = list(errors)
    if overlaps:
        problems.append(f"runs overlapped: {overlaps}")
    if order != list(range(runs)):
        problems.append(f"ran in order {order}, asked in order {list(range(runs))}")
    if not all(fits.get(n) for n in range(runs)):
        problems.append(f"not every run fitted: {fits}")
    if runs > 1 and not any(waited.values()):
        problems.append("no run was told to wait")
    return {"order": order,
            "waited": {str(k): {"first_ahead": v[0], "notices": len(v)} for k, v in waited.items()},
            "seconds": {str(k): v[1] - v[0] for k, v in spans.items()}, "problems": problems}


def faults() -> dict:
    out = {"device": _kind(), "limit": limit_fault(), "turns": take_turns()}
    if out["device"] == "cuda":
        out["oom"] = oom_fault()
    out["problems"] = [p for key in ("limit", "turns", "oom") if key in out
                       for p in out[key]["problems"]]
    return out


# --- output ---------------------------------------------------------------------------------
def _specs(text: str) -> list:
    """The strategies a check names ("none,every-layer"), parsed where this script names
    them (the engine takes records: memory.strategies.StrategySpec)."""
    from memory.strategies import parse_strategies

    return parse_strategies(text)


# The figures are written by i18n.units (Babel, in English: "1,234.5"), imported here and
# not at the top: the wheels, stub-playwright and env commands import nothing of the app
# (env is the one that reports a missing import, Babel among the carried wheels).
def _mib(x) -> str:
    from i18n.units import MIB, number

    return "-" if x is None else number(x / MIB, 1)


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.2%}"


def _ratio(x) -> str:
    from i18n.units import number

    return "-" if x is None else number(x, 2, grouping=False)


def rows_markdown(rows: list[dict]) -> list[str]:
    lines = ["| strategy | held MiB | predicted | err | peak MiB | predicted | err | "
             "peak/none | time/none | step s |", "|---|" + "---:|" * 9]
    for r in rows:
        if not r["fits"]:
            lines.append(f"| {r['strategy']} | does not fit: {r['error']} |" + " |" * 8)
            continue
        lines.append(f"| {r['strategy']} | {_mib(r['held_bytes'])} "
                     f"| {_mib(r['predicted_held_bytes'])} | {_pct(r['held_error'])} "
                     f"| {_mib(r['peak_bytes'])} | {_mib(r['predicted_peak_bytes'])} "
                     f"| {_pct(r['peak_error'])} | {_ratio(r['peak_vs_none'])} "
                     f"| {_ratio(r['time_vs_none'])} | {_f3(r['step_seconds'])} |")
    return lines


def _f3(x) -> str:
    from i18n.units import number

    return "-" if x is None else number(x, 3, grouping=False)


def to_markdown(data: dict) -> str:
    lines = ["# GPU checks: what `python -m demos bench` does not cover", ""]
    if "environment" in data:
        lines += [f"Device: {data['environment']}", ""]
    if "bench" in data:
        lines += ["## `python -m demos bench` against the criteria", ""]
        for c in data["bench"]["configs"]:
            lines += [f"### {c['name']}", ""] + rows_markdown(c["rows"]) + [""]
    if "dtypes" in data:
        lines += ["## float32 and bfloat16, with offload (the GPU demo's default model)", ""]
        for dtype, d in data["dtypes"]["dtypes"].items():
            c = d["config"]
            lines += [f"### {dtype}: L{c['layers']} h{c['hidden']} a{c['heads']} "
                      f"s{c['seq_len']} b{c['batch']} V{c['vocab']}", ""]
            lines += rows_markdown(d["rows"]) + [""]
    if "layer_shape" in data and "predicted_per_layer" in data["layer_shape"]:
        ls = data["layer_shape"]
        c = ls["config"]
        lines += [f"## The seed's 2B-class layer: h{c['hidden']} a{c['heads']} s{c['seq_len']} "
                  f"b{c['batch']} {c['dtype']}", "",
                  f"Per layer: measured {_mib(ls['measured_per_layer_by_depth'])} MiB by depth "
                  f"({_ratio(ls['measured_over_sbh'])}·b·s·h), "
                  f"{_mib(ls['measured_per_layer_by_checkpoint'])} MiB by checkpointing; "
                  f"this model's formula {_mib(ls['predicted_per_layer'])} MiB; "
                  f"34·b·s·h {_mib(ls['korthikanti_34sbh'])} MiB "
                  f"(measured / 34·b·s·h = {_f3(ls['measured_over_34sbh'])}).", "",
                  ls["explanation"], ""]
    if "faults" in data:
        f = data["faults"]
        lines += ["## Faults", "",
                  f"- Over the limit: {', '.join(r['strategy'] for r in f['limit']['refused'])} "
                  f"refused ({f['limit']['refused'][0]['error']}); allocated before/after "
                  f"{f['limit']['allocated_before']}/{f['limit']['allocated_after']}; next run "
                  f"fits: {f['limit']['next_run_fits']}.",
                  f"- Two runs at once: ran in order {f['turns']['order']}, waits reported "
                  f"{f['turns']['waited']}."]
        for case in f.get("oom", {}).get("cases", []):
            lines.append(f"- {case['case']}: fits={case['fits']} ({case['error']}); allocated "
                         f"before/after {case['allocated_before']}/{case['allocated_after']}.")
        lines.append("")
    problems = [f"{k}: {p}" for k, v in data.items() if isinstance(v, dict)
                for p in v.get("problems", [])]
    warnings = [f"{k}: {w}" for k, v in data.items() if isinstance(v, dict)
                for w in v.get("warnings", [])]
    lines += ["## Verdict", ""] + ([f"- PROBLEM {p}" for p in problems] or ["- no problems"])
    lines += [f"- note {w}" for w in warnings] + [""]
    return "\n".join(lines)


def record(out_dir: Path, key: str, value: dict) -> Path:
    """Merge one check's figures into results-<device>-checks.json and rewrite the .md."""
    import torch

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"results-{_kind()}-checks.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    if "environment" not in data:
        name = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA"
        data["environment"] = f"{name}; torch {torch.__version__}; Python {sys.version.split()[0]}"
    data[key] = value
    path.write_text(json.dumps(data, indent=1, default=str))
    path.with_suffix(".md").write_text(to_markdown(data))
    return path


def _print(value: dict) -> None:
    print(json.dumps({k: v for k, v in value.items() if k not in ("rows", "configs")},
                     indent=1, default=str)[:6000])
    for p in value.get("problems", []):
        print(f"PROBLEM: {p}")
    for w in value.get("warnings", []):
        print(f"note: {w}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/gpu_check.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("wheels")
    sub.add_parser("env")
    p = sub.add_parser("stub-playwright")
    p.add_argument("folder", type=Path)
    p = sub.add_parser("verify-bench")
    p.add_argument("path", type=Path)
    for name in ("dtypes", "layer-shape", "faults"):
        sub.add_parser(name)
    parser.add_argument("--out", type=Path,
                        default=Path(os.environ.get("OUT") or ROOT / "benchmarks"))
    args = parser.parse_args(argv)
    if args.command == "wheels":
        print("\n".join(carried_packages([ROOT / "requirements.txt",
                                          ROOT / "requirements-dev.txt"])))
        return 0
    if args.command == "stub-playwright":
        print(write_playwright_stub(args.folder))
        return 0
    if args.command == "env":
        return 1 if environment() else 0
    import torch

    if args.command in ("dtypes", "layer-shape") and not torch.cuda.is_available():
        print(f"skipped: no CUDA ({args.command} measures on a GPU)")
        return 0
    if args.command == "verify-bench" and not args.path.exists():
        print(f"{args.path} is missing: the bench did not finish")
        return 1
    value = {"verify-bench": lambda: verify_bench(args.path), "dtypes": dtypes_and_offload,
             "layer-shape": layer_shape, "faults": faults}[args.command]()
    key = args.command.replace("-", "_").replace("verify_bench", "bench")
    path = record(args.out, key, value)
    _print(value)
    print(f"written: {path} and {path.with_suffix('.md').name}")
    return 1 if value.get("problems") else 0


if __name__ == "__main__":
    sys.exit(main())
