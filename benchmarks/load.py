"""N simulated learners opening the common views at once, over Streamlit's own websocket
protocol (BackMsg rerun_script → ForwardMsg deltas ... script_finished), against a real
server whose result store was warmed first.

Per N it reports two times, each as p50 / p95 seconds from the request:

* results shown: the first delta that carries a result (a metric, a table, a data frame or
  a chart), i.e. when the learner sees numbers (measured ones: the compare page's
  predicted peaks, drawn while a new config is measured, do not count);
* page finished: script_finished, the whole page drawn (sidebar and charts included);

and errors (an exception on the page or a failed run), time-outs, the machine's load
average around each round (the CPUs are shared: the figures mean little without it) and
the server's memory (its process and the worker) at start, after the warm-up and after
the rounds. A first round opens each view alone, one after the other: what one page run
costs without contention.

First moves: once the server has been idle long enough to measure the slider steps next
to every demo page's defaults, each such view (one slider one step either way, as a
learner's first move) is opened once in a new session; the share served from the store
(results without a wait notice) is recorded with its times.

A class arriving at a freshly started server (`--fresh-class N`): a new server on an
empty data folder, its warm-up just begun, and N learners opening the common views at
once as soon as it answers its health check (learner i opens view i mod the number of
views): the first numbers each learner sees, p50 / p95, then the same N again once the
warm-up is done, for the warm figures of the same run; the server's time to its health
check (it waits for its engine's worker) and its processes' CPU time during each class.

    python -m benchmarks.load [--counts 5,10,20,40] [--rounds 3] [--data-dir DIR]
                              [--out-prefix PATH] [--first-moves-only]
    python -m benchmarks.load --fresh-class 20 [--busy 2] [--out-prefix PATH]

writes benchmarks/load.json and load.md (--fresh-class: load-fresh-class.json and .md).
--busy N runs N busy processes (a Python loop each) beside the server the whole time, as
other work on the machine would, and says so in the report.
--data-dir keeps the result store between runs (warming it is then quick); --out-prefix
writes PATH.json / PATH.md instead. A view the server does not warm (the compiler budget
page) is skipped once the server's warm-up has finished its defaults, and named in the
report.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.asyncio.client import connect

from benchmarks.load_waits import (
    DONE,
    WAIT_CAP_S,
    Told,
    Waited,
    estimate_errors,
    estimate_views,
    told_in,
    wait_listening,
    wait_state,
)
from tests.helpers import ROOT, free_port
from ui.demo_standins import PREDICTED_DELTA
from ui.navigation import PAGES
from ui.server import STATUS_ENV, listen_wait_s, warm_views

OUT = Path(__file__).with_name("load")
FRESH_OUT = Path(__file__).with_name("load-fresh-class")
TIMEOUT_S = 60.0
# The elements that show a result (the page's text, widgets and notices come before).
RESULT_ELEMENTS = {"metric", "table", "dataframe", "plotly_chart", "vega_lite_chart"}
View = tuple[str, dict[str, str]]


@dataclass(frozen=True)
class Opened:
    results_s: float | None  # first result element; None when the page drew none
    finished_s: float
    status: str  # "ok", "error" or "timeout"
    waited: bool = False  # a run was waited for (its Cancel button showed)
    error: str = ""  # the page's exception, if it showed one
    told: Told | None = None  # its first waiting notice, and when its run started


def _page_name(script: str) -> str:
    return next(spec.url_path for spec in PAGES if spec.file == script)


def view_text(view: View) -> str:
    script, query = view
    return f"/{_page_name(script)}" + (f"?{urlencode(query)}" if query else "")


async def open_view(port: int, view: View, timeout_s: float = TIMEOUT_S) -> Opened:
    """Open one view in a new session and time its first result and its end."""
    script, query = view
    start = time.monotonic()
    first: float | None = None
    waited = False
    told: Told | None = None
    started: float | None = None

    def opened(status: str, error: str = "") -> Opened:
        telling = told and Told(told.shown_s, told.ahead, told.wait_s, told.run_s,
                                started, first)
        return Opened(first, time.monotonic() - start, status, waited, error, telling)
    try:
        async with connect(f"ws://127.0.0.1:{port}/_stcore/stream", max_size=2**26,
                           subprotocols=["streamlit"]) as ws:
            back = BackMsg()
            back.rerun_script.query_string = urlencode(query)
            back.rerun_script.page_name = _page_name(script)
            await ws.send(back.SerializeToString())
            error = ""
            async with asyncio.timeout(timeout_s):
                while True:
                    msg = ForwardMsg()
                    msg.ParseFromString(await ws.recv())
                    kind = msg.WhichOneof("type")
                    if kind == "delta":
                        element = msg.delta.new_element.WhichOneof("type")
                        if element == "exception" and not error:
                            shown = msg.delta.new_element.exception
                            error = f"{shown.type}: {shown.message}"[:300]
                        waited |= (element == "button"
                                   and msg.delta.new_element.button.label == "Cancel")
                        if element == "alert" and told is None:
                            told = told_in(msg.delta.new_element.alert.body,
                                           time.monotonic() - start)
                        if element == "progress" and told is not None and started is None:
                            started = time.monotonic() - start
                        # The memory model's predicted peaks (ui.demo_standins) are no
                        # measurement: the first numbers are the measured ones.
                        if (first is None and element in RESULT_ELEMENTS
                                and not (element == "metric"
                                         and msg.delta.new_element.metric.delta
                                         == PREDICTED_DELTA)):
                            first = time.monotonic() - start
                        continue
                    if kind != "script_finished":
                        continue
                    if msg.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
                        return opened("error" if error else "ok", error)
                    if msg.script_finished == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                        return opened("error", error)
    except TimeoutError:  # still waiting for its run, or never got that far
        return opened("timeout")
    except OSError:
        return opened("error")


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and its children."""
    out = subprocess.run(["ps", "-o", "rss=", "--ppid", str(pid), "-p", str(pid)],
                         capture_output=True, text=True).stdout
    return sum(int(line) * 1024 for line in out.split())


def tree_cpu_seconds(pid: int) -> int:
    """CPU seconds a process and its children (the engine's worker, the warm-up's lister)
    have used so far."""
    out = subprocess.run(["ps", "-o", "times=", "--ppid", str(pid), "-p", str(pid)],
                         capture_output=True, text=True).stdout
    return sum(int(line) for line in out.split())


async def round_of(port: int, n: int, views: list[View],
                   timeout_s: float = TIMEOUT_S) -> list[Opened]:
    return await asyncio.gather(*(open_view(port, views[i % len(views)], timeout_s)
                                  for i in range(n)))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(opened: list[Opened]) -> dict:
    """p50 / p95 of both times over the runs that finished well, errors, time-outs."""
    ok = [o for o in opened if o.status == "ok"]
    shown = [o.results_s for o in ok if o.results_s is not None]
    finished = [o.finished_s for o in ok]

    def stat(values: list[float], q: float) -> float | None:
        return round(percentile(values, q), 2) if values else None

    return {"results_p50_s": stat(shown, 0.5), "results_p95_s": stat(shown, 0.95),
            "finished_p50_s": stat(finished, 0.5), "finished_p95_s": stat(finished, 0.95),
            "errors": sum(o.status == "error" for o in opened),
            "timeouts": sum(o.status == "timeout" for o in opened),
            "error_texts": sorted({o.error for o in opened if o.error})}


def _commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True).stdout.strip()


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


# The server's warm-up states once its defaults' runs are all finished (ui.server._report).
PAST_DEFAULTS = ("neighbours", "done", "failed")


def warm_state(status: Path) -> str | None:
    """The server's warm-up state from its status file (None: not written yet); its
    second "listing" (the neighbours', once the defaults' runs are counted) reads
    "neighbours"."""
    try:
        data = json.loads(status.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("state") == "listing" and "runs" in data:
        return "neighbours"
    return data.get("state")


def warm_up(views: list[View], shows_results: Callable[[View], bool], status: Path,
            limit_s: float = 1800.0, pause_s: float = 10.0) -> tuple[float, list[View]]:
    """Wait for the server's background warm-up: open every view, one at a time, until
    each shows its results (a view over the click threshold shows a button instead, and
    its run is queued by the warm-up all the same). A view still without results once the
    server has finished its defaults' runs (`status`) is one it does not warm (the
    compiler budget page: each of its points compiles): it is skipped. Seconds waited,
    and the skipped views."""
    start = time.monotonic()
    waiting = list(views)
    while waiting and time.monotonic() - start < limit_s:
        finished = warm_state(status) in PAST_DEFAULTS  # read before the views are opened
        waiting = [view for view in waiting if not shows_results(view)]
        if waiting and finished:
            print("not warmed by the server, skipped: "
                  + ", ".join(view_text(v) for v in waiting), flush=True)
            return time.monotonic() - start, waiting
        if waiting:
            time.sleep(pause_s)
    if waiting:
        raise SystemExit(f"the store did not warm in {limit_s:.0f} s: "
                         + ", ".join(view_text(v) for v in waiting))
    return time.monotonic() - start, []


def neighbour_views() -> tuple[list[View], int]:
    """The views of a learner's first move: each slider of each demo page one step either
    way of its default (what the server measures while idle), listed by the server's own
    collector; and how many runs the server will make for the warm-up in all."""
    out = subprocess.run([sys.executable, "-m", "ui.server", "--collect-neighbour-jobs"],
                         cwd=ROOT, capture_output=True, text=True, check=True,
                         timeout=900).stdout
    found = json.loads(out.strip().splitlines()[-1])
    views = [(script, query) for script, query in found["neighbour_views"]]
    return views, len(found["jobs"]) + len(found["idle_jobs"])


def first_moves(port: int, views: list[View]) -> dict:
    """Each first-move view opened once, one after the other, in a new session: the
    share served from the store (results with no wait), and the times."""
    opened = [asyncio.run(open_view(port, view)) for view in views]
    served = [o for o in opened if o.status == "ok" and o.results_s is not None
              and not o.waited]
    shown = [o.results_s for o in opened if o.results_s is not None]
    return {"views": len(views), "served_from_store": len(served),
            "share": round(len(served) / len(views), 3) if views else None,
            "results_p50_s": round(statistics.median(shown), 2) if shown else None,
            "results_max_s": round(max(shown), 2) if shown else None,
            "waited": [view_text(v) for v, o in zip(views, opened, strict=True)
                       if o.waited or o.results_s is None]}


def solo_round(port: int, views: list[View], repeats: int = 3) -> list[dict]:
    """Each view opened alone, one after the other: median seconds per view."""
    rows = []
    for view in views:
        opened = [asyncio.run(open_view(port, view)) for _ in range(repeats)]
        shown = [o.results_s for o in opened if o.results_s is not None]
        rows.append({"view": view_text(view),
                     "results_s": round(statistics.median(shown), 2) if shown else None,
                     "finished_s": round(statistics.median(o.finished_s for o in opened), 2),
                     "errors": sum(o.status != "ok" for o in opened)})
    return rows


@contextmanager
def busy_processes(n: int) -> Iterator[None]:
    """N processes that keep a core busy each until the block ends."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for process in busy:
            process.kill()
            process.wait(30)


@contextmanager
def serving(data_dir: str, deadline: float) -> Iterator[tuple[subprocess.Popen, int, float]]:
    """The app server (`python -m ui.server`, its warm-up on) on a free port with this
    data folder, answering its health check (waited for while its warm-up goes on, until
    the benchmark's `deadline`), its port and the seconds it took to answer; stopped
    afterwards."""
    port = free_port()
    began = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "ui.server", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true"],
        cwd=ROOT, env={**os.environ, "DATA_DIR": data_dir}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_listening(f"http://127.0.0.1:{port}", process, Path(data_dir) / "warm-up.json",
                       deadline)
        healthy_after = round(time.monotonic() - began, 1)
        print(f"server pid {process.pid} on port {port}, healthy after {healthy_after} s",
              flush=True)
        yield process, port, healthy_after
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)


def first_numbers(opened: list[Opened]) -> dict:
    """p50 / p95 of the first numbers over every learner, one who saw none within the
    time-out counted at TIMEOUT_S (the pooled summary leaves such pages out)."""
    times = [o.results_s if o.results_s is not None else TIMEOUT_S for o in opened]
    return {"first_numbers_p50_s": round(percentile(times, 0.5), 2),
            "first_numbers_p95_s": round(percentile(times, 0.95), 2),
            "no_numbers_within_timeout": sum(o.results_s is None for o in opened)}


def by_view(opened: list[Opened], views: list[View]) -> dict[str, list[float | None]]:
    """Each view's first numbers (seconds, None: none within the time-out), learner i
    having opened view i mod the number of views."""
    times: dict[str, list[float | None]] = {}
    for i, o in enumerate(opened):
        times.setdefault(view_text(views[i % len(views)]), []).append(o.results_s)
    return times


def fresh_class(n: int, views: list[View], deadline: float, estimates: int = 0) -> dict:
    """N learners at once on a server started a moment ago (empty store, warm-up just
    begun), then N again once its warm-up of the common views is done (or the
    benchmark's `deadline` passed); then `estimates` learners at once on settings no
    store holds, their waiting notices against their real waits."""
    with (tempfile.TemporaryDirectory() as data,
          serving(data, deadline) as (server, port, healthy_after)):
        started = time.monotonic()
        load_before, cpu_before = load_average(), tree_cpu_seconds(server.pid)
        fresh = asyncio.run(round_of(port, n, views))
        fresh_row = {**summary(fresh), **first_numbers(fresh), "load_before": load_before,
                     "load_after": load_average(),
                     "healthy_after_s": healthy_after,
                     "server_cpu_s_at_health": cpu_before,
                     "server_cpu_s_after": tree_cpu_seconds(server.pid),
                     "state_after": warm_state(Path(data) / "warm-up.json") or "",
                     "waited": sum(o.waited for o in fresh),
                     "by_view": by_view(fresh, views)}
        print("fresh", fresh_row, flush=True)
        defaults = wait_state(Path(data) / "warm-up.json", PAST_DEFAULTS, deadline,
                              state_of=warm_state)
        warm_seconds = time.monotonic() - started
        load_before, cpu_before = load_average(), tree_cpu_seconds(server.pid)
        warm = asyncio.run(round_of(port, n, views))
        warm_row = {**summary(warm), **first_numbers(warm), "load_before": load_before,
                    "load_after": load_average(), "server_cpu_s_at_health": cpu_before,
                    "server_cpu_s_after": tree_cpu_seconds(server.pid),
                    "by_view": by_view(warm, views)}
        print("warm", warm_row, flush=True)
        told = estimate_round(port, estimates) if estimates else None
    return {"learners": n, "fresh": fresh_row, "warm": warm_row,
            "defaults_warmed_after_s": round(warm_seconds, 1),
            "waits": {"defaults": defaults.record()}, "estimates": told}


def estimate_round(port: int, n: int) -> dict:
    """N learners at once on settings no store holds: their pages' first waiting notice
    against when their runs started (benchmarks.load_waits.estimate_errors)."""
    load_before = load_average()
    opened = asyncio.run(round_of(port, n, estimate_views(n), timeout_s=600.0))
    row = {**estimate_errors([o.told for o in opened]), "load_before": load_before,
           "load_after": load_average(), "errors": sum(o.status == "error" for o in opened),
           "timeouts": sum(o.status == "timeout" for o in opened)}
    print("estimates", row, flush=True)
    return row


def fresh_markdown(report: dict) -> str:
    fresh, warm = report["fresh"], report["warm"]
    busy = report.get("busy_processes", 0)
    beside = (f", beside {busy} busy processes (a Python loop each) the whole time"
              if busy else "")

    def row(name: str, r: dict) -> str:
        return (f"| {name} | {r['first_numbers_p50_s']} / {r['first_numbers_p95_s']} | "
                f"{r['no_numbers_within_timeout']} | {r['finished_p50_s']} / "
                f"{r['finished_p95_s']} | {r['errors']} | {r['timeouts']} | "
                f"{r['load_before']} → {r['load_after']} |")

    lines = [
        f"A class of {report['learners']} arriving at a freshly started server (learner i "
        f"opens view i mod {len(report['views'])}, each in a new session, all at once)"
        f"{beside}:", "",
        "| server | first numbers p50 / p95 (s) | no numbers within 60 s | page finished "
        "p50 / p95 (s), finished pages | errors | time-outs | load avg before → after |",
        "|---|---|---|---|---|---|---|",
        row("fresh (started on an empty store, health check just answered)", fresh),
        row(f"the same server, its defaults warmed ({report['defaults_warmed_after_s']} s "
            "after its health check)", warm), "",
        f"First numbers count a learner who saw none within {TIMEOUT_S:.0f} s at "
        f"{TIMEOUT_S:.0f} s. {fresh['waited']} of the fresh class's pages waited for a run "
        f"(their Cancel button showed); the warm-up was at \"{fresh['state_after']}\" when "
        f"the class had its pages. The server was started at a load average of "
        f"{report.get('load_at_start', '?')} and answered its health check "
        f"{fresh['healthy_after_s']} s later (it waits for its engine's worker and for the "
        f"common views to be measured and drawn once, at most "
        f"{report.get('wait_before_listen_s', '?')} s); its processes' CPU time went from "
        f"{fresh['server_cpu_s_at_health']} to "
        f"{fresh['server_cpu_s_after']} s during the fresh class and from "
        f"{warm['server_cpu_s_at_health']} to {warm['server_cpu_s_after']} s during the warm "
        f"one. Commit {report['commit']}, {report['when']}, {report['cpus']} CPUs."]
    lines.append(waits_text(report))
    told = report.get("estimates")
    if told:
        lines.append(
            f"\nWaiting notices ({told['pages']} learners at once on compare settings no "
            f"store held, load {told['load_before']} → {told['load_after']}): "
            f"{told['told_a_wait']} pages told a wait and then started, "
            f"{told.get('said_no_estimate', 0)} said they had no estimate yet; the told "
            f"wait was "
            f"off by a factor of {told['factor_off_p50']} at p50, {told['factor_off_p95']} "
            f"at p95 (real ÷ told, median: {told['real_over_told_median']}).")
    slowest = sorted(((max(t if t is not None else TIMEOUT_S for t in times), view)
                      for view, times in fresh.get("by_view", {}).items()), reverse=True)
    if slowest:
        lines.append("\nThe fresh class's slowest views (first numbers, the slowest learner "
                     "of each): " + ", ".join(f"`{view}` {seconds:.1f} s"
                                             for seconds, view in slowest[:4]) + ".")
    return "\n".join(lines) + "\n"


def waits_text(report: dict) -> str:
    """The benchmark's waits for the server's warm-up, and the cap they were under."""
    waits = report.get("waits") or {}
    parts = [f"{name.replace('_', ' ')} {w['seconds']} s (warm-up at \"{w['state']}\""
             + ("; cut short by the cap" if w.get("capped") else "") + ")"
             for name, w in waits.items()]
    return (f"\nWaits for the server's warm-up (at most {report.get('wait_cap_s', '?')} s "
            "together): " + (", ".join(parts) or "none recorded") + ".")


def markdown(report: dict) -> str:
    lines = ["| learners | results shown p50 / p95 (s) | page finished p50 / p95 (s) | "
             "errors | time-outs | load avg before → after |", "|---|---|---|---|---|---|"]
    if not report["rounds"]:
        lines = ["(first moves only: no rounds of learners)"]
    lines += [f"| {r['learners']} | {r['results_p50_s']} / {r['results_p95_s']} | "
              f"{r['finished_p50_s']} / {r['finished_p95_s']} | {r['errors']} | "
              f"{r['timeouts']} | {r['load_before']} → {r['load_after']} |"
              for r in report["rounds"]]
    lines += ["", "One learner at a time (median of 3):", "",
              "| view | results shown (s) | page finished (s) |", "|---|---|---|"]
    lines += [f"| `{r['view']}` | {r['results_s']} | {r['finished_s']} |"
              for r in report["solo"]]
    moves = report.get("first_moves")
    if moves:
        lines.append(
            f"\nFirst moves from the defaults (each demo slider one step either way, "
            f"{moves['views']} views, after {report['idle_wait_seconds']} s of idle "
            f"measuring): {moves['served_from_store']} served from the store "
            f"({moves['share']:.0%}); results shown p50 {moves['results_p50_s']} s, "
            f"max {moves['results_max_s']} s.")
    memory = report["server_memory_mib"]
    lines.append(
        f"\nServer memory (process and worker): {memory['start']} MiB at start, "
        f"{memory['warm']} MiB after the warm-up, {memory['after']} MiB after the rounds. "
        f"Store warmed in {report['warm_up_seconds']} s. Commit {report['commit']}, "
        f"{report['when']}. {report['cpus']} CPUs; load "
        f"average {report['load_average_start']} at the start. Learner i opens view i mod "
        f"{len(report['views'])}, each in a new session; each N is "
        f"{report['rounds'][0]['rounds'] if report['rounds'] else 0} rounds, its times "
        f"pooled.")
    lines.append(waits_text(report))
    if report.get("not_warmed"):
        lines.append("\nNot measured (the server does not warm them, so a learner's first "
                     "visit runs them): " + ", ".join(f"`{v}`" for v in report["not_warmed"])
                     + ".")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--counts", default="5,10,20,40")
    parser.add_argument("--data-dir", help="keep the result store here between runs")
    parser.add_argument("--out-prefix")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="N busy processes beside the server the whole time")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per N, pooled")
    parser.add_argument("--first-moves-only", action="store_true",
                        help="the warm-up and the first moves, no rounds of learners")
    parser.add_argument("--fresh-class", type=int, metavar="N",
                        help="only N learners arriving at a freshly started server")
    parser.add_argument("--estimates", type=int, default=10, metavar="N",
                        help="with --fresh-class: N learners at once on settings no store "
                        "holds, their waiting notices against their real waits (0: none)")
    parser.add_argument("--wait-cap", type=float, default=WAIT_CAP_S, metavar="S",
                        help="seconds the waits for the server's warm-up take at most, "
                        "all together (reported)")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.wait_cap
    counts = [] if args.first_moves_only else [int(c) for c in args.counts.split(",")]
    views = warm_views()
    if args.fresh_class:
        with busy_processes(args.busy):
            if args.busy:
                time.sleep(60)  # the load average follows the busy processes first
            report = {"commit": _commit(), "when": time.strftime("%Y-%m-%d %H:%M"),
                      "views": [view_text(v) for v in views], "cpus": os.cpu_count(),
                      "busy_processes": args.busy, "load_at_start": load_average(),
                      "wait_before_listen_s": listen_wait_s(), "wait_cap_s": args.wait_cap,
                      **fresh_class(args.fresh_class, views, deadline, args.estimates)}
        out = args.out_prefix or str(FRESH_OUT)
        Path(out + ".json").write_text(json.dumps(report, indent=2) + "\n")
        text = fresh_markdown(report)
        Path(out + ".md").write_text(text)
        print(text)
        return 0
    moves_views, _ = neighbour_views()
    load_start = load_average()
    with ExitStack() as stack:
        data = args.data_dir or stack.enter_context(tempfile.TemporaryDirectory())
        process, port, listened = stack.enter_context(serving(data, deadline))
        start_rss = tree_rss(process.pid)
        status = Path(os.environ.get(STATUS_ENV) or Path(data) / "warm-up.json")
        warm_seconds, skipped = warm_up(
            views, lambda view: asyncio.run(open_view(port, view)).results_s is not None,
            status, limit_s=max(deadline - time.monotonic(), 0.0))
        views = [view for view in views if view not in skipped]
        idle = wait_state(status, DONE, deadline)  # the idle-time runs, all measured
        idle_seconds = idle.seconds
        moves = first_moves(port, moves_views)
        print(moves, flush=True)
        solo = solo_round(port, views)
        for row in solo:
            print(row, flush=True)
        warm_rss = tree_rss(process.pid)
        rows = []
        for n in counts:
            before = load_average()
            opened = []
            for _ in range(args.rounds):  # one p50 / p95 over every round's learners
                opened += asyncio.run(round_of(port, n, views))
            rows.append({"learners": n, "rounds": args.rounds, **summary(opened),
                         "load_before": before, "load_after": load_average()})
            print(rows[-1], flush=True)
        time.sleep(3)
        after_rss = tree_rss(process.pid)
    report = {"commit": _commit(), "when": time.strftime("%Y-%m-%d %H:%M"),
              "views": [view_text(v) for v in views], "cpus": os.cpu_count(),
              "not_warmed": [view_text(v) for v in skipped],
              "load_average_start": load_start, "warm_up_seconds": round(warm_seconds, 1),
              "idle_wait_seconds": round(idle_seconds), "first_moves": moves,
              "waits": {"listening": Waited(listened, None).record(),
                        "idle_runs": idle.record()}, "wait_cap_s": args.wait_cap,
              "server_memory_mib": {"start": round(start_rss / 2**20),
                                    "warm": round(warm_rss / 2**20),
                                    "after": round(after_rss / 2**20)},
              "solo": solo, "rounds": rows}
    out_prefix = args.out_prefix or str(OUT)
    Path(out_prefix + ".json").write_text(json.dumps(report, indent=2) + "\n")
    text = markdown(report)
    Path(out_prefix + ".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
