"""`python -m demos <command> --help` and `python -m planner --help` answer at once (torch
and pandas are imported only by the commands that measure) and show each option's default
beside its choices; `python -m demos plan` says where the planner went."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import ROOT

COMMANDS = ["budget", "compare", "sweep", "mistakes", "bench"]


def _modules_after_help(module: str, argv: list[str]) -> str:
    probe = ("import contextlib, io, sys\n"
             f"from {module} import main\n"
             "with contextlib.redirect_stdout(io.StringIO()), "
             "contextlib.suppress(SystemExit):\n"
             f"    main({argv!r})\n"
             "print(sorted(m for m in ('torch', 'pandas') if m in sys.modules))")
    return subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.mark.parametrize("command", COMMANDS)
def test_help_imports_no_engine(command: str) -> None:
    assert _modules_after_help("demos.cli", [command, "--help"]) == "[]"


def test_the_planners_help_imports_no_engine() -> None:
    assert _modules_after_help("planner.cli", ["--help"]) == "[]"


def test_the_plans_help_shows_every_flag_with_defaults_and_choices() -> None:
    out = subprocess.run([sys.executable, "-m", "planner", "--help"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    text = " ".join(out.split())
    assert text.startswith("usage: python -m planner")
    assert "--precision {fp32,mixed,bf16} (default: mixed)" in text
    assert "--tuning {full,lora,qlora} (default: full)" in text
    assert "--optimizer {adamw,adamw-8bit,sgd-momentum} (default: adamw)" in text
    assert "(default: 4096)" in text and "(default: None)" not in text
    assert "(default: False)" not in text
    for flag in ("--config", "--model", "--seq", "--batch", "--accumulation", "--attention",
                 "--lora-rank", "--lora-targets", "--chunked-loss", "--strategy",
                 "--some-layers", "--gpu-gb", "--gpu", "--gpus", "--headroom", "--tp", "--sp",
                 "--cp", "--pp", "--schedule", "--microbatches", "--chunks", "--ep",
                 "--gpus-per-node", "--language", "--json", "--resolution", "--encoders",
                 "--cached-images"):
        assert f"{flag} " in text or f"{flag}," in text, flag


def test_the_old_plan_command_says_where_the_planner_went() -> None:
    done = subprocess.run([sys.executable, "-m", "demos", "plan", "--model", "gpt2"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "python -m demos plan: the planner is its own command: python -m planner, with "
        "the same flags"]
    listed = subprocess.run([sys.executable, "-m", "demos", "--help"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    assert "python -m planner" in " ".join(listed.split())
