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


def run_processes(*commands: Sequence[str], cwd: Path, env: Mapping[str, str],
                  timeout_s: float, what: str) -> str:
    """Run `commands` side by side (one launcher per machine of a multi-machine run, or
    one) to their end and return their output; fail the test when they run past
    `timeout_s` (killing each one's whole process group) or one exits with an error."""
    processes = [subprocess.Popen(list(command), cwd=cwd, env=dict(env),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  start_new_session=True) for command in commands]
    logs = []
    for process in processes:
        try:
            log, _ = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            for each in processes:  # the launchers and the processes they started
                if each.poll() is None:
                    os.killpg(each.pid, signal.SIGKILL)
            log, _ = process.communicate()
            pytest.fail(f"{what} ran past {timeout_s} s:\n{log[-4000:]}")
        logs.append(log)
    for process, log in zip(processes, logs, strict=True):
        assert process.returncode == 0, log[-6000:]
    return "\n".join(logs)
