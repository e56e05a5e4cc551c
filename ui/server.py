"""Start the app: `python -m ui.server [streamlit options]` is `streamlit run app.py`
with the st.navigation router alone in charge.

Until st.navigation has run once in a server process, Streamlit treats a folder named
`pages/` beside the entry point as a legacy multipage app, so the very first visitor of a
freshly started server who opens a deep link (/compare?layers=16, /verify?id=...) gets a
"Page not found" dialog over the right page (streamlit#8860, #9992). Every page here is
registered through st.navigation, so the legacy discovery is switched off before the
server starts.

The demo service starts with the server: its worker process (the engine, warm), and in
the background the result store is warmed for every demo page's defaults, the home page's
teaser and every lesson's demo link, so the common views are instant from the first
visitor. Which runs those views make is asked of the pages themselves: a child process
runs each page under AppTest with the runner in collect mode (`--collect-warm-jobs`), and
the jobs it lists are queued behind any learner's.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

# Idle OpenMP threads sleep instead of spinning: on a shared CPU, spinning threads of one
# demo slow every other process (and the next demo) down several times. Set before torch
# is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
WARM_ENV = "DEMO_WARM_STORE"  # "0" switches the start-up warm-up off
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


def collect_warm_jobs() -> list[dict]:
    """The jobs the common views run (their requests), found by running each page under
    AppTest with the runner collecting instead of running. Call in a child process."""
    os.environ["DEMO_RUNNER_COLLECT"] = "1"
    from streamlit.testing.v1 import AppTest

    from ui import demo_runner

    requests: list[dict] = []
    for script, query in warm_views():
        at = AppTest.from_file(str(ROOT / script), default_timeout=60)
        for key, value in query.items():
            at.query_params[key] = value
        demo_runner.collected.clear()
        try:
            at.run()
        except Exception:  # noqa: BLE001 - one broken view must not stop the warm-up
            log.exception("warm-up: %s %s failed", script, query)
        for job in demo_runner.collected:
            if job.request() not in requests:
                requests.append(job.request())
    return requests


def _warm_store() -> None:
    from demos.runtime.jobs import Job
    from demos.runtime.service import get_service

    service = get_service()
    try:
        out = subprocess.run([sys.executable, "-m", "ui.server", "--collect-warm-jobs"],
                             cwd=ROOT, capture_output=True, text=True, timeout=600,
                             check=True, preexec_fn=lambda: os.nice(10)).stdout
        requests = json.loads(out.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError, OSError):
        log.exception("warm-up: could not list the common views' runs")
        return
    service.warm(Job.from_request(request) for request in requests)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--collect-warm-jobs"]:
        print(json.dumps(collect_warm_jobs()))
        return
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.web import cli

    from demos.runtime.service import get_service
    from quiz.service import startup_check

    if status := startup_check():  # a lost signing key or database: refuse, and say why
        sys.exit(status)
    PagesManager.uses_pages_directory = False
    get_service()  # the scheduler, and the worker process warming its engine
    if os.environ.get(WARM_ENV, "1") != "0":
        threading.Thread(target=_warm_store, name="warm-store", daemon=True).start()
    sys.argv = ["streamlit", "run", str(APP), *argv]
    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main(sys.argv[1:])
