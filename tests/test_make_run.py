"""`make run` serves the app: the health check answers 200 and the home page loads."""

from __future__ import annotations

import os
import signal
import subprocess
import urllib.request

from tests.conftest import ROOT, _free_port, _wait_healthy


def test_make_run_serves_the_health_check(tmp_path) -> None:
    port = _free_port()
    env = {**os.environ, "DATA_DIR": str(tmp_path)}
    process = subprocess.Popen(
        ["make", "run", f"PORT={port}", "ADDRESS=127.0.0.1"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, process, timeout=120)
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.status == 200
            assert b"<html" in response.read().lower()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)
