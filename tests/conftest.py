"""Fixtures shared by every test layer.

* `app_url`: the real app, started once per session with `streamlit run` on a free port
  and a temporary DATA_DIR; stopped (with its whole process group) at the end.
* `page`: a Playwright page in Debian's Chromium; a failing test leaves a screenshot in
  tests/artifacts/.
* `app_test`: a factory for AppTest runs of one page script.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Idle OpenMP threads sleep instead of spinning, in the test processes and every process
# they start (the demo engine's worker, the CLI, the FSDP children), as the app server sets
# for itself (ui/server.py): the unit tests run in two processes on two cores, and a
# spinning thread of one took the CPU the other needed (a page test subset: 70 CPU-s with
# spinning, 60 without). Set before torch is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from tests.helpers import ARTIFACTS, CHROMIUM, background_app, launch_chromium  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


_BROWSER_FIXTURES = {"browser", "page", "phone", "app_url"}


_OWN_DATA_DIR = pytest.StashKey[str]()
COMPILE_TIMEOUT_S = 900


def pytest_configure(config: pytest.Config) -> None:
    # A data folder of each test process's own: no test reads or writes the checkout's
    # data/ (a learner's certificates, the stored demo results) or a DATA_DIR or database
    # set for the app, and a result stored by an earlier `make test` serves no run here.
    # Tests that need a store of their own still set DATA_DIR themselves.
    config.stash[_OWN_DATA_DIR] = os.environ["DATA_DIR"] = tempfile.mkdtemp(
        prefix="gcl-test-data-")
    # The Open Badges status lists go there too, not to the checkout's static/status/.
    os.environ["OPEN_BADGE_STATUS_DIR"] = os.path.join(os.environ["DATA_DIR"], "status")
    os.environ.pop("DATABASE_URL", None)
    _scan_components_once()


def _scan_components_once() -> None:
    """Each new AppTest scans every installed distribution's metadata for Streamlit
    components (about 0.5 CPU-s: some 400 metadata files parsed), where a server does it
    once at start. Nothing is installed while the tests run, so a test process scans once
    and each AppTest registers the same manifests from that scan."""
    from streamlit.components.v2 import manifest_scanner

    scan = manifest_scanner.scan_component_manifests
    found: list = []

    def scan_once(max_workers: int | None = None) -> list:
        if not found:
            found.append(scan(max_workers))
        return list(found[0])

    manifest_scanner.scan_component_manifests = scan_once


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(config.stash.get(_OWN_DATA_DIR, ""), ignore_errors=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    # What collection imported (torch, transformers, diffusers, Streamlit, every test
    # module: about 720,000 objects, most of a test process's) lives as long as the
    # process: frozen, the full collections that follow pass it over. Each walked all of
    # it (0.36 s of CPU): accelerate asks for one at every Trainer.train (the printed
    # scripts' tests), the engine after an out-of-memory, Python itself as objects pile
    # up. Only a frozen object that later becomes unreachable in a cycle stays until the
    # process ends.
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        # Every test that drives Chromium or the shared app server is a browser test:
        # `make test` runs them on their own after the others (which run in parallel), so
        # a page's timing never competes with the unit tests for the two cores.
        params = getattr(getattr(item, "callspec", None), "params", {})
        fixtures = set(getattr(item, "fixturenames", ())) - set(params)
        if "/browser/" in str(item.path).replace(os.sep, "/") or _BROWSER_FIXTURES & fixtures:
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.xdist_group("browser"))
    # torch.compile's first compile in a process (Inductor building its C++ kernels) ran
    # past the 300 s every test has at load 9-11 on two cores (the compiler-budget page's
    # measured fixture, still in the backward's compile): a compile test gets 900 s.
    for item in items:
        if item.get_closest_marker("compile") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(COMPILE_TIMEOUT_S))
    # Tests marked `heavy` run first (the parallel workers then end on short tests, not
    # one worker on a long one), those marked `late` after the rest; otherwise in their
    # order (sort is stable).
    items.sort(key=lambda item: (item.get_closest_marker("late") is not None,
                                 item.get_closest_marker("heavy") is None))


# The wall-clock time cap of a page test's demo run (at least; an estimated run gets six
# times its estimate). The server's own floor, 60 s, stopped a tiny what-fits search at load
# 11 on two cores; the cap itself is tested in tests/runtime/.
TEST_MIN_CAP_SECONDS = 240.0


@pytest.fixture(autouse=True)
def demo_runs_independent_of_the_load(request: pytest.FixtureRequest,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The pages a test runs decide about a long run at the theory's own speed (the default
    before any history), not at the speed this process measured on its earlier runs: that
    speed follows the load, and at a measured 4.6 times the theory's speed (load 8-10 on
    two cores) the long-run guard refused a run a page test needs (what fits, nothing
    fitting: 210 s at the theory's speed) as "roughly 16 min", over its 15-minute limit.
    And a run is stopped no sooner than TEST_MIN_CAP_SECONDS. The guard is tested at fixed
    estimates (tests/demo_pages/test_runner.py), the measured speed and the time cap in
    tests/runtime/, which keep both."""
    if "/runtime/" in str(request.path).replace(os.sep, "/"):
        return
    from serving import service
    from serving.estimates import DEFAULT_SPEED, RunEstimates
    from ui import demo_runner

    def at_the_theory_speed(job) -> float:  # noqa: ANN001
        svc = demo_runner.service()
        if "estimate" in vars(svc):  # a test's own fixed estimate on its service
            return svc.estimate(job)
        kind = svc.device.kind
        return RunEstimates._seconds([job.step_work(i, kind) for i in range(job.step_count())],
                                     DEFAULT_SPEED.get(kind, 1.0))

    monkeypatch.setattr(demo_runner, "estimated_seconds", at_the_theory_speed)
    # The warm-up's listing (ui.server.collect_warm_jobs) sets the runner's collect mode
    # for its whole process: left set, every later page here would list its runs, run
    # nothing and draw no result, silently.
    monkeypatch.delenv(demo_runner.COLLECT_ENV, raising=False)
    monkeypatch.setattr(service, "MIN_CAP_SECONDS",
                        max(service.MIN_CAP_SECONDS, TEST_MIN_CAP_SECONDS))


# The log of the app server the browser tests share: a failing browser test prints its
# tail, so an error the page redacts ("This app has encountered an error") is in the report.
_APP_LOGS: list[Path] = []
APP_LOG_TAIL_LINES = 80


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator:
    report = yield
    setattr(item, f"report_{report.when}", report)
    if report.failed and "app_url" in getattr(item, "fixturenames", ()):
        for log in _APP_LOGS:
            lines = log.read_text(errors="replace").splitlines()[-APP_LOG_TAIL_LINES:]
            report.sections.append((f"app server log (last {len(lines)} lines)",
                                    "\n".join(lines)))
    return report


@pytest.fixture(scope="session")
def app_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("app-data")


@pytest.fixture(scope="session")
def app_url(app_data_dir: Path) -> Iterator[str]:
    """The real app (`python -m ui.server`), its log in the data folder."""
    # Error details on the page and an unbuffered log: a failure shows its cause.
    # No start-up warm-up: the second server (tests/browser/conftest.py), on the same data,
    # measures the pages' defaults and their neighbours with the CPU the tests leave idle;
    # two servers listing and measuring the same runs at once would take it from the tests.
    # Its Open Badges status lists go where Streamlit serves them (static/status/); the
    # ones this server wrote are removed when it stops.
    from quiz.status_list import STATUS_FOLDER

    env = {"DATA_DIR": str(app_data_dir), "QUIZ_COOLDOWN_SECONDS": "0",
           "STREAMLIT_CLIENT_SHOW_ERROR_DETAILS": "true", "PYTHONUNBUFFERED": "1",
           "DEMO_WARM_STORE": "0", "OPEN_BADGE_STATUS_DIR": str(STATUS_FOLDER),
           # A page's run is asked for with a click only past 5 min: on a loaded machine
           # the estimates follow the load, and the tests open pages to see their results
           # (the ask itself is tested with fixed estimates: tests/demo_pages/).
           "DEMO_ASK_SECONDS": "300"}
    log_path = app_data_dir / "streamlit.log"
    _APP_LOGS.append(log_path)
    before = set(STATUS_FOLDER.glob("*.json"))
    try:
        with log_path.open("w") as log, background_app(env, log=log) as url:
            yield url
    finally:
        for path in set(STATUS_FOLDER.glob("*.json")) - before:
            path.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def browser() -> Iterator:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium")
    from playwright.sync_api import expect, sync_playwright

    # Assertions wait up to 15 s (Playwright's default is 5 s): on a loaded 2-core CI
    # machine a chart can take longer to draw after the script has finished.
    expect.set_options(timeout=15_000)
    with sync_playwright() as playwright:
        instance = launch_chromium(playwright)
        yield instance
        instance.close()


def _tab(browser, request: pytest.FixtureRequest, **context_options) -> Iterator:
    """A new browser context and tab; a failing test leaves its screenshot."""
    context = browser.new_context(**context_options)
    context.set_default_timeout(60_000)
    tab = context.new_page()
    yield tab
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        name = request.node.nodeid.replace("/", "_").replace("::", "__")
        tab.screenshot(path=str(ARTIFACTS / f"FAILED-{name}.png"), full_page=True)
    context.close()


@pytest.fixture
def page(browser, request: pytest.FixtureRequest) -> Iterator:
    """A laptop-sized tab (1400 x 1000)."""
    yield from _tab(browser, request, viewport={"width": 1400, "height": 1000},
                    accept_downloads=True)


@pytest.fixture
def phone(browser, request: pytest.FixtureRequest) -> Iterator:
    """A phone-sized tab (390 x 844, touch)."""
    from tests.browser.layout import PHONE

    yield from _tab(browser, request, viewport=PHONE, device_scale_factor=1, has_touch=True,
                    is_mobile=True, accept_downloads=True)


@pytest.fixture
def app_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable:
    """`app_test("pages/compare.py", query={"layers": "4"})` runs one page under AppTest."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("QUIZ_COOLDOWN_SECONDS", "0")

    def run(script: str, query: dict[str, str] | None = None, timeout: float = 60) -> AppTest:
        # A ceiling, not a pause: a run past a demo's time cap on a busy machine ends the
        # script with the cap's message, not AppTest's timeout.
        at = AppTest.from_file(str(ROOT / script),
                               default_timeout=max(timeout, TEST_MIN_CAP_SECONDS + 30))
        for key, value in (query or {}).items():
            at.query_params[key] = value
        return at.run()

    return run
