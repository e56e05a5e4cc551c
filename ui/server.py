"""Start the app: `python -m ui.server [streamlit options]` is `streamlit run app.py`
with the st.navigation router alone in charge.

Until st.navigation has run once in a server process, Streamlit treats a folder named
`pages/` beside the entry point as a legacy multipage app, so the very first visitor of a
freshly started server who opens a deep link (/compare?layers=16, /verify?id=...) gets a
"Page not found" dialog over the right page (streamlit#8860, #9992). Every page here is
registered through st.navigation, so the legacy discovery is switched off before the
server starts.

The demo service starts with the server: its worker process (the engine, warm), and the
warm-up of the result store for the common views: every demo page's defaults, the home
page's teaser and every lesson's demo link. Which runs those views make is asked of the
pages themselves: this process runs each page once under AppTest with the runner in
collect mode, which also imports every page's modules and draws each page once, so the
first learners' pages do not pay for that; the jobs it lists are queued behind any
learner's. The server answers its health check, which a proxy waits for, once the worker
is ready, the libraries of the real-model page are imported (or after ENGINE_WAIT_S) and
every common view has its first numbers (a comparison's memory; at most
DEMO_WARM_BEFORE_LISTEN seconds, the terminal saying about how long it expects; the views
whose first numbers alone take over LONG_FIRST_NUMBERS_S are measured next; those whose
whole run is estimated within WHOLE_VIEW_S are waited for whole): a class that arrives
with the health check then finds its numbers in the store, instead of twenty pages
waiting for a dozen first runs. The other timed steps go on once it listens, as
background runs that wait while a learner is here and whose steps give way at once (the
service's preemption); their times fill in on the pages meanwhile. Then, whenever no
learner has asked for a run or drawn a page for a few seconds, the server measures the
neighbours of every demo page's defaults (each slider one step either way, listed by a
child process at the lowest priority), so that a learner's first move from the defaults
is served from the store.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
# "compare,timeline": warm those pages only (by address; "home" is the home page), for a
# server whose learners use a few pages, or a replica that shares the warming.
PAGES_ENV = "DEMO_WARM_PAGES"
# Where the warm-up says how far it is (default: warm-up.json in DATA_DIR), for operators
# and for benchmarks that measure a server once its start-up work is done.
STATUS_ENV = "DEMO_WARM_STATUS"
# How long the server waits for the engine's worker before it listens anyway (a worker
# that does not start is started again by the first run, which says why it failed).
ENGINE_WAIT_S = 60.0
# Seconds the server waits at most, once its engine is ready, for the common views to be
# measured before it listens; "0" listens at once (a replica whose store another server
# warms, or a test server).
LISTEN_WAIT_ENV = "DEMO_WARM_BEFORE_LISTEN"
LISTEN_WAIT_S = 240.0
# A common view whose first numbers alone are estimated longer than this is not waited
# for: a lesson's large model, the what-fits search. Measured next, after the server
# opens; a learner who opens one meanwhile joins its run under way.
LONG_FIRST_NUMBERS_S = 10.0
# A common view whose whole run (a comparison's timed steps too) is estimated at most this
# long is measured whole before the server listens: its first learners find it complete in
# the store, as on a warm server, instead of joining its timed steps while their page draws.
WHOLE_VIEW_S = 5.0
log = logging.getLogger(__name__)
# What Streamlit says when a page runs outside a browser session, as the warm-up's AppTest
# runs do before the server listens ("Thread 'MainThread': missing ScriptRunContext! This
# warning can be ignored when running in bare mode.", "No runtime found, using
# MemoryCacheStorageManager"): expected there, and read by a person at the terminal as
# errors. Only these lines are dropped, and only while the warm-up draws pages.
FRAMEWORK_NOISE = ("missing ScriptRunContext", "No runtime found")
NOISY_LOGGERS = ("streamlit.runtime.scriptrunner_utils.script_run_context",
                 "streamlit.runtime.caching.cache_data_api",
                 "streamlit.runtime.caching.cache_resource_api")


# Said by Streamlit when `streamlit run` parses its flags after the warm-up's AppTest runs
# read the config with the defaults: nothing was served before, nothing needs a restart.
RESTART_NOISE = "An update to the [server] config option section was detected"


class _DropLines(logging.Filter):
    """Drops the log lines that contain any of `texts`; every other line passes."""

    def __init__(self, *texts: str) -> None:
        super().__init__()
        self.texts = texts

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(text in message for text in self.texts)


@contextlib.contextmanager
def framework_noise_dropped() -> Iterator[None]:
    """Drop Streamlit's bare-mode warnings (FRAMEWORK_NOISE) while pages are drawn before
    the server listens; every other line of those loggers still shows."""
    drop = _DropLines(*FRAMEWORK_NOISE)
    loggers = [logging.getLogger(name) for name in NOISY_LOGGERS]
    for logger in loggers:
        logger.addFilter(drop)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(drop)


def warm_pages() -> set[str] | None:
    """The page addresses DEMO_WARM_PAGES names ("" for the home page), or None: all."""
    value = os.environ.get(PAGES_ENV, "").strip()
    if not value:
        return None
    names = (part.strip().strip("/") for part in value.split(","))
    return {"" if name == "home" else name for name in names if name}


def warm_views() -> list[tuple[str, dict[str, str]]]:
    """(page script, query) of the common views: every demo page and the home page at
    their defaults, and every lesson's demo link; only those on the pages DEMO_WARM_PAGES
    names, when it names some."""
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
    if (pages := warm_pages()) is not None:
        if unknown := sorted(pages - scripts.keys()):
            log.warning("%s names no page at %s", PAGES_ENV, ", ".join(unknown))
        chosen = {scripts[address] for address in pages if address in scripts}
        views = [view for view in views if view[0] in chosen]
    return views


def _collect(script: str, query: dict[str, str]) -> tuple[list[dict], Any]:
    """The requests of the jobs one view runs (in collect mode), and its AppTest."""
    from ui import demo_runner

    at = _app_test(script, query)
    demo_runner.collected.clear()
    try:
        at.run()
    except Exception:  # noqa: BLE001 - one broken view must not stop the warm-up
        log.exception("warm-up: %s %s failed", script, query)
    return [job.request() for job in demo_runner.collected], at


def neighbour_keys(script: str = "") -> set[str] | None:
    """The sliders of the page `script` whose neighbours are measured while idle: every
    one (None), unless DEMO_WARM_NEIGHBOURS names some, on every page ("layers,batch") or
    on one ("compare:layers,curves:batch"; a page by its address); "0" is none."""
    value = os.environ.get(NEIGHBOURS_ENV, "1").strip()
    if value in ("", "1"):
        return None
    if value == "0":
        return set()
    page = Path(script).stem.replace("_", "-")
    keys = set()
    for entry in (part.strip() for part in value.split(",")):
        where, _, key = entry.rpartition(":")
        if not where or where == page:
            keys.add(key)
    return keys


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
    each page under AppTest with the runner collecting instead of running. The collect
    mode is process-wide while it runs: call it in a child process, or in the server's
    before it listens."""
    from ui.demo_runner import COLLECT_ENV

    before = os.environ.get(COLLECT_ENV)
    os.environ[COLLECT_ENV] = "1"
    try:
        return _collect_views(neighbours)
    finally:  # the server's own pages run for real once it listens
        if before is None:
            del os.environ[COLLECT_ENV]
        else:
            os.environ[COLLECT_ENV] = before


def _app_test(script: str, query: dict[str, str]) -> Any:
    """A page (script and query) under AppTest, in this process."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / script), default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    return at


def draw_views() -> None:
    """Draw every common view once with its results, or its first numbers while its
    timed steps are still under way, in this process (AppTest; the runner draws what
    there is without waiting or joining a run): the first drawing of each chart and table
    (Plotly's figure code, the tables' Arrow) happens here, not in the first learners'
    pages, whose chart pages took 0.9 s on a fresh server against 0.3 s once warm."""
    from ui.demo_runner import DRAW_ONCE_ENV

    os.environ[DRAW_ONCE_ENV] = "1"
    try:
        for script, query in warm_views():
            try:
                _app_test(script, query).run()
            except Exception:  # noqa: BLE001 - a page's own error shows on that page
                log.exception("warm-up: drawing %s %s failed", script, query)
    finally:  # the server's own pages wait for their runs once it listens
        del os.environ[DRAW_ONCE_ENV]


def _collect_views(neighbours: bool) -> dict[str, list]:
    requests: list[dict] = []
    moves: list[dict] = []
    neighbour_views: list[list] = []
    for script, query in warm_views():
        found, at = _collect(script, query)
        requests += [r for r in found if r not in requests]
        if not neighbours or not script.startswith("pages/demos/") or query:
            continue
        for move in slider_neighbours(at, neighbour_keys(script)):
            moved, _ = _collect(script, move)
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


def _report(state: str, **counts: int | list[str]) -> None:
    """Write the warm-up's state ("listing", "defaults", "neighbours", "done", "failed"),
    its counts of runs and the reasons of those that failed; a disk that refuses only
    costs the report."""
    path = status_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(path.name + ".part")
        part.write_text(json.dumps({"state": state, "pid": os.getpid(),
                                    "time": time.time(), **counts}))
        part.replace(path)
    except OSError:
        log.warning("warm-up: could not write %s", path, exc_info=True)


def _finish(tickets: list[Any]) -> list[str]:
    """Wait for the tickets' runs; the reason of each that failed (each logged), as the
    worker names it ("time-limit", "memory-limit", "crashed", ...)."""
    reasons = []
    for ticket in tickets:
        ticket.wait()
        if ticket.error is not None:
            reasons.append(str(getattr(ticket.error, "reason", "error")))
            log.warning("warm-up: %r failed: %s %s", ticket.job, ticket.error,
                        getattr(ticket.error, "numbers", {}))
    return reasons


def _queue_views(service: Any, found: dict[str, list]) -> list[Any]:
    """Queue the common views' runs (collect_warm_jobs' "jobs") for the warm-up; their
    tickets."""
    from serving.jobs import Job

    return service.warm(Job.from_request(request) for request in found["jobs"])


def prime_pages(service: Any) -> list[Any] | None:
    """In the server's process before it listens: run every common view once (AppTest,
    collect mode), which imports the pages' modules and draws each page's frame, and queue
    the runs they list for the warm-up. Their tickets, or None when listing failed (a
    child process lists them then)."""
    _report("listing")
    try:
        return _queue_views(service, collect_warm_jobs(neighbours=False))
    except Exception:  # noqa: BLE001 - the warm-up lists them again in a child process
        log.exception("warm-up: could not list the views' runs in the server's process")
        return None


def listen_wait_s() -> float:
    """DEMO_WARM_BEFORE_LISTEN: seconds at most to wait for the common views to be
    measured before listening (LISTEN_WAIT_S when unset or not a number)."""
    try:
        return max(0.0, float(os.environ.get(LISTEN_WAIT_ENV, LISTEN_WAIT_S)))
    except ValueError:
        log.warning("%s is not a number of seconds; waiting %.0f s", LISTEN_WAIT_ENV,
                    LISTEN_WAIT_S)
        return LISTEN_WAIT_S


PROGRESS_EVERY_S = 20.0  # the terminal hears how far the measuring is this often


def wait_for_common_views(tickets: list[Any], limit_s: float,
                          expected: Callable[[list[Any]], float] | None = None,
                          meanwhile: Callable[[], None] | None = None) -> float | None:
    """Wait (at most `limit_s`) until every ticket's run shows its first numbers (a
    comparison's memory, any other run's result; or its failure; an AwaitedView's whole
    run, where it is one): a class that comes with the health check then finds each
    common view's numbers in the store. The other timed steps go on after the server
    opens, as the warm-up's background runs, each step giving way at once to a learner.
    The seconds waited, or None when some had no numbers in time. The operator is told
    on stderr why the server does not answer yet and for about how long
    (`expected(tickets)`: the service's estimate for those, which follows the steps it
    measures meanwhile: said again every PROGRESS_EVERY_S), and when it does (the terminal
    of `make run`). `meanwhile()` runs once half of them have their numbers (the longest
    come last: the scheduler goes shortest first step first), on this process's core
    while the engine measures the rest on the other."""
    began = time.monotonic()
    missing = sum(not ticket.has_numbers for ticket in tickets)
    if missing and limit_s > 0:
        about = (f"about {expected(tickets):.0f} s, " if expected is not None else "")
        whole = sum(getattr(ticket, "whole", False) for ticket in tickets)
        quickest = f" (the quickest {whole} with their times)" if whole else ""
        print(f"Measuring the first numbers of the {missing} demo views a class opens first"
              f"{quickest} before the server opens (an empty result store: a first start "
              f"or a new engine): {about}at most {limit_s:.0f} s; the other timed steps go "
              f"on once it is open, giving way to learners. {LISTEN_WAIT_ENV}=0 opens at "
              f"once.", file=sys.stderr, flush=True)
    told = began
    while not all(ticket.has_numbers for ticket in tickets):
        if meanwhile is not None and 2 * sum(t.has_numbers for t in tickets) >= len(tickets):
            meanwhile()
            meanwhile = None
            continue
        if expected is not None and time.monotonic() - told >= PROGRESS_EVERY_S:
            told = time.monotonic()
            left = [ticket for ticket in tickets if not ticket.has_numbers]
            print(f"{len(tickets) - len(left)} of {len(tickets)} views measured after "
                  f"{told - began:.0f} s; about {expected(left):.0f} s left at the speed "
                  f"measured so far.", file=sys.stderr, flush=True)
        if time.monotonic() - began >= limit_s:
            missing = sum(not ticket.has_numbers for ticket in tickets)
            log.warning("%d of the common views had no numbers after %.0f s; serving "
                        "anyway", missing, limit_s)
            return None
        time.sleep(0.1)
    if meanwhile is not None:
        meanwhile()
    waited = time.monotonic() - began
    if missing:
        print(f"The common views' numbers measured in {waited:.0f} s; the server "
              f"opens.", file=sys.stderr, flush=True)
    return waited


def _warm_store(tickets: list[Any] | None = None) -> None:
    """The common views first (their runs queued before the server listened, or listed
    here by a child process); the slider steps next to the defaults are listed (a minute
    of AppTest runs) only once those are measured and no learner is waiting."""
    from serving.jobs import Job
    from serving.service import get_service

    service = get_service()
    if tickets is None:
        _report("listing")
        found = _collected("--collect-warm-jobs")
        if found is None:
            _report("failed")
            return
        tickets = _queue_views(service, found)
    _report("defaults", runs=len(tickets))
    reasons = _finish(tickets)
    counts = {"runs": len(tickets), "failed": len(reasons), "failed_reasons": reasons}
    if os.environ.get(NEIGHBOURS_ENV, "1").strip() == "0":
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
    idle_reasons = _finish(idle)
    _report("done", **counts, idle_runs=len(idle), idle_failed=len(idle_reasons),
            idle_failed_reasons=idle_reasons)


def first_numbers_waited_for(service: Any, tickets: list[Any]) -> list[Any]:
    """The warm-up's runs the server waits for before it listens: each view's first
    numbers, not a page's later parts (the pictures' costs and size sweep, drawn below its
    memory), and none whose first numbers alone take over LONG_FIRST_NUMBERS_S (said on
    the terminal: they are measured after it opens)."""
    first = [ticket for ticket in tickets if not ticket.job.later_part()]
    short = [ticket for ticket in first
             if service.first_numbers_seconds([ticket.job]) <= LONG_FIRST_NUMBERS_S]
    if len(short) < len(first):
        print(f"{len(first) - len(short)} of the common views take longer than "
              f"{LONG_FIRST_NUMBERS_S:.0f} s each to their first numbers: they are "
              f"measured after the server opens.", file=sys.stderr, flush=True)
    return short


@dataclass(frozen=True)
class AwaitedView:
    """A common view the server waits for before it listens: its first numbers, or
    (`whole`) its whole run."""

    ticket: Any
    whole: bool

    @property
    def job(self) -> Any:
        return self.ticket.job

    @property
    def has_numbers(self) -> bool:
        return self.ticket.done if self.whole else self.ticket.has_numbers


def views_waited_for(service: Any, tickets: list[Any]) -> list[AwaitedView]:
    """The common views the server waits for (`first_numbers_waited_for`), those whose
    whole run is estimated within WHOLE_VIEW_S whole; the service runs their steps before
    the rest of the warm-up's."""
    views = [AwaitedView(ticket, service.estimate(ticket.job) <= WHOLE_VIEW_S)
             for ticket in first_numbers_waited_for(service, tickets)]
    service.before_listening([v.ticket for v in views if not v.whole],
                             [v.ticket for v in views if v.whole])
    return views


def seconds_left(service: Any, views: list[AwaitedView]) -> float:
    """The service's estimate of the wait for `views`: first numbers, or whole runs."""
    return (service.first_numbers_seconds(v.job for v in views if not v.whole)
            + sum(service.estimate(v.job) for v in views if v.whole))


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
    from streamlit.web import cli

    with framework_noise_dropped():
        _before_listening()
    logging.getLogger("streamlit.config").addFilter(_DropLines(RESTART_NOISE))
    sys.argv = ["streamlit", "run", str(APP), *argv]
    cli.main(prog_name="streamlit")


def _before_listening() -> None:
    """Everything the server does before it listens: refuse a lost key, start the demo
    service and the status-list publisher, import the libraries, list, measure and draw
    the common views."""
    from streamlit.runtime.pages_manager import PagesManager

    from model_classes.causal_lm import load_libraries
    from quiz.service import startup_check
    from quiz.status_list import publish_forever
    from serving.service import get_service
    from storage.location import data_dir
    from ui.badge_download import cache_status_lists
    from ui.query import install_limit_notice

    if status := startup_check():  # a lost signing key or database: refuse, and say why
        sys.exit(status)
    install_limit_notice()  # a link over Streamlit's limits is reported, not ignored
    cache_status_lists()  # the served status lists say how long a cache may keep them
    service = get_service()  # the scheduler, and the worker process warming its engine
    threading.Thread(target=publish_forever, args=(data_dir, threading.Event()),
                     name="status-lists", daemon=True).start()  # revocations, served
    # Listen once a learner's first demo can run, with the libraries the real-model page
    # imports loaded meanwhile, the pages drawn once, the common views measured and drawn
    # once with their results.
    libraries = threading.Thread(target=load_libraries, name="import-libraries",
                                 daemon=True)
    libraries.start()
    tickets = None
    if os.environ.get(WARM_ENV, "1") != "0":
        tickets = prime_pages(service)
        threading.Thread(target=_warm_store, args=(tickets,), name="warm-store",
                         daemon=True).start()
    waited = wait_for_engine(service)
    libraries.join(max(ENGINE_WAIT_S - (waited or ENGINE_WAIT_S), 1.0))
    if tickets and waited is not None:
        # The views drawn once while the longest first numbers are still measured.
        wait_for_common_views(views_waited_for(service, tickets), listen_wait_s(),
                              lambda waiting: seconds_left(service, waiting),
                              meanwhile=draw_views)
    PagesManager.uses_pages_directory = False  # after the AppTest runs, which reset it


if __name__ == "__main__":
    main(sys.argv[1:])
