"""`python -m demos <command> --help` answers at once (torch and pandas are imported only
by the commands that measure) and shows each option's default beside its choices."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import ROOT

COMMANDS = ["plan", "budget", "compare", "sweep", "mistakes", "bench"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_imports_no_engine(command: str) -> None:
    probe = ("import contextlib, io, sys\n"
             "from demos.cli import main\n"
             "with contextlib.redirect_stdout(io.StringIO()), "
             "contextlib.suppress(SystemExit):\n"
             f"    main([{command!r}, '--help'])\n"
             "print(sorted(m for m in ('torch', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_plans_help_shows_defaults_and_choices() -> None:
    out = subprocess.run([sys.executable, "-m", "demos", "plan", "--help"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    text = " ".join(out.split())
    assert "--precision {fp32,mixed,bf16} (default: mixed)" in text
    assert "--tuning {full,lora,qlora} (default: full)" in text
    assert "--optimizer {adamw,adamw-8bit,sgd-momentum} (default: adamw)" in text
    assert "(default: 4096)" in text and "(default: None)" not in text
    assert "(default: False)" not in text
