"""The planner against tiny real Hugging Face models (demos.real_models), per family,
attention kernel, precision and tuning: bytes one plain decoder layer keeps for backward,
measured ÷ predicted, with the planner as it is and with the planner of an earlier
revision (--before, read with `git show`: the formula before it knew what transformers
and PEFT keep).

    .venv/bin/python -m benchmarks.real_libraries [--before REV]   # writes real-libraries.json
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import types
from pathlib import Path

import torch

from demos.real_models import Setup, measure, predicted_layers, sdpa_fused
from model_classes.tiny import tiny_architecture

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).with_name("real-libraries.json")
BEFORE = "05b8120"  # the planner before it knew the libraries' terms
PRESETS = ("gpt2", "llama-3.1-8b", "qwen2.5-7b")


def old_planner(rev: str) -> types.ModuleType | None:
    """demos/planner.py as it was at `rev`, imported under another name."""
    for path in ("demos/planner.py", "memory/layer.py"):
        try:
            src = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True,
                                 capture_output=True, text=True).stdout
        except (subprocess.CalledProcessError, FileNotFoundError):
            continue
        module = types.ModuleType("planner_before")
        module.__dict__["__name__"] = "planner_before"
        sys.modules["planner_before"] = module
        exec(compile(src.replace("from demos.architectures", "from memory.architectures")
                     if not (ROOT / "demos" / "architectures.py").exists() else src,
                     f"{rev}:{path}", "exec"), module.__dict__)
        return module
    return None


def old_prediction(old: types.ModuleType, setup: Setup) -> int:
    """One plain middle layer as the earlier formula saw the setup: a fused GELU, the SDPA
    kernel (eager counted as the math kernel), LoRA as extra rank-r tensors."""
    arch, e = setup.arch.with_(act=""), 4 if setup.dtype == "fp32" else 2
    targets = old.LORA_TARGETS[setup.lora_targets] if setup.lora_rank else ()
    fused = setup.attention == "sdpa" and sdpa_fused(arch)
    return old.layer_bytes(old.layer_tensors(arch, setup.batch, setup.seq, e, fused=fused,
                                             device="cpu", lora_rank=setup.lora_rank,
                                             lora_targets=targets))


def step_peaks() -> list[dict]:
    from memory import footprint as P

    rows = []
    for preset in PRESETS:
        arch = tiny_architecture(preset)
        for dtype in ("fp32", "bf16"):
            for strategy, planned in (("none", "none"), ("every-layer", "every-layer")):
                for lora in (0, 16):
                    setup = Setup(arch, dtype=dtype, strategy=strategy, lora_rank=lora)
                    m = measure(setup, peak=True)
                    p = P.PlannerInputs(arch, seq=setup.seq, batch=setup.batch,
                                        precision=dtype, tuning="lora" if lora else "full",
                                        fused=sdpa_fused(arch), device="cpu")
                    bd = P.breakdown(p, planned)
                    pieces = (bd.gradients + bd.activations_kept + bd.activations_rebuilt
                              + bd.logits)
                    rows.append({"preset": preset, "dtype": dtype, "strategy": strategy,
                                 "tuning": f"lora r={lora}" if lora else "full",
                                 "measured_peak": m.peak, "planner_pieces": int(pieces),
                                 "outside_layers": m.outside,
                                 "ratio": round((m.peak or 0) / pieces, 3)})
    return rows


def planner_changes(old: types.ModuleType) -> list[dict]:
    from memory import footprint as P
    from memory.architectures import PRESETS as ALL

    rows = []
    gib = 2**30
    for key, arch in ALL.items():
        seq = 1024 if key == "gpt2" else 4096
        for tuning in ("full", "lora"):
            now = P.PlannerInputs(arch, seq=seq, batch=1, precision="bf16", tuning=tuning)
            then = old.PlannerInputs(arch, seq=seq, batch=1, precision="bf16", tuning=tuning)
            rows.append({
                "preset": key, "seq": seq, "tuning": tuning,
                "layer_gib_before": round(old.layer_bytes(then.tensors()) / gib, 3),
                "layer_gib_now": round(P.layer_bytes(now.tensors()) / gib, 3),
                "peak_none_gib_before": round(old.peak_bytes(then, "none") / gib, 2),
                "peak_none_gib_now": round(P.peak_bytes(now, "none") / gib, 2),
                "peak_every_gib_before": round(old.peak_bytes(then, "every-layer") / gib, 2),
                "peak_every_gib_now": round(P.peak_bytes(now, "every-layer") / gib, 2)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default=BEFORE)
    args = parser.parse_args()
    torch.set_num_threads(1)
    old = old_planner(args.before)
    rows = []
    for preset in PRESETS:
        arch = tiny_architecture(preset)
        for attention in ("sdpa", "eager"):
            for dtype in ("fp32", "bf16"):
                for lora in (0, 16):
                    setup = Setup(arch, dtype=dtype, attention=attention, lora_rank=lora)
                    m = measure(setup)
                    layer = m.per_layer[1]  # a middle layer (the first may keep less)
                    now = predicted_layers(setup, m.checkpointed)[1]
                    row = {"preset": preset, "attention": attention, "dtype": dtype,
                           "tuning": f"lora r={lora} all-linear" if lora else "full",
                           "measured_layer_bytes": layer, "predicted_layer_bytes": now,
                           "ratio_after": round(layer / now, 4)}
                    if old is not None:
                        before = old_prediction(old, setup)
                        row |= {"predicted_before": before,
                                "ratio_before": round(layer / before, 4)}
                    rows.append(row)
                    print(json.dumps(row))
    peaks = step_peaks()
    changes = planner_changes(old) if old is not None else []
    import peft
    import transformers

    OUT.write_text(json.dumps({
        "what": "bytes one plain decoder layer keeps for backward: measured on tiny random-init "
                "transformers models (4 layers, heads of 16, batch 2 x 32 tokens, CPU) "
                "÷ the planner's layer formula; before = the formula at " + args.before,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "peft": peft.__version__, "python": platform.python_version()},
        "rows": rows,
        "step_peaks": {
            "what": "the step's peak live bytes above the parameters (demos.tracker) ÷ the "
                    "planner's pieces added as if at once (gradients + activations kept + "
                    "the layer rebuilt + the loss peak); the planner leaves out what lies "
                    "outside the layers (embedding output, final norm) and the workspace "
                    "it adds on a GPU",
            "rows": peaks},
        "planner_changes": {
            "what": "the planner's figures at the presets' real sizes, batch 1, bf16, "
                    "before (" + args.before + ") and now: one plain layer's activations "
                    "and the step's peak without checkpointing (GiB)",
            "rows": changes}}, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
