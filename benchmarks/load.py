"""N simulated learners opening the common views at once, over Streamlit's own websocket
protocol (BackMsg rerun_script → ForwardMsg ... script_finished), against a real server
whose result store was warmed first. Reports per N: p50 / p95 seconds from the request to
the end of the page run (its results drawn), errors (an exception on the page or a failed
run), time-outs, and the server's memory (its process and children) before and after.

    python -m benchmarks.load [--counts 5,10,20,40]   # writes benchmarks/load.json, load.md
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
from pathlib import Path
from urllib.parse import urlencode

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.asyncio.client import connect

from tests.helpers import ROOT, free_port, wait_healthy
from ui.navigation import PAGES
from ui.server import warm_views

OUT = Path(__file__).with_name("load.json")
TABLE = Path(__file__).with_name("load.md")
TIMEOUT_S = 60.0


def _page_name(script: str) -> str:
    return next(spec.url_path for spec in PAGES if spec.file == script)


async def open_view(port: int, page: str, query: dict[str, str]) -> tuple[float, str]:
    """Seconds until the page's run finished, and 'ok', 'error' or 'timeout'."""
    start = time.monotonic()
    try:
        async with connect(f"ws://127.0.0.1:{port}/_stcore/stream", max_size=2**26,
                           subprotocols=["streamlit"]) as ws:
            back = BackMsg()
            back.rerun_script.query_string = urlencode(query)
            back.rerun_script.page_name = page
            await ws.send(back.SerializeToString())
            error = False
            async with asyncio.timeout(TIMEOUT_S):
                while True:
                    msg = ForwardMsg()
                    msg.ParseFromString(await ws.recv())
                    kind = msg.WhichOneof("type")
                    if kind == "delta" and msg.delta.new_element.WhichOneof("type") == \
                            "exception":
                        error = True
                    if kind != "script_finished":
                        continue
                    if msg.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
                        return time.monotonic() - start, "error" if error else "ok"
                    if msg.script_finished == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                        return time.monotonic() - start, "error"
    except TimeoutError:
        return time.monotonic() - start, "timeout"
    except OSError:
        return time.monotonic() - start, "error"


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and its children."""
    total = 0
    out = subprocess.run(["ps", "-o", "rss=", "--ppid", str(pid), "-p", str(pid)],
                         capture_output=True, text=True).stdout
    for line in out.split():
        total += int(line) * 1024
    return total


async def round_of(port: int, n: int, views: list[tuple[str, dict[str, str]]]) -> list:
    jobs = [open_view(port, _page_name(views[i % len(views)][0]), views[i % len(views)][1])
            for i in range(n)]
    return await asyncio.gather(*jobs)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--counts", default="5,10,20,40")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",")]
    views = warm_views()
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "DATA_DIR": data}
        process = subprocess.Popen(
            [sys.executable, "-m", "ui.server", "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.headless", "true"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        try:
            wait_healthy(f"http://127.0.0.1:{port}", process)
            warm_start = time.monotonic()
            for _ in range(3):  # the warm-up: every view once, until each is served fast
                results = asyncio.run(round_of(port, len(views), views))
                if max(s for s, _ in results) < 2.0:
                    break
            warm_seconds = time.monotonic() - warm_start
            before = tree_rss(process.pid)
            rows = []
            for n in counts:
                results = asyncio.run(round_of(port, n, views))
                seconds = [s for s, status in results if status == "ok"]
                rows.append({
                    "learners": n,
                    "p50_s": round(statistics.median(seconds), 2) if seconds else None,
                    "p95_s": round(percentile(seconds, 0.95), 2) if seconds else None,
                    "errors": sum(status == "error" for _, status in results),
                    "timeouts": sum(status == "timeout" for _, status in results),
                })
                print(rows[-1], flush=True)
            time.sleep(3)
            after = tree_rss(process.pid)
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(30)
    report = {"views": [{"page": _page_name(s), "query": q} for s, q in views],
              "warm_up_seconds": round(warm_seconds, 1),
              "server_memory_before_mib": round(before / 2**20),
              "server_memory_after_mib": round(after / 2**20),
              "rounds": rows}
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    lines = ["| learners | p50 (s) | p95 (s) | errors | time-outs |", "|---|---|---|---|---|"]
    lines += [f"| {r['learners']} | {r['p50_s']} | {r['p95_s']} | {r['errors']} | "
              f"{r['timeouts']} |" for r in rows]
    lines.append(f"\nServer memory (process and worker): {report['server_memory_before_mib']} "
                 f"MiB before, {report['server_memory_after_mib']} MiB after; store warmed "
                 f"in {report['warm_up_seconds']} s. Views: "
                 + ", ".join(f"/{v['page']}" + (f"?{urlencode(v['query'])}" if v["query"]
                                                 else "") for v in report["views"]) + ".")
    TABLE.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
