"""Helpers shared by the browser tests."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser, Page, Playwright

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
