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
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from playwright.sync_api import Browser, Page, Playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

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


# Counts the script's finished runs in the page: `running` then `notRunning` on stApp's
# script-state attribute (childList too: stApp may be drawn already running). `goto`
# installs it before the document's own scripts run, so the page's first run is counted;
# `wait_for_app` installs it when a tab it opened some other way lacks it.
_WATCH_BODY = """
    const now = performance.now();
    if (!window.__gclRuns) {
        const runs = window.__gclRuns = {finished: 0, seen: 0, running: false, changed: now,
                                         waitFrom: now, mutated: now};
        const state = () => document.querySelector('[data-testid="stApp"]')
            ?.getAttribute('data-test-script-state');
        const look = () => {
            runs.mutated = performance.now();
            const value = state();
            if (value === 'running' && !runs.running) {
                runs.running = true;
                runs.changed = performance.now();
            } else if (value !== 'running' && runs.running) {
                runs.running = false;
                runs.finished += 1;
                runs.changed = performance.now();
            }
        };
        look();
        new MutationObserver(look).observe(document, {
            attributes: true, childList: true, subtree: true,
            attributeFilter: ['data-test-script-state']});
        return true;
    }
    return false;
"""
_WATCH_FROM_START = f"(() => {{{_WATCH_BODY}}})();"
_WATCH_RUNS = f"""() => {{
    const installed = (() => {{{_WATCH_BODY}}})();
    if (!installed) {{
        window.__gclRuns.waitFrom = performance.now();
    }}
}}"""
# Done: the script is idle and either a run has finished since the last wait and nothing
# started for QUIET_MS after it, or GRACE_MS have passed since this wait began (a rerun
# can start a moment after an interaction, or the interaction started none). With
# `first`, a page just opened: its first run must have finished, however long it took to
# start (on a busy machine a click before it ended landed in a page still being drawn).
_RUN_DONE = """([graceMs, quietMs, first, drawnQuietMs]) => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') {
        return false;
    }
    const runs = window.__gclRuns;
    const now = performance.now();
    const quiet = runs && runs.finished > runs.seen && now - runs.changed >= quietMs;
    if (first) {
        // A short first run can start and end between two of React's renders, so the
        // page never shows it running: drawn content, nothing running, no change for a
        // while, is a finished first run too.
        const drawn = runs && !runs.running && now - runs.mutated >= drawnQuietMs
            && document.querySelector('[data-testid="stMain"] [data-testid="stElementContainer"]');
        return quiet || Boolean(drawn);
    }
    return quiet || now - runs.waitFrom >= graceMs;
}"""
GRACE_MS = 300
QUIET_MS = 100
DRAWN_QUIET_MS = 1500
_WATCHED: weakref.WeakSet = weakref.WeakSet()  # the tabs whose documents get the counter


def _wait_for_run(page: Page, timeout_ms: int, *, first: bool) -> None:
    page.wait_for_selector('[data-testid="stApp"]', state="attached", timeout=timeout_ms)
    if not first:
        page.evaluate(_WATCH_RUNS)
    page.wait_for_function(_RUN_DONE, arg=[GRACE_MS, QUIET_MS, first, DRAWN_QUIET_MS], polling=20,
                           timeout=timeout_ms)
    page.wait_for_selector('[data-testid="stStatusWidget"] >> text=Running', state="detached",
                           timeout=timeout_ms)
    page.evaluate("() => { if (window.__gclRuns) window.__gclRuns.seen = "
                  "window.__gclRuns.finished; }")


# A run estimated past the runner's threshold (on a loaded machine the page's defaults
# can be) asks for a click first; the tests give it, as a learner would.
RUN_ANYWAY = "Run it anyway"


def _run_when_asked(page: Page, timeout_ms: int) -> None:
    for _ in range(4):  # each click runs one demo; a page has a few at most
        ask = page.get_by_role("button", name=RUN_ANYWAY)
        if ask.count() == 0:
            return
        ask.first.click()
        _wait_for_run(page, timeout_ms, first=False)


def wait_for_app(page: Page, timeout_ms: int = 60_000) -> None:
    """Wait until the Streamlit script (or fragment) has finished its run, a long run
    confirmed when the page asks."""
    _wait_for_run(page, timeout_ms, first=False)
    _run_when_asked(page, timeout_ms)


def goto(page: Page, app_url: str, path: str = "", timeout_ms: int = 60_000) -> None:
    """Open `path` (for example "compare?layers=4") and wait until the page's first run
    has finished (a long run confirmed when the page asks)."""
    if page not in _WATCHED:
        page.add_init_script(_WATCH_FROM_START)
        _WATCHED.add(page)
    page.goto(f"{app_url}/{path.lstrip('/')}", wait_until="domcontentloaded")
    _wait_for_run(page, timeout_ms, first=True)
    _run_when_asked(page, timeout_ms)


SIDEBAR = '[data-testid="stSidebar"]'


def pick_language(page: Page, native_name: str, tries: int = 3) -> None:
    """Choose a language in the sidebar's picker, as a learner does, and wait for the run
    it starts. On a loaded machine the list can open while the sidebar is still being
    laid out, placed outside the window, where no click reaches it: closed, it opens
    again in place."""
    box = page.locator(f"{SIDEBAR} [data-testid='stSelectbox']")
    for attempt in range(tries):
        box.click()
        try:
            page.get_by_role("option", name=native_name).click(timeout=15_000)
            break
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise
            page.keyboard.press("Escape")
    wait_for_app(page)


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


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 240) -> None:
    """Wait until `url`/_stcore/health answers 200; fail early if the process exits. The
    server answers once its engine's worker is ready (ui.server.ENGINE_WAIT_S at most):
    on a busy machine that and its own start took over 120 s."""
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
    open_timeout: float = 240,
) -> Iterator[str]:
    """Serve the app from a child process on a free loopback port; yield its base URL once
    the health check answers (within `open_timeout` seconds), then stop it with its whole
    process group. `command` runs something else that serves it (`make run`), given the
    port as `{port}`. Certificates link to this server unless `env` names another
    APP_BASE_URL."""
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
        wait_healthy(url, process, open_timeout)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
