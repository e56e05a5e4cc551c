"""python -m demos bench: time/none and peak/none per strategy for a few configs, the
tracker's overhead, the default demo's latency and the prediction error. Writes
benchmarks/results-<device>.json and .md."""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from demos.device import detect_device
from demos.measure import PAGE_REPEATS, Step, compare, sync, warm_up
from demos.model import build_model, make_batch
from memory import theory, worked_examples
from memory.config import ModelConfig, demo_default
from memory.strategies import StrategySpec, examples, require_spec

ROOT = Path(__file__).resolve().parent.parent
MiB = 2**20
NONE, EVERY_LAYER, SQRT = StrategySpec("none"), StrategySpec("every-layer"), StrategySpec("sqrt")
SELECTIVE, OFFLOAD = StrategySpec("selective"), StrategySpec("offload")


def _configs(kind: str, quick: bool, arch: str = "gpt"
             ) -> list[tuple[str, ModelConfig, list[StrategySpec]]]:
    """The benchmark's configs, each with the layer of `arch` (memory.config.ARCHS)."""
    return [(name, cfg.replace(arch=arch), strategies)
            for name, cfg, strategies in _gpt_configs(kind, quick)]


def _gpt_configs(kind: str, quick: bool) -> list[tuple[str, ModelConfig, list[StrategySpec]]]:
    default = demo_default("cpu")
    out = [("default demo (CPU)", default, [NONE, *examples("cpu")])]
    if not quick:
        out += [
            ("default, batch 4", default.replace(batch=4), [NONE, EVERY_LAYER, SQRT, SELECTIVE]),
            ("deep, small vocabulary", ModelConfig(layers=16, hidden=256, heads=4, seq_len=512,
                                                   batch=2, vocab=1000),
             [NONE, EVERY_LAYER, StrategySpec("every-k", k=2), SQRT]),
            ("bfloat16", default.replace(layers=4, dtype="bfloat16"),
             [NONE, EVERY_LAYER, SELECTIVE]),
            ("dropout 0.1", default.replace(layers=4, dropout=0.1), [NONE, EVERY_LAYER]),
        ]
    if kind == "cuda":
        gpu = demo_default("cuda")
        out += [
            ("default demo (GPU)", gpu, [NONE, *examples("cuda")]),
            ("seed 2B-class layer shape", ModelConfig(layers=4, hidden=2048, heads=16,
                                                      seq_len=1024, batch=2, vocab=32000,
                                                      dtype="bfloat16"),
             [NONE, EVERY_LAYER, SELECTIVE, OFFLOAD]),
        ]
    return out


def tracker_overhead(cfg: ModelConfig, spec: StrategySpec, repeats: int) -> dict:
    """Median step time with and without the live tracker, interleaved."""
    spec = require_spec(spec)
    warm_up()
    kind = detect_device("auto").kind
    model = build_model(cfg, kind)
    idx, tgt = make_batch(cfg, 0, kind)
    step = Step(cfg, model, idx, tgt, model.head.weight.device)
    plan = theory.plan_for(cfg, spec, kind)
    step.timed(spec, plan)
    plain, tracked = [], []
    for _ in range(repeats):
        plain.append(step.timed(spec, plan))
        start = time.perf_counter()
        tracker, _, _ = step.tracked(spec, plan, timeline=False)
        sync(step.dev)
        tracked.append(time.perf_counter() - start)
        tracker.close()
    p, t = statistics.median(plain), statistics.median(tracked)
    return {"strategy": spec.label, "plain_seconds": p, "tracked_seconds": t,
            "overhead": t / p - 1, "plain_runs": plain, "tracked_runs": tracked}


def default_latency(repeats: int = 3) -> dict:
    """Wall time of the default demo: none and every-layer, tracker and timing included."""
    kind = detect_device("auto").kind
    cfg = demo_default(kind)
    walls = []
    for _ in range(repeats):
        start = time.perf_counter()
        compare(cfg, [NONE, EVERY_LAYER], repeats=PAGE_REPEATS[kind])
        walls.append(time.perf_counter() - start)
    return {"config": cfg.as_dict(), "strategies": ["none", "every-layer"],
            "timed_repeats": PAGE_REPEATS[kind], "seconds_runs": walls,
            "seconds_median": statistics.median(walls)}


def machine_speed(repeats: int = 3) -> dict:
    """How fast this machine runs the default demo's two parts right now (medians of
    `repeats`): its memory part (the tracked step, no timing) and its timed part (the
    timed steps, the plain reference step among them). A benchmark taken on a busy
    machine reads against these: every page figure slows by about as much."""
    kind = detect_device("auto").kind
    cfg = demo_default(kind)
    parts: dict[str, list[float]] = {"memory_part_s": [], "timed_part_s": []}
    for _ in range(repeats + 1):  # the first round warms the process and is not counted
        start = time.perf_counter()
        compare(cfg, [NONE, EVERY_LAYER], time_steps=False, check_gradients=False)
        memory = time.perf_counter() - start
        start = time.perf_counter()
        compare(cfg, [NONE, EVERY_LAYER], repeats=PAGE_REPEATS[kind], memory=False)
        parts["memory_part_s"].append(memory)
        parts["timed_part_s"].append(time.perf_counter() - start)
    return {key: round(statistics.median(runs[1:]), 3) for key, runs in parts.items()}


def run_bench(out: str | None = None, device: str = "auto", quick: bool = False,
              arch: str = "gpt") -> list[Path]:
    info = detect_device(device)
    warm_up()
    repeats = 3 if quick else 5
    load_before = os.getloadavg()
    started = time.perf_counter()
    sections = []
    for name, cfg, strategies in _configs(info.kind, quick, arch):
        comp = compare(cfg, strategies, device=device, repeats=repeats)
        frame = comp.to_frame()
        rows = json.loads(frame.drop(columns=["error"]).to_json(orient="records"))
        for row, r in zip(rows, comp.results, strict=True):
            row["error"], row["plan"] = r.error, r.plan
            row["step_seconds_runs"] = r.step_seconds_runs
        section = {"name": name, "config": cfg.as_dict(), "parameter_bytes": comp.parameter_bytes,
                   "results": rows}
        if cfg.hidden == 2048:
            section["seed_comparison"] = _seed_comparison(cfg, comp, info.kind)
        sections.append(section)
    overhead = [tracker_overhead(demo_default("cpu") if info.kind == "cpu"
                                 else demo_default("cuda"), s, repeats)
                for s in (NONE, EVERY_LAYER)]
    latency = default_latency()
    errors = _prediction_errors(sections)
    data = {
        "device": info.as_dict(), "device_label": info.label(), "quick": quick,
        "repeats": repeats, "load_average_before": load_before,
        "load_average_after": os.getloadavg(), "seconds": time.perf_counter() - started,
        "configs": sections, "tracker_overhead": overhead, "default_latency": latency,
        "prediction_error": errors,
    }
    name = f"results-{info.kind}.json" if arch == "gpt" else f"results-{info.kind}-{arch}.json"
    json_path = Path(out) if out else ROOT / "benchmarks" / name
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(data, indent=1))
    md_path = json_path.with_suffix(".md")
    md_path.write_text(to_markdown(data))
    return [json_path, md_path]


def _seed_comparison(cfg: ModelConfig, comp, kind: str) -> dict:
    """Bytes per layer measured (none minus every-layer, per layer, plus the input)
    against the seed's 34·b·s·h (16-bit, with 1-byte dropout masks)."""
    try:
        none, every = comp.result("none"), comp.result("every-layer")
    except KeyError:
        return {}
    if none.activation_bytes is None or every.activation_bytes is None:
        return {}
    sbh = cfg.batch * cfg.seq_len * cfg.hidden
    per_layer = (none.activation_bytes - every.activation_bytes) / cfg.layers + sbh * 2
    return {"measured_bytes_per_layer": per_layer,
            "predicted_bytes_per_layer": theory.predicted_block_bytes(cfg, kind),
            "korthikanti_34sbh": worked_examples.korthikanti_layer_bytes(cfg.batch, cfg.seq_len,
                                                                cfg.hidden, cfg.heads),
            "measured_over_sbh": per_layer / sbh}


def _prediction_errors(sections: list[dict]) -> dict:
    act, peak = [], []
    for s in sections:
        for r in s["results"]:
            if r.get("activation_bytes") and r.get("predicted_activation_bytes"):
                act.append(abs(r["activation_bytes"] / r["predicted_activation_bytes"] - 1))
            if r.get("peak_bytes") and r.get("predicted_peak_bytes"):
                peak.append(abs(r["peak_bytes"] / r["predicted_peak_bytes"] - 1))
    return {"activation_max_rel": max(act, default=None), "peak_max_rel": max(peak, default=None),
            "peak_median_rel": statistics.median(peak) if peak else None, "results": len(act)}


def _f(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def to_markdown(data: dict) -> str:
    method = ("the CUDA allocator" if data["device"]["kind"] == "cuda"
              else "the live-tensor tracker")
    lines = [f"# Benchmark: {data['device_label']}", "",
             f"torch {data['device']['torch_version']}; median of {data['repeats']} timed runs "
             f"per strategy, interleaved, no tracker attached; memory by "
             f"{method} (peak above the parameters, gradients included). "
             f"Load average before/after: "
             f"{data['load_average_before'][0]:.1f}/{data['load_average_after'][0]:.1f} "
             f"(a shared machine: times vary run to run).", ""]
    for s in data["configs"]:
        c = s["config"]
        lines += [f"## {s['name']}: L{c['layers']} h{c['hidden']} a{c['heads']} s{c['seq_len']} "
                  f"b{c['batch']} V{c['vocab']} {c['dtype']} dropout {c['dropout']}", "",
                  "| strategy | peak MiB | peak/none | predicted peak | held MiB | "
                  "predicted held | err | step s | time/none | fastest/fastest | max grad diff |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        base = next((r for r in s["results"] if r["strategy"] == "none" and r["fits"]), None)
        for r in s["results"]:
            if not r["fits"]:
                lines.append(f"| {r['strategy']} | does not fit: {r['error']} |"
                             + " |" * 9)
                continue
            fastest = (min(r["step_seconds_runs"]) / min(base["step_seconds_runs"])
                       if base and r["step_seconds_runs"] and base["step_seconds_runs"] else None)
            lines.append(
                f"| {r['strategy']} | {r['peak_bytes'] / MiB:.1f} | {_f(r['peak_vs_none'], '.2f')} "
                f"| {r['predicted_peak_bytes'] / MiB:.1f} "
                f"| {r['activation_bytes'] / MiB:.2f} | {r['predicted_activation_bytes'] / MiB:.2f}"
                f" | {_f(r['activation_error'], '+.2%')} | {_f(r['step_seconds'], '.3f')} | "
                f"{_f(r['time_vs_none'], '.2f')} | {_f(fastest, '.2f')} | "
                f"{_f(r['max_grad_diff'], '.1e')}"
                f"{' (bitwise equal)' if r['bitwise_equal'] else ''} |")
        if s.get("seed_comparison"):
            sc = s["seed_comparison"]
            lines += ["", f"Per layer: measured {sc['measured_bytes_per_layer'] / MiB:.1f} MiB "
                          f"({sc['measured_over_sbh']:.1f}·b·s·h), this model's prediction "
                          f"{sc['predicted_bytes_per_layer'] / MiB:.1f} MiB, the seed's 34·b·s·h "
                          f"{sc['korthikanti_34sbh'] / MiB:.1f} MiB."]
        lines.append("")
    lines += ["## Tracker overhead (default demo config)", "",
              "| strategy | plain s | tracked s | overhead |", "|---|---:|---:|---:|"]
    for o in data["tracker_overhead"]:
        lines.append(f"| {o['strategy']} | {o['plain_seconds']:.3f} | {o['tracked_seconds']:.3f} "
                     f"| {o['overhead']:+.1%} |")
    lat = data["default_latency"]
    err = data["prediction_error"]
    lines += ["", f"Default demo latency (none + every-layer, one tracked run and "
                  f"{lat['timed_repeats']} timed run each): median {lat['seconds_median']:.2f} s "
                  f"(runs: {', '.join(f'{x:.2f}' for x in lat['seconds_runs'])}).", "",
              f"Prediction error over {err['results']} measured results: held bytes at most "
              f"{_f(err['activation_max_rel'], '.3%')}, peak at most "
              f"{_f(err['peak_max_rel'], '.2%')} (median {_f(err['peak_median_rel'], '.2%')}).",
              ""]
    return "\n".join(lines)
