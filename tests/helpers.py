"""Helpers shared by the browser tests and the latency benchmark: the app served from a
child process (background_app), Debian's Chromium, and waiting for a script run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from playwright.sync_api import Browser, Page, Playwright

ROOT = Path(__file__).resolve().parent.parent

ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"
# Headless Debian Chromium as root, with no background traffic on a closed network.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
APP_IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'


def wait_for_app(page: Page, timeout_ms: int = 60_000) -> None:
    """Wait until the Streamlit script (or fragment) has finished its run."""
    page.wait_for_selector('[data-testid="stApp"]', state="attached", timeout=timeout_ms)
    # A rerun can start a moment after an interaction: give it a chance to begin.
    page.wait_for_timeout(300)
    page.wait_for_selector(APP_IDLE, state="attached", timeout=timeout_ms)
    page.wait_for_selector('[data-testid="stStatusWidget"] >> text=Running', state="detached",
                           timeout=timeout_ms)


def goto(page: Page, app_url: str, path: str = "", timeout_ms: int = 60_000) -> None:
    """Open `path` (for example "compare?layers=4") and wait for the script to finish."""
    page.goto(f"{app_url}/{path.lstrip('/')}", wait_until="domcontentloaded")
    wait_for_app(page, timeout_ms)


def screenshot(page: Page, name: str) -> Path:
    """Keep a full-page screenshot under tests/artifacts/ and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def launch_chromium(playwright: Playwright) -> Browser:
    """Debian's Chromium, headless, as the tests and the latency benchmark use it."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


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
