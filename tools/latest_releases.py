"""The newest releases, checked on demand (`make test-latest`): the tests whose outcome
rests on what torch, transformers, peft, accelerate and diffusers do, run in a second
environment
that holds the newest releases the registry installs, and a report of what differs
(benchmarks/latest-releases.md): the versions on each side, why a newer release did not
install, and every test that fails there, with the first line of its error.

    python -m tools.latest_releases --python .venv-latest/bin/python \\
        --pinned-python .venv/bin/python --report benchmarks/latest-releases.md

The same tests pass on the pinned versions (`make test`), so each failure listed is a
change in a library the course has to follow."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("torch", "transformers", "peft", "accelerate", "diffusers", "bitsandbytes")
# what make test-latest lifts (the Makefile's LATEST_LIBRARIES)
UPGRADED = ("torch", "transformers", "peft", "accelerate", "diffusers")
# The tests whose outcome rests on library behaviour: the real Hugging Face models against
# the memory model, the planner's measured classes (transformers' classes and PEFT under
# torch's fake tensors, against real steps), FLOP counts, the code the planner prints (run
# for real), the many-GPU runs over gloo (tensor, sequence, pipeline, context and expert
# parallelism, and the code the planner prints for them), the lab of mistakes, the
# snapshot export, the measured comparisons, the image models (diffusers' UNet and
# diffusion transformers, transformers' vision encoders: the lab's live demo, the image
# planner's code run and its QLoRA through diffusers' 4-bit loading, the picture
# mistakes), and the claims the lessons make about library source.
LIBRARY_TESTS = (
    "tests/real_libraries",
    "tests/demos/test_flop_count.py",
    "tests/demos/test_flops.py",
    "tests/demos/test_measure.py",
    "tests/demos/test_cli_sweep_fit_training.py",
    "tests/demos/test_planner_classes.py",
    "tests/demos/test_planner_class_kinds.py",
    "tests/demos/test_planner_code.py",
    "tests/demos/test_planner_hf_run.py",
    "tests/demos/test_planner_fsdp_run.py",
    "tests/demos/test_parallel_runs.py",
    "tests/demos/test_parallel_experts.py",
    "tests/demos/test_parallel_code_runs.py",
    "tests/demos/test_mistakes.py",
    "tests/demos/test_memory_snapshot.py",
    "tests/demos/test_picture_models.py",
    "tests/demos/test_picture_plan_cli.py",
    "tests/demos/test_picture_mistakes.py",
    "tests/lessons/test_claims_releases.py",
    "tests/lessons/test_claims_newest.py",
)
# Tests that compare the installed versions with the pins: they differ here by design.
NOT_HERE = {
    "tests/demos/test_planner_code.py::test_the_pinned_versions_are_the_installed_ones":
        "checks that the installed versions are the pinned ones",
    "tests/lessons/test_claims_releases.py::"
    "test_the_lessons_name_the_installed_transformers_release":
        "checks that the lessons name the pinned transformers release",
}
PIP_ENV = {"PIP_CONFIG_FILE": os.devnull}  # the registry itself, no local caps
ERROR_LINE = re.compile(r"\b\w+(Error|Exception): ")


def cause(message: str) -> str:
    """The line of a failure's message that names its cause: the first line, unless an
    error raised further down (in a child process's log, say) says more."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    errors = [line for line in lines[1:] if ERROR_LINE.search(line)]
    return (errors[0] if errors else lines[0])[:300]


def versions(python: str) -> dict[str, str | None]:
    code = ("import importlib.metadata as m, json\n"
            f"names = {list(LIBRARIES)!r}\n"
            "def v(n):\n"
            "    try:\n        return m.version(n)\n"
            "    except m.PackageNotFoundError:\n        return None\n"
            "print(json.dumps({n: v(n) for n in names}))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


# What the course rests on, read from each environment's installed libraries: the ops
# torch's FLOP counter has a formula for, the keywords of the calls the course teaches (those
# a function reads out of its **kwargs included: torch 2.13's checkpoint takes
# preserve_rng_state that way), torch.compile's budget settings, whether accelerate's FSDP2
# checkpointing wraps layers without the RNG state, which MoE families' tensor-parallel
# plans split the experts, and whether from_pretrained turns hub kernels on by default.
PROBE = """
import inspect, json, re
import torch, torch.utils.checkpoint as ckpt, torch.utils.flop_counter as fc
import torch._functorch.config as functorch_config

def keywords(function):
    names = list(inspect.signature(function).parameters)
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        source = ""
    popped = re.findall(r"kwargs\\.pop\\(\\s*[\\"'](\\w+)[\\"']", source)
    return names + [name for name in popped if name not in names]

out = {"FLOP counter formulas (torch.utils.flop_counter.flop_registry)":
           sorted(str(op) for op in fc.flop_registry),
       "torch.utils.checkpoint.checkpoint keywords": keywords(ckpt.checkpoint),
       "create_selective_checkpoint_contexts keywords": keywords(
           ckpt.create_selective_checkpoint_contexts),
       "torch._functorch.config activation_memory_budget settings": sorted(
           n for n in functorch_config.get_config_copy()
           if n.startswith("activation_memory_budget"))}
try:
    import transformers
    out["PreTrainedModel.activation_checkpointing_enable keywords"] = keywords(
        transformers.PreTrainedModel.activation_checkpointing_enable)
    split = []
    for family in ("mixtral", "qwen3_moe"):
        try:
            plan = transformers.AutoConfig.for_model(family).base_model_tp_plan or {}
        except (ValueError, AttributeError):
            continue
        if any(".experts" in name for name in plan):
            split.append(family)
    out["MoE families (Mixtral, Qwen3-MoE) whose base_model_tp_plan splits the experts"] = split
    load = transformers.PreTrainedModel.from_pretrained
    default = inspect.signature(load).parameters.get("use_kernels")
    if default is not None:
        out["from_pretrained's use_kernels default"] = [repr(default.default)]
    else:
        found = re.search(r"kwargs\\.pop\\(\\s*[\\"']use_kernels[\\"']\\s*,\\s*([^)]+)\\)",
                          inspect.getsource(load))
        out["from_pretrained's use_kernels default"] = [found.group(1).strip() if found
                                                       else "not read"]
except ImportError:
    pass
try:
    import peft
    out["peft.prepare_model_for_kbit_training keywords"] = keywords(
        peft.prepare_model_for_kbit_training)
except ImportError:
    pass
try:
    from accelerate.utils import fsdp_utils
    out["accelerate's FSDP2 checkpointing wraps layers without the RNG state"] = [str(
        "preserve_rng_state=False" in inspect.getsource(fsdp_utils.fsdp2_apply_ac))]
except (ImportError, AttributeError):
    pass
print(json.dumps(out))
"""


def probe(python: str) -> dict[str, list[str]]:
    out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def changes(pinned: dict[str, list[str]], latest: dict[str, list[str]]) -> list[str]:
    """One line per probed item that differs: what the newest releases add and drop."""
    lines = []
    for item in sorted(set(pinned) | set(latest)):
        before, after = pinned.get(item), latest.get(item)
        if before == after:
            continue
        if before is None or after is None:
            lines.append(f"{item}: only in the {'newest' if before is None else 'pinned'} "
                         "releases")
            continue
        added = [x for x in after if x not in before]
        dropped = [x for x in before if x not in after]
        if (not added and not dropped) or len(before) == len(after) == 1:
            lines.append(f"{item}: {', '.join(before)} → {', '.join(after)}")
            continue
        parts = [f"adds {', '.join(f'`{x}`' for x in added)}" if added else "",
                 f"drops {', '.join(f'`{x}`' for x in dropped)}" if dropped else ""]
        lines.append(f"{item}: " + "; ".join(p for p in parts if p))
    return lines


def newest_on_registry(python: str, name: str) -> str | None:
    """The newest release the registry lists (pip index versions), or None."""
    out = subprocess.run([python, "-m", "pip", "index", "versions", name],
                         capture_output=True, text=True, env={**os.environ, **PIP_ENV},
                         timeout=120)
    for line in out.stdout.splitlines():
        if line.startswith(f"{name} (") and line.endswith(")"):
            return line[len(name) + 2:-1]
    return None


def why_not_installed(python: str, name: str, version: str) -> str:
    """pip's own reason the newer release does not install (a dry run)."""
    out = subprocess.run([python, "-m", "pip", "install", "--dry-run", "--quiet",
                          f"{name}=={version}"], capture_output=True, text=True,
                         env={**os.environ, **PIP_ENV}, timeout=600)
    errors = [line.removeprefix("ERROR: ") for line in out.stderr.splitlines()
              if line.startswith("ERROR: ")]
    return errors[-1] if errors else "pip's dry run installs it: run make test-latest again"


@dataclass
class Failure:
    test: str
    kind: str  # failure or error
    message: str


def run_tests(python: str, junit: Path, extra: list[str]) -> tuple[int, dict[str, int],
                                                                 list[Failure]]:
    command = [python, "-m", "pytest", *LIBRARY_TESTS, "-q", "-p", "no:randomly",
               "-p", "no:cacheprovider", "-m", "not browser", f"--junitxml={junit}",
               *(f"--deselect={test}" for test in NOT_HERE), *extra]
    returncode = subprocess.run(command, cwd=ROOT).returncode
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    failures: list[Failure] = []
    if not junit.exists():
        return returncode, counts, failures
    for suite in ElementTree.parse(junit).getroot().iter("testsuite"):
        for key in counts:
            counts[key] += int(suite.get(key, 0))
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        for kind in ("failure", "error"):
            node = case.find(kind)
            if node is not None:
                name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
                failures.append(Failure(name, kind, cause(node.get("message") or
                                                          node.text or "")))
    return returncode, counts, failures


def report(latest: dict[str, str | None], pinned: dict[str, str | None],
           not_installed: dict[str, tuple[str, str]], counts: dict[str, int],
           failures: list[Failure], seconds: float, changed: list[str] | None = None) -> str:
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    lines = [
        "# The tests that rest on library behaviour, on the newest releases",
        "",
        f"Written by `make test-latest` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC "
        f"({seconds / 60:.1f} min for the tests). The same tests pass on the pinned "
        "versions (`make test`); each failure below is a change in a library.",
        "",
        "| library | pinned (`make test`) | newest that installs (`make test-latest`) |",
        "|---|---|---|",
    ]
    for name in LIBRARIES:
        lines.append(f"| {name} | {pinned.get(name) or '—'} | {latest.get(name) or '—'} |")
    if not_installed:
        lines += ["", "Newer releases on the registry that do not install:", ""]
        for name, (version, reason) in not_installed.items():
            lines.append(f"- {name} {version}: {reason}")
    lines += ["", "What the newest releases change in what the course rests on (read from "
                  "the installed libraries):", ""]
    lines += [f"- {line}" for line in changed] if changed else ["- nothing"]
    lines += ["", f"Tests: {passed} passed, {counts['failures'] + counts['errors']} failed, "
                  f"{counts['skipped']} skipped, of {counts['tests']} "
                  f"({', '.join(f'`{t}`' for t in LIBRARY_TESTS)}); left out: "
                  + "; ".join(f"`{t}` ({why})" for t, why in NOT_HERE.items()) + ".", ""]
    if failures:
        lines += ["| test | what it says |", "|---|---|"]
        for f in failures:
            message = f.message.replace("|", "\\|") or f.kind
            lines.append(f"| `{f.test}` | {message} |")
    else:
        lines.append("Nothing differs.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="the newest releases' interpreter")
    parser.add_argument("--pinned-python", default=sys.executable)
    parser.add_argument("--report", type=Path, default=ROOT / "benchmarks/latest-releases.md")
    args, extra = parser.parse_known_args(argv)
    latest, pinned = versions(args.python), versions(args.pinned_python)
    not_installed = {}
    for name in UPGRADED:
        newest = newest_on_registry(args.python, name)
        if newest and newest != (latest.get(name) or "").split("+")[0]:
            not_installed[name] = (newest, why_not_installed(args.python, name, newest))
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        returncode, counts, failures = run_tests(args.python, Path(folder) / "junit.xml",
                                                 extra)
    text = report(latest, pinned, not_installed, counts, failures,
                  time.monotonic() - started,
                  changes(probe(args.pinned_python), probe(args.python)))
    args.report.write_text(text, encoding="utf-8")
    print(text)
    return returncode  # pytest's: 0 when nothing differs


if __name__ == "__main__":
    sys.exit(main())
