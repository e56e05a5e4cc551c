"""The load benchmark's waits and its check of the waiting page's estimates.

Waits: a fresh server answers its health check only once its warm-up has measured the
common views (minutes on a busy machine), so the benchmark follows the server's own
warm-up status (DATA_DIR/warm-up.json: listing, defaults, neighbours, done, failed)
rather than fixed time-outs, under one generous overall cap that the report states.

Estimates: learners open demo settings no store holds, all at once, so their pages
wait; each page's first notice ("Waiting for the CPU: 3 ahead, about 12 s until this run
starts, then about 4 s to run.") is compared with when its run did start (the notice
turns into the running progress bar)."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

WAIT_CAP_S = 3600.0  # the benchmark's waits for the server, all together
DONE = ("done", "failed")
NOTICE = re.compile(r"(\d+) ahead, about (.+?) until this run starts, then about (.+?) to run")
UNKNOWN = re.compile(r"(\d+) ahead; no estimate yet on this load")
View = tuple[str, dict[str, str]]


@dataclass
class Waited:
    seconds: float
    state: str | None  # the server's warm-up state when the wait ended
    capped: bool = False  # the overall cap ended it

    def record(self) -> dict:
        return {"seconds": round(self.seconds, 1), "state": self.state,
                "capped": self.capped}


def read_state(status: Path) -> str | None:
    """The warm-up's state as written (None: not yet)."""
    try:
        data = json.loads(status.read_text())
    except (OSError, ValueError):
        return None
    return data.get("state") if isinstance(data, dict) else None


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def wait_listening(url: str, process: subprocess.Popen, status: Path, deadline: float,
                   answers: Callable[[str], bool] = healthy, pause_s: float = 0.5,
                   say: Callable[[str], None] = print) -> Waited:
    """Wait for the server's health check while its warm-up goes on (it listens once the
    common views are measured): its state changes are printed; the process exiting or
    the overall `deadline` passing ends the benchmark with the state it had reached."""
    began, state = time.monotonic(), None
    while not answers(url):
        if process.poll() is not None:
            raise SystemExit(f"the server exited ({process.returncode}) with its warm-up "
                             f"at {state!r}")
        if (now := read_state(status)) != state:
            state = now
            say(f"warm-up: {state} after {time.monotonic() - began:.0f} s")
        if time.monotonic() >= deadline:
            raise SystemExit(f"the server did not listen within the benchmark's cap "
                             f"({time.monotonic() - began:.0f} s; warm-up at {state!r})")
        time.sleep(pause_s)
    return Waited(time.monotonic() - began, read_state(status))


def wait_state(status: Path, states: tuple[str, ...], deadline: float,
               pause_s: float = 5.0, state_of: Callable[[Path], str | None] = read_state
               ) -> Waited:
    """Wait until the warm-up reaches one of `states`, or the cap (then `capped`)."""
    began = time.monotonic()
    while (state := state_of(status)) not in states:
        if time.monotonic() >= deadline:
            return Waited(time.monotonic() - began, state, capped=True)
        time.sleep(pause_s)
    return Waited(time.monotonic() - began, state)


def duration_seconds(text: str) -> float | None:
    """'35 s', '12 min', '5.1 hours' (ui.demo_runner.duration_text) in seconds."""
    match = re.fullmatch(r"([\d.]+) (s|min|hours)", text.strip())
    if match is None:
        return None
    return float(match[1]) * {"s": 1, "min": 60, "hours": 3600}[match[2]]


@dataclass(frozen=True)
class Told:
    """A waiting page's first notice and what followed."""

    shown_s: float  # when the notice showed, from the request
    ahead: int
    wait_s: float  # the wait it told
    run_s: float  # the run time it told
    started_s: float | None = None  # when the run started (the progress bar showed)
    results_s: float | None = None
    known: bool = True  # False: the page said it had no estimate yet on this load


def told_in(body: str, shown_s: float) -> Told | None:
    if (unknown := UNKNOWN.search(body)) is not None:
        return Told(shown_s, int(unknown[1]), 0.0, 0.0, known=False)
    match = NOTICE.search(body)
    if match is None:
        return None
    wait, run = duration_seconds(match[2]), duration_seconds(match[3])
    if wait is None or run is None:
        return None
    return Told(shown_s, int(match[1]), wait, run)


def estimate_views(n: int) -> list[View]:
    """N compare views with settings no warm-up measures (a learner's slider moves)."""
    strategies = ("every-layer", "sqrt", "none,every-layer", "every-layer,sqrt")
    views = [("pages/demos/compare.py", {"layers": str(layers), "strategy": strategy})
             for strategy in strategies for layers in (3, 5, 6, 7, 9, 10, 11, 12)]
    return views[:n]


def factor(told: float, waited: float) -> float:
    """How many times off the told wait was, either way (both at least 1 s: the notice
    says whole seconds)."""
    told, waited = max(told, 1.0), max(waited, 1.0)
    return max(told / waited, waited / told)


def estimate_errors(told: list[Told | None]) -> dict:
    """The told waits against the real ones: p50 / p95 of the factor off, the median of
    real ÷ told (above 1: told too short), and the pages that waited."""
    pairs = [(t.wait_s, t.started_s - t.shown_s) for t in told
             if t is not None and t.known and t.started_s is not None]
    factors = sorted(factor(w, real) for w, real in pairs)

    def at(q: float) -> float | None:
        if not factors:
            return None
        return round(factors[min(len(factors) - 1, round(q * (len(factors) - 1)))], 2)

    return {"pages": len(told), "told_a_wait": len(pairs),
            "said_no_estimate": sum(t is not None and not t.known for t in told),
            "factor_off_p50": at(0.5), "factor_off_p95": at(0.95),
            "real_over_told_median": round(statistics.median(
                max(real, 1.0) / max(w, 1.0) for w, real in pairs), 2) if pairs else None,
            "pairs": [(w, round(real, 1)) for w, real in pairs]}
