"""Start the app: `python -m ui.server [streamlit options]` is `streamlit run app.py`
with the st.navigation router alone in charge.

Until st.navigation has run once in a server process, Streamlit treats a folder named
`pages/` beside the entry point as a legacy multipage app, so the very first visitor of a
freshly started server who opens a deep link (/compare?layers=16, /verify?id=...) gets a
"Page not found" dialog over the right page (streamlit#8860, #9992). Every page here is
registered through st.navigation, so the legacy discovery is switched off before the
server starts. The demo engine is warmed up in the background meanwhile (its first
checkpoint() imports torch._dynamo, 1.5-2 s), so the first learner does not wait for it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

# Idle OpenMP threads sleep instead of spinning: on a shared CPU, spinning threads of one
# demo slow every other process (and the next demo) down several times. Set before torch
# is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.runtime.pages_manager import PagesManager  # noqa: E402
from streamlit.web import cli  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"


def _warm_up_engine() -> None:
    from demos.measure import warm_up

    warm_up()


def main(argv: list[str]) -> None:
    from quiz.service import startup_check

    if status := startup_check():  # a lost signing key or database: refuse, and say why
        sys.exit(status)
    PagesManager.uses_pages_directory = False
    threading.Thread(target=_warm_up_engine, name="warm-up-engine", daemon=True).start()
    sys.argv = ["streamlit", "run", str(APP), *argv]
    cli.main(prog_name="streamlit")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 120) -> None:
    """Wait until `url`/_stcore/health answers 200; fail early if the process exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the app exited early with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{url}/_stcore/health did not answer within {timeout} s")


@contextmanager
def background_app(
    env: Mapping[str, str] | None = None,
    command: Sequence[str] | None = None,
    log: IO | None = None,
) -> Iterator[str]:
    """Serve the app from a child process on a free loopback port; yield its base URL once
    the health check answers, then stop it with its whole process group. `command` runs
    something else that serves it (`make run`), given the port as `{port}`. Certificates
    link to this server unless `env` names another APP_BASE_URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [part.format(port=port) for part in command] if command else [
        sys.executable, "-m", "ui.server", "--server.port", str(port),
        "--server.address", "127.0.0.1", "--server.headless", "true",
    ]
    process = subprocess.Popen(
        argv, cwd=ROOT, env={**os.environ, "APP_BASE_URL": url, **(env or {})},
        stdout=log or subprocess.DEVNULL,
        stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        wait_healthy(url, process)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


if __name__ == "__main__":
    main(sys.argv[1:])
