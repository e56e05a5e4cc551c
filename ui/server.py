"""Start the app: `python -m ui.server [streamlit options]` is `streamlit run app.py`
with the st.navigation router alone in charge.

Until st.navigation has run once in a server process, Streamlit treats a folder named
`pages/` beside the entry point as a legacy multipage app, so the very first visitor of a
freshly started server who opens a deep link (/compare?layers=16, /verify?id=...) gets a
"Page not found" dialog over the right page (streamlit#8860, #9992). Every page here is
registered through st.navigation, so the legacy discovery is switched off before the
server starts.

The demo service starts with the server: its worker process (the engine, warm; the
server answers its health check, which a proxy waits for, once the worker is ready and
the libraries of the real-model page are imported, or after ENGINE_WAIT_S, so that the
first learners' demos do not wait behind the worker's start and these imports do not
hold their pages), and in
the background the result store is warmed for every demo page's defaults, the home page's
teaser and every lesson's demo link, so the common views are instant from the first
visitor. Which runs those views make is asked of the pages themselves: a child process
runs each page under AppTest with the runner in collect mode (`--collect-warm-jobs`), and
the jobs it lists are queued behind any learner's. Then, whenever no learner has asked
for a run for a few seconds, the server measures the neighbours of every demo page's
defaults (each slider one step either way) at the lowest priority, so that a learner's
first move from the defaults is served from the store.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Idle OpenMP threads sleep instead of spinning: on a shared CPU, spinning threads of one
# demo slow every other process (and the next demo) down several times. Set before torch
# is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
WARM_ENV = "DEMO_WARM_STORE"  # "0" switches the start-up warm-up off
# "0": no idle-time runs of the defaults' neighbours; "layers,batch": those sliders' only
NEIGHBOURS_ENV = "DEMO_WARM_NEIGHBOURS"
# Where the warm-up says how far it is (default: warm-up.json in DATA_DIR), for operators
# and for benchmarks that measure a server once its start-up work is done.
STATUS_ENV = "DEMO_WARM_STATUS"
# How long the server waits for the engine's worker before it listens anyway (a worker
# that does not start is started again by the first run, which says why it failed).
ENGINE_WAIT_S = 60.0
log = logging.getLogger(__name__)


def warm_views() -> list[tuple[str, dict[str, str]]]:
    """(page script, query) of the common views: every demo page and the home page at
    their defaults, and every lesson's demo link."""
    from lessons.document import CONTENT_DIR, split_front_matter
    from ui.navigation import PAGES

    scripts = {spec.url_path: spec.file for spec in PAGES}
    views = [(scripts[""], {})]
    views += [(spec.file, {}) for spec in PAGES if spec.file.startswith("pages/demos/")]
    for path in sorted(CONTENT_DIR.glob("*.md")):
        front, _ = split_front_matter(path.read_text(encoding="utf-8"))
        demo = front.get("demo") or {}
        if demo.get("path") in scripts:
            query = {k: str(v) for k, v in (demo.get("query") or {}).items()}
            view = (scripts[demo["path"]], query)
            if view not in views:
                views.append(view)
    return views


def _collect(at_of: Callable[[str, dict[str, str]], Any], script: str,
             query: dict[str, str]) -> tuple[list[dict], Any]:
    """The requests of the jobs one view runs (in collect mode), and its AppTest."""
    from ui import demo_runner

    at = at_of(script, query)
    demo_runner.collected.clear()
    try:
        at.run()
    except Exception:  # noqa: BLE001 - one broken view must not stop the warm-up
        log.exception("warm-up: %s %s failed", script, query)
    return [job.request() for job in demo_runner.collected], at


def neighbour_keys() -> set[str] | None:
    """The sliders whose neighbours are measured while idle: every one (None), unless
    DEMO_WARM_NEIGHBOURS names some ("layers,batch"); "0" is none."""
    value = os.environ.get(NEIGHBOURS_ENV, "1").strip()
    if value in ("", "1"):
        return None
    return set() if value == "0" else {key.strip() for key in value.split(",")}


def slider_neighbours(at: Any, keys: set[str] | None = None) -> list[dict[str, str]]:
    """Each slider of a page run (AppTest), one step either way of its value, within its
    range: the queries of a learner's first move (a slider's key is its query name);
    only the sliders in `keys` when given."""
    moves = []
    for slider in at.slider:
        if keys is not None and slider.key not in keys:
            continue
        value, step = slider.value, slider.step
        if not isinstance(value, int | float) or not step:
            continue
        for moved in (value - step, value + step):
            if slider.min <= moved <= slider.max:
                text = str(int(moved)) if float(moved).is_integer() else f"{moved:g}"
                moves.append({slider.key: text})
    return moves


def collect_warm_jobs(neighbours: bool = True) -> dict[str, list]:
    """The jobs the common views run (their requests), and (`neighbours`) those of every
    slider step next to each demo page's defaults (with those views), found by running
    each page under AppTest with the runner collecting instead of running. Call in a
    child process."""
    os.environ["DEMO_RUNNER_COLLECT"] = "1"
    from streamlit.testing.v1 import AppTest

    def at_of(script: str, query: dict[str, str]) -> AppTest:
        at = AppTest.from_file(str(ROOT / script), default_timeout=60)
        for key, value in query.items():
            at.query_params[key] = value
        return at

    requests: list[dict] = []
    moves: list[dict] = []
    neighbour_views: list[list] = []
    for script, query in warm_views():
        found, at = _collect(at_of, script, query)
        requests += [r for r in found if r not in requests]
        if not neighbours or not script.startswith("pages/demos/") or query:
            continue
        for move in slider_neighbours(at, neighbour_keys()):
            moved, _ = _collect(at_of, script, move)
            if moved:  # an invalid combination (hidden 128 with 3 heads) runs nothing
                neighbour_views.append([script, move])
            moves += [r for r in moved if r not in requests and r not in moves]
    return {"jobs": requests, "idle_jobs": moves, "neighbour_views": neighbour_views}


def lowest_priority() -> None:
    """Give the calling process the lowest share of the CPU (nice 19: about 1.5% of a core
    beside a busy normal process). Not SCHED_IDLE: on a machine busy with other work that
    never runs it, and the warm-up would never end."""
    os.nice(19 - os.nice(0))


def _collected(flag: str) -> dict[str, list] | None:
    """What a child process lists (at the lowest priority: it shares the CPU with the
    first learners, whose page runs must not wait for it)."""
    try:
        out = subprocess.run([sys.executable, "-m", "ui.server", flag],
                             cwd=ROOT, capture_output=True, text=True, timeout=900,
                             check=True, preexec_fn=lowest_priority).stdout
        return json.loads(out.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError, OSError):
        log.exception("warm-up: could not list the views' runs (%s)", flag)
        return None


def status_path() -> Path:
    """The warm-up's status file: DEMO_WARM_STATUS, else warm-up.json in DATA_DIR."""
    from storage.location import data_dir

    return Path(os.environ.get(STATUS_ENV) or data_dir() / "warm-up.json")


def _report(state: str, **counts: int) -> None:
    """Write the warm-up's state ("listing", "defaults", "neighbours", "done", "failed")
    and its counts of runs; a disk that refuses only costs the report."""
    path = status_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(path.name + ".part")
        part.write_text(json.dumps({"state": state, "pid": os.getpid(),
                                    "time": time.time(), **counts}))
        part.replace(path)
    except OSError:
        log.warning("warm-up: could not write %s", path, exc_info=True)


def _finish(tickets: list[Any]) -> int:
    """Wait for the tickets' runs; how many failed (each logged with its reason)."""
    failed = 0
    for ticket in tickets:
        ticket.wait()
        if ticket.error is not None:
            failed += 1
            log.warning("warm-up: %r failed: %s %s", ticket.job, ticket.error,
                        ticket.error.numbers)
    return failed


def _warm_store() -> None:
    """The common views first; the slider steps next to the defaults are listed (a
    minute of AppTest runs) only once those are measured and no learner is waiting."""
    from demos.runtime.jobs import Job
    from demos.runtime.service import get_service

    service = get_service()
    _report("listing")
    found = _collected("--collect-warm-jobs")
    if found is None:
        _report("failed")
        return
    tickets = service.warm(Job.from_request(request) for request in found["jobs"])
    _report("defaults", runs=len(tickets))
    failed = _finish(tickets)
    counts = {"runs": len(tickets), "failed": failed}
    if neighbour_keys() == set():
        _report("done", **counts)
        return
    while service.waiting():
        time.sleep(5)
    _report("listing", **counts)
    found = _collected("--collect-neighbour-jobs")
    if found is None:
        _report("failed", **counts)
        return
    idle = service.warm((Job.from_request(request) for request in found["idle_jobs"]),
                        idle=True)
    _report("neighbours", **counts, idle_runs=len(idle))
    _report("done", **counts, idle_runs=len(idle), idle_failed=_finish(idle))


def wait_for_engine(service: Any, limit_s: float = ENGINE_WAIT_S) -> float | None:
    """Wait (at most `limit_s`) until the service's worker process is ready to run a
    demo; the seconds waited, or None when it was not ready in time."""
    began = time.monotonic()
    while not service.worker.alive():
        if time.monotonic() - began > limit_s:
            log.warning("the demo engine was not ready after %.0f s; serving anyway",
                        limit_s)
            return None
        time.sleep(0.1)
    return time.monotonic() - began


def main(argv: list[str]) -> None:
    if argv[:1] in (["--collect-warm-jobs"], ["--collect-neighbour-jobs"]):
        print(json.dumps(collect_warm_jobs(neighbours=argv[0] == "--collect-neighbour-jobs")))
        return
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.web import cli

    from demos.engine.real_models import import_libraries
    from demos.runtime.service import get_service
    from quiz.service import startup_check
    from quiz.status_list import publish_forever
    from storage.location import data_dir
    from ui.query import install_limit_notice

    if status := startup_check():  # a lost signing key or database: refuse, and say why
        sys.exit(status)
    PagesManager.uses_pages_directory = False
    install_limit_notice()  # a link over Streamlit's limits is reported, not ignored
    service = get_service()  # the scheduler, and the worker process warming its engine
    threading.Thread(target=publish_forever, args=(data_dir, threading.Event()),
                     name="status-lists", daemon=True).start()  # revocations, served
    if os.environ.get(WARM_ENV, "1") != "0":
        threading.Thread(target=_warm_store, name="warm-store", daemon=True).start()
    # Listen once a learner's first demo can run, with the libraries the real-model page
    # imports loaded meanwhile.
    libraries = threading.Thread(target=import_libraries, name="import-libraries",
                                 daemon=True)
    libraries.start()
    waited = wait_for_engine(service)
    libraries.join(max(ENGINE_WAIT_S - (waited or ENGINE_WAIT_S), 1.0))
    sys.argv = ["streamlit", "run", str(APP), *argv]
    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main(sys.argv[1:])
