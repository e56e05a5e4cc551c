"""Browser latency of the compare demo at its default config, in headless Chromium, against
the course's requirement: after a slider move a learner sees numbers within a second.

Not a test: a benchmark. It starts its own server (`python -m ui.server`) on an empty
store, then measures
  * the server's time to open: from starting its process to its health check answering
    (its start-up draws the common views and measures their first numbers before it
    listens);
  * the cold first loads: the first learners' sessions (FIRST_LEARNERS, one after
    another) opening /compare on the fresh server, busy with its start-up warm-up, from
    a browser already running (its own start is not the server's);
  * then waits for that warm-up to end (the status file the server writes: every page's
    defaults, then the slider steps next to them, here those of `--neighbours`), and
    measures a learner's view of a server that is up:
  * first page load: a new browser session opening /compare until its first number is
    on screen, timed in the browser from the navigation's start (Playwright's own wait,
    which polls every 0.5 s by then, is kept beside it as `..._playwright_s`);
  * the first move from the defaults: one step right on the vocabulary slider (served
    from the store when the warm-up measured that step);
  * slider release -> numbers: more steps right (configs never seen before: a real
    measurement), each timed in the browser from the key press to
      - the first predicted numbers (the memory model's peaks, drawn at once, marked
        predicted, in their own frame),
      - the first measured numbers (the measured peak replacing the prediction),
      - new numbers (whichever of the two came first: the requirement's figure),
      - every time measured (the run has ended and the page is idle);
    so the prediction cannot hide a slow measurement;
  * the same slider steps beside `--busy` processes that keep a core busy each;
  * a cached config: the same slider moved back to configs seen a moment ago;
  * /plan beside /compare: a new session opening each until its first number shows (the
    planner's peak memory per GPU; `--plan` sets the planner's link, by default Llama 3.1
    70B fully fine-tuned on 16 H100s), quiet and again beside `--busy` busy processes;
    the planner's target is twice /compare's time.
Before the server starts, the machine's own speed: the default demo's memory part and
timed part outside the server (`demos.bench.machine_speed`), so a run on a slow day reads
against that day's steps. Each figure is written with its target, the busy processes
beside it and the 1-minute load average when it was taken, to
benchmarks/browser-latency.json.

    .venv/bin/python -m benchmarks.browser_latency [--runs 5] [--neighbours vocab] [--busy 2]

`--runs 1` is the quick run (one sample of each).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from playwright.sync_api import Page, sync_playwright

from tests.helpers import background_app, launch_chromium

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "browser-latency.json"
# The course's requirement (seconds; "quiet": no other work on the machine).
TARGETS = {
    "slider_to_new_numbers_s": 1.0,
    "slider_to_new_numbers_busy_s": 2.0,  # beside `--busy` busy processes
    "first_page_load_s": 1.5,
    "slider_to_every_time_measured_s": 3.0,
    "cached_config_s": 0.5,
    "server_open_s": 60.0,  # process start to health check, empty store
}
OPEN_LIMIT_S = 900.0
FIRST_LEARNERS = 3  # sessions timed on the freshly opened server, one after another
METRIC = '[data-testid="stMetricValue"]'
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
# What holds no number this run measured: the prediction's frame (ui.demo_standins), the
# previous result, dimmed (ui.demo_runner), and an element left from the script's last
# run that this run has not drawn again yet (Streamlit marks it stale).
STAND_INS = ('[class*="st-key-demo-predicted"], [class*="st-key-demo-previous"], '
             '[data-stale="true"]')
# Marks, in ms from the next key press, when a predicted number first shows, when the
# first measured number differs from `before` (checked on every change of the page), and
# when the run last ended (the page idle: every time measured).
WATCH = """([metric, standIns, before]) => {
    const marks = window.__latency = {};
    let pressed = null;
    document.addEventListener("keydown", () => { pressed = performance.now(); },
                              {capture: true, once: true});
    const check = () => {
        if (pressed === null) return;
        const now = performance.now() - pressed;
        if (marks.predicted === undefined
                && document.querySelector('[class*="st-key-demo-predicted"] ' + metric)) {
            marks.predicted = now;
        }
        if (marks.measured === undefined) {
            const first = [...document.querySelectorAll(metric)]
                .find((el) => el.closest(standIns) === null);
            if (first !== undefined && first.innerText !== before) marks.measured = now;
        }
        if (marks.measured !== undefined) observer.disconnect();
    };
    const observer = new MutationObserver(check);
    observer.observe(document.body, {subtree: true, childList: true, characterData: true});
    // The run's end: the last time the app's script state turned to "notRunning".
    const app = document.querySelector('[data-testid="stApp"]');
    new MutationObserver(() => {
        if (pressed !== null && app.dataset.testScriptState === "notRunning") {
            marks.idle = performance.now() - pressed;
        }
    }).observe(app, {attributes: true, attributeFilter: ["data-test-script-state"]});
}"""
MEASURED_TEXT = """([metric, standIns]) => {
    const first = [...document.querySelectorAll(metric)]
        .find((el) => el.closest(standIns) === null);
    return first === undefined ? null : first.innerText;
}"""


# In every new page: the time (ms from the navigation's start) of the first animation frame
# in which a number is on screen.
FIRST_PAINT = """(() => {
    const check = () => {
        const number = document.querySelector(%(metric)s);
        if (number !== null && number.getClientRects().length > 0) {
            window.__firstNumber = performance.now();
        } else {
            requestAnimationFrame(check);
        }
    };
    requestAnimationFrame(check);
})();"""


PLAN_QUERY = "model=llama-3.1-70b&gpu=h100&shards=16&tuning=full&seq=4096"
PLAN_TARGET_RATIO = 2.0  # /plan's first numbers within twice /compare's


class PageLoad(NamedTuple):
    painted: float  # navigation start to the first number on screen, timed in the browser
    playwright: float  # the same as Playwright's wait saw it (up to 0.5 s late: it polls)


def page_load(browser, url: str, path: str = "compare") -> PageLoad:
    """A new session (new browser context) opening `path` until its first number shows.
    Timed in the browser: from the navigation's start to the animation frame that first
    draws a number. Playwright's own wait polls at widening steps (0, 20, 50, 100, 100 ms,
    then every 500 ms), so past half a second it sees a number up to 0.5 s after it is on
    screen; its time is kept beside, as earlier runs measured it."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(FIRST_PAINT % {"metric": json.dumps(METRIC)})
    page = context.new_page()
    start = time.perf_counter()
    page.goto(f"{url}/{path}", wait_until="commit")
    page.wait_for_selector(METRIC, timeout=120_000)
    elapsed = time.perf_counter() - start
    page.wait_for_function("window.__firstNumber !== undefined", polling=50, timeout=120_000)
    painted = page.evaluate("window.__firstNumber") / 1000
    page.wait_for_selector(IDLE, timeout=120_000)
    context.close()
    return PageLoad(painted, elapsed)


def warm_browser(browser) -> None:
    """A first tab drawn and closed: a learner's browser is running already, and a fresh
    Chromium's first tab (its processes starting) is slower than the next ones."""
    context = browser.new_context()
    context.new_page().set_content("<h1>Ready</h1><p>A page drawn once.</p>")
    context.close()


def move(page: Page, slider, key: str) -> dict[str, float | None]:
    """Press a key on the slider: seconds (in the browser, from the key press) until the
    first predicted number shows (None when none did: a config the store had), until the
    first measured number changes, until new numbers (the first of the two), and until
    the page's script last finished (the run ended, every time measured), all timed in
    the browser."""
    before = page.evaluate(MEASURED_TEXT, [METRIC, STAND_INS])
    page.evaluate(WATCH, [METRIC, STAND_INS, before])
    start = time.perf_counter()
    slider.press(key)
    page.wait_for_function("window.__latency.measured !== undefined", polling=50,
                           timeout=120_000)
    page.wait_for_timeout(300)
    page.wait_for_selector(IDLE, timeout=120_000)
    waited = time.perf_counter() - start  # Playwright's polling adds up to 0.5 s
    marks = page.evaluate("window.__latency")
    every = marks["idle"] / 1000 if "idle" in marks else waited
    predicted = marks.get("predicted")
    measured = marks["measured"]
    return {"predicted": None if predicted is None else predicted / 1000,
            "measured": measured / 1000,
            "new": min(measured, predicted if predicted is not None else measured) / 1000,
            "every": every}


def wait_for_warm_up(status: Path, limit_s: float = 3600) -> dict:
    """The server's warm-up status once it says done (or failed)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        try:
            found = json.loads(status.read_text())
        except (OSError, ValueError):
            found = {}
        if found.get("state") in ("done", "failed"):
            return found
        time.sleep(2)
    raise TimeoutError(f"the warm-up did not end within {limit_s:.0f} s")


def figure(name: str, samples: list[float], busy: int = 0) -> dict:
    """A figure's median with its target (TARGETS[`name`], if any), the busy processes
    beside it, the 1-minute load average as it was taken, and its samples."""
    median = statistics.median(samples)
    target = TARGETS.get(name)
    return {"median_s": round(median, 3), "target_s": target,
            "met": None if target is None else median <= target,
            "busy_processes": busy, "load_average_1min": round(os.getloadavg()[0], 2),
            "samples_s": [round(v, 3) for v in samples]}


def slider_figures(moves: list[dict], suffix: str = "", busy: int = 0) -> dict[str, dict]:
    """The slider's figures from `moves` (move()'s marks): new, predicted and measured
    numbers, and every time measured; the predicted ones only where a prediction showed
    (a config the store had shows its numbers at once)."""
    predicted = [m["predicted"] for m in moves if m["predicted"] is not None]
    found = {
        f"slider_to_new_numbers{suffix}_s": figure(
            f"slider_to_new_numbers{suffix}_s", [m["new"] for m in moves], busy),
        f"slider_to_first_measured_numbers{suffix}_s": figure(
            f"slider_to_first_measured_numbers{suffix}_s", [m["measured"] for m in moves],
            busy),
        f"slider_to_every_time_measured{suffix}_s": figure(
            f"slider_to_every_time_measured{suffix}_s", [m["every"] for m in moves], busy),
    }
    if predicted:
        found[f"slider_to_first_predicted_numbers{suffix}_s"] = figure(
            f"slider_to_first_predicted_numbers{suffix}_s", predicted, busy)
    for value in found.values():
        value["moves"], value["moves_with_a_prediction"] = len(moves), len(predicted)
    return found


def machine_speed() -> dict:
    """The default demo's two parts outside the server, in a process of their own (medians)."""
    code = "import json; from demos.bench import machine_speed; print(json.dumps(machine_speed()))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--neighbours", default="vocab",
                        help="the sliders whose steps the warm-up measures (DEMO_WARM_NEIGHBOURS)")
    parser.add_argument("--busy", type=int, default=2, metavar="N",
                        help="busy processes beside the server for the slider moves and the "
                             "/plan and /compare first numbers measured under load (0: quiet "
                             "only)")
    parser.add_argument("--plan", default=PLAN_QUERY,
                        help="the planner's link (its query string) whose first number is timed")
    args = parser.parse_args()
    from benchmarks.load import busy_processes

    speed = machine_speed()
    load_before = os.getloadavg()[0]
    data_dir = Path(tempfile.mkdtemp(prefix="latency-"))  # an empty store
    status = data_dir / "warm-up.json"
    env = {"DATA_DIR": str(data_dir), "DEMO_WARM_NEIGHBOURS": args.neighbours}
    opening = time.perf_counter()
    # Past the server's own wait before it listens (DEMO_WARM_BEFORE_LISTEN, 240 s): a
    # loaded machine's slow opening is a figure, not a failure.
    with background_app(env, open_timeout=OPEN_LIMIT_S) as url, \
            sync_playwright() as playwright:
        figures = {"server_open_s": figure("server_open_s", [time.perf_counter() - opening])}
        browser = launch_chromium(playwright)
        warm_browser(browser)
        started = time.perf_counter()
        cold = [page_load(browser, url) for _ in range(FIRST_LEARNERS)]
        figures["first_load_cold_server_s"] = figure(
            "first_load_cold_server_s", [load.painted for load in cold])
        warm_up = wait_for_warm_up(status)
        warm_up_s = time.perf_counter() - started
        load_up = os.getloadavg()[0]
        warm = [page_load(browser, url) for _ in range(args.runs)]
        figures["first_page_load_s"] = figure(
            "first_page_load_s", [load.painted for load in warm])
        for name, loads in (("first_load_cold_server", cold), ("first_page_load", warm)):
            figures[f"{name}_playwright_s"] = figure(
                f"{name}_playwright_s", [load.playwright for load in loads])

        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.goto(f"{url}/compare")
        page.wait_for_selector(METRIC, timeout=120_000)
        page.wait_for_selector(IDLE, timeout=120_000)
        slider = page.locator('[data-testid="stSlider"]').filter(
            has_text="Vocabulary").get_by_role("slider")
        slider.focus()
        first = move(page, slider, "ArrowRight")
        # One step from the defaults: the warm-up measured it, so the store serves it.
        figures["first_move_from_default_s"] = figure("first_move_from_default_s",
                                                      [first["new"]])
        figures.update(slider_figures([move(page, slider, "ArrowRight")
                                       for _ in range(args.runs)]))
        figures["cached_config_s"] = figure(
            "cached_config_s", [move(page, slider, "ArrowLeft")["new"] for _ in range(args.runs)])
        if args.busy:
            for _ in range(args.runs):  # back past the configs measured above (the store's)
                move(page, slider, "ArrowRight")
            with busy_processes(args.busy):
                time.sleep(30)  # the load average follows the busy processes first
                figures.update(slider_figures(
                    [move(page, slider, "ArrowRight") for _ in range(args.runs)], "_busy",
                    args.busy))
        context.close()
        pages = first_numbers(browser, url, args.plan, args.runs, args.busy)
        browser.close()

    load = {"before": round(load_before, 2), "after_warm_up": round(load_up, 2),
            "after": round(os.getloadavg()[0], 2)}
    report = {
        "what": "compare page at its default config, headless Chromium on this machine; the "
                "server opened on an empty store, the rest measured once its start-up "
                "warm-up had ended",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        # The 1-minute load average: other work on the machine slows every figure here.
        "load_average_1min": load,
        # The default demo's memory and timed parts outside the server, just before.
        "machine_speed_s": speed,
        "runs": args.runs,
        "targets_s": TARGETS,
        "met": {k: figures[k]["met"] for k in TARGETS if k in figures},
        "figures": figures,
        "warm_up": {"seconds": round(warm_up_s, 1), "neighbours": args.neighbours,
                    **{k: v for k, v in warm_up.items() if k not in ("pid", "time")}},
        "plan_beside_compare": pages,
    }
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    for key, value in figures.items():
        target = value["target_s"]
        mark = "" if target is None else (
            f" (target {target} s) " + ("ok" if value["met"] else "OVER"))
        print(f"{key:>40}: median {value['median_s']:.3f} s{mark}, "
              f"{value['busy_processes']} busy, load {value['load_average_1min']}")
    print(f"this machine's default demo outside the server: memory part "
          f"{speed['memory_part_s']:.2f} s, timed part {speed['timed_part_s']:.2f} s")
    print(f"warm-up took {warm_up_s:.0f} s; load average (1 min) {load['before']} before, "
          f"{load['after_warm_up']} after the warm-up, {load['after']} after, on "
          f"{os.cpu_count()} CPUs")
    for case in pages["cases"]:
        mark = "ok" if case["within_target"] else "OVER"
        print(f"{'/plan first numbers':>40}: median {case['plan_s']:.3f} s, /compare "
              f"{case['compare_s']:.3f} s ({case['ratio']:.2f}x, target "
              f"{PLAN_TARGET_RATIO}x) {mark}, {case['busy_processes']} busy processes, "
              f"load {case['load_average_1min']}")
    print(f"wrote {OUT.relative_to(ROOT)}")


def first_numbers(browser, url: str, plan_query: str, runs: int, busy: int) -> dict:
    """New sessions opening /compare and /plan (its `plan_query`), alternately, until each
    shows its first number: quiet, then beside `busy` busy processes. The planner's
    first session comes first and is reported apart (its modules load then)."""
    from benchmarks.load import busy_processes

    plan_path = f"plan?{plan_query}"
    first_plan = page_load(browser, url, plan_path).painted
    cases = []
    for n in sorted({0, busy}):
        with busy_processes(n):
            if n:
                time.sleep(30)  # the load average follows the busy processes first
            compare, plan = [], []
            for _ in range(runs):
                compare.append(page_load(browser, url).painted)
                plan.append(page_load(browser, url, plan_path).painted)
            cases.append({
                "busy_processes": n, "load_average_1min": round(os.getloadavg()[0], 2),
                "compare_s": round(statistics.median(compare), 3),
                "plan_s": round(statistics.median(plan), 3),
                "ratio": round(statistics.median(plan) / statistics.median(compare), 2),
                "within_target": statistics.median(plan)
                <= PLAN_TARGET_RATIO * statistics.median(compare),
                "samples_s": {"compare": [round(v, 3) for v in compare],
                              "plan": [round(v, 3) for v in plan]}})
    return {"plan_query": plan_query, "target_ratio": PLAN_TARGET_RATIO,
            "first_plan_session_s": round(first_plan, 3), "cases": cases}


if __name__ == "__main__":
    main()
