"""Launching the processes of a multi-process test run (gloo on the CPU): in a session of
their own, so that a run past its time is killed with everything it started."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def environment(**extra: str) -> dict[str, str]:
    """This environment with the repository on PYTHONPATH, one thread per process, and
    `extra`."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path, **extra}


def run_processes(command: Sequence[str], *, cwd: Path, env: Mapping[str, str],
                  timeout_s: float, what: str) -> str:
    """Run `command` to its end and return its output; fail the test when it runs past
    `timeout_s` (killing its whole process group) or exits with an error."""
    process = subprocess.Popen(list(command), cwd=cwd, env=dict(env), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        log, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the launcher and the processes it started
        log, _ = process.communicate()
        pytest.fail(f"{what} ran past {timeout_s} s:\n{log[-4000:]}")
    assert process.returncode == 0, log[-6000:]
    return log
