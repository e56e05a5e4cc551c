"""The server listens once its engine's worker can run a learner's first demo and the
common views have their first numbers, and after a bounded wait when they do not."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

from memory.strategies import parse_strategies
from tests.runtime.conftest import FakeWorker, tiny_compare
from ui.server import (
    LISTEN_WAIT_ENV,
    LISTEN_WAIT_S,
    listen_wait_s,
    wait_for_common_views,
    wait_for_engine,
)


class _Worker:
    def __init__(self, ready_after: float) -> None:
        self.ready_at = time.monotonic() + ready_after

    def alive(self) -> bool:
        return time.monotonic() >= self.ready_at


def test_the_server_waits_for_its_worker() -> None:
    waited = wait_for_engine(SimpleNamespace(worker=_Worker(0.5)), limit_s=30)
    assert waited is not None and 0.4 <= waited < 30


def test_a_worker_that_does_not_start_holds_the_server_for_a_bounded_time() -> None:
    began = time.monotonic()
    assert wait_for_engine(SimpleNamespace(worker=_Worker(3600)), limit_s=0.3) is None
    assert time.monotonic() - began < 30


def test_the_server_listens_once_every_common_view_has_its_first_numbers(make_service,
                                                                         capsys,
                                                                         monkeypatch):
    """Each view's first numbers (a comparison's memory): a class that comes with the
    health check finds them in the store; the timed steps go on after it opens. The
    operator's terminal says why it waits, for about how long, and when it opens."""
    worker = FakeWorker(lambda job, index: 0.3 if index == 0 else 0.5)
    svc = make_service(worker=worker, use_store=False)
    tickets = svc.warm([tiny_compare(seed=1, timed=True), tiny_compare(seed=2, timed=True),
                        tiny_compare(seed=3)])
    assert not any(ticket.has_numbers for ticket in tickets)
    expected = svc.first_numbers_seconds(ticket.job for ticket in tickets)
    monkeypatch.setattr("ui.server.PROGRESS_EVERY_S", 0.2)
    drawn = []  # the views drawn once half have their numbers, the rest still measured
    waited = wait_for_common_views(
        tickets, limit_s=20,
        expected=lambda waiting: svc.first_numbers_seconds(t.job for t in waiting),
        meanwhile=lambda: drawn.append(sum(t.has_numbers for t in tickets)))
    assert waited is not None and 0.8 <= waited < 20  # the three memory steps
    assert drawn == [2]
    assert all(ticket.has_numbers for ticket in tickets)
    assert not all(ticket.done for ticket in tickets)  # the timed steps go on
    assert worker.log[:3] == [(1, 0), (2, 0), (3, 0)]  # the memory steps first
    said = capsys.readouterr().err
    assert "first numbers of the 3 demo views a class opens first" in said
    assert f"about {expected:.0f} s" in said
    assert " of 3 views measured after " in said and "s left at the speed" in said
    assert "DEMO_WARM_BEFORE_LISTEN=0 opens at once" in said and "the server opens." in said
    assert all(ticket.wait(20) for ticket in tickets)


def test_views_without_numbers_hold_the_server_for_a_bounded_time(make_service):
    svc = make_service(worker=FakeWorker(lambda job, index: 1.0), use_store=False)
    tickets = svc.warm([tiny_compare(seed=4, timed=True)])
    began = time.monotonic()
    assert wait_for_common_views(tickets, limit_s=0.3) is None
    assert time.monotonic() - began < 10


def test_the_wait_before_listening_is_a_setting(monkeypatch):
    monkeypatch.delenv(LISTEN_WAIT_ENV, raising=False)
    assert listen_wait_s() == LISTEN_WAIT_S
    monkeypatch.setenv(LISTEN_WAIT_ENV, "0")
    assert listen_wait_s() == 0
    monkeypatch.setenv(LISTEN_WAIT_ENV, "soon")
    assert listen_wait_s() == LISTEN_WAIT_S


def test_the_warm_up_can_be_limited_to_some_pages(monkeypatch, caplog):
    """DEMO_WARM_PAGES names pages by address ("home" for the home page); a name that is
    no page is reported, not ignored in silence."""
    from ui import server

    monkeypatch.delenv(server.PAGES_ENV, raising=False)
    every = server.warm_views()
    assert {"pages/home.py", "pages/demos/compare.py", "pages/demos/curves.py"} <= {
        script for script, _ in every}
    monkeypatch.setenv(server.PAGES_ENV, " compare, /curves ,home,no-such-page")
    with caplog.at_level("WARNING", logger=server.log.name):
        some = server.warm_views()
    assert {script for script, _ in some} == {
        "pages/home.py", "pages/demos/compare.py", "pages/demos/curves.py"}
    assert [view for view in every if view in some] == some  # the same order, a subset
    assert any(query for _, query in some)  # a lesson's link to one of them is kept
    assert "no-such-page" in caplog.text


def test_listing_in_the_servers_process_leaves_its_pages_running_for_real(monkeypatch):
    """The server lists the common views' runs in its own process before it listens: the
    runner's collect mode is on for the listing only, or every learner's page would list
    its runs and draw no result."""
    from ui import demo_runner, server

    monkeypatch.delenv(demo_runner.COLLECT_ENV, raising=False)
    monkeypatch.setattr(server, "warm_views", lambda: [("pages/demos/compare.py", {})])
    found = server.collect_warm_jobs(neighbours=False)
    assert [job["kind"] for job in found["jobs"]] == ["compare"]
    assert demo_runner.COLLECT_ENV not in os.environ
    assert not demo_runner.collecting()


def test_the_warm_ups_first_numbers_come_before_its_timed_steps(make_service):
    """The server waits for the warm-up's first numbers: a run that shows nothing until it
    ends (what fits, two strategies) goes before another's timed steps."""
    from serving.jobs import Job
    from tests.runtime.conftest import TINY

    worker = FakeWorker(lambda job, index: 0.05)
    svc = make_service(worker=worker, use_store=False)
    fits = Job.make("fits", TINY.replace(seed=2), parse_strategies("none,every-layer"),
                    vary="batch",
                    budget_bytes=128 * 2**20)
    tickets = svc.warm([tiny_compare(seed=1, timed=True), fits])
    assert wait_for_common_views(tickets, limit_s=20) is not None
    assert all(ticket.wait(20) for ticket in tickets)
    assert worker.log == [(1, 0), (2, 0), (2, 1), (1, 1)]


def test_the_server_draws_every_common_view_once_before_it_listens(monkeypatch):
    """Once the common views are measured, each is drawn once for real (the runner not
    collecting: its results come from the store), so that a fresh class's chart pages do
    not pay for the first drawing of their charts; a view that fails is logged and the
    others are still drawn."""
    from ui import demo_runner, server

    drawn = []

    class _Page:
        def __init__(self, script: str, query: dict[str, str]) -> None:
            self.script, self.query = script, query

        def run(self) -> None:
            drawn.append((self.script, self.query, demo_runner.collecting()))
            if self.script == "pages/broken.py":
                raise RuntimeError("a page's own error")

    views = [("pages/broken.py", {}), ("pages/demos/timeline.py", {"vocab": "32768"})]
    monkeypatch.delenv(demo_runner.COLLECT_ENV, raising=False)
    monkeypatch.setattr(server, "warm_views", lambda: views)
    monkeypatch.setattr(server, "_app_test", _Page)
    server.draw_views()
    assert drawn == [(script, query, False) for script, query in views]


def test_the_servers_drawing_shows_the_numbers_so_far_without_joining_the_run() -> None:
    """While the server draws the common views once, a view whose timed steps are under
    way draws its first numbers, and the page neither waits nor joins the run (a joined
    warm-up run would stop giving way to learners)."""
    from ui import demo_runner

    shown, joined = [], []
    svc = SimpleNamespace(cached=lambda job: None, partial_of=lambda job: "the memory",
                          submit=joined.append)
    show = lambda result: shown.append((result, demo_runner.view_phase()))  # noqa: E731
    assert demo_runner._draw_once(svc, tiny_compare(timed=True), show) is None
    assert shown == [("the memory", "partial-1")] and not joined


def _pictures_job(seed: int, part: str):
    from demos.picture_settings import PictureSetup
    from serving import picture_jobs
    from serving.jobs import Job
    from tests.runtime.conftest import TINY

    return Job.make("pictures", TINY.replace(seed=seed), (),
                    **picture_jobs.options(PictureSetup("sdxl-unet"), part))


def test_a_pages_later_parts_wait_behind_every_first_number(make_service, monkeypatch):
    """The pictures' costs and size sweep are drawn below its memory: queued first and
    the shortest, they still run after the views' first numbers."""
    monkeypatch.setattr("serving.picture_jobs.step_work", lambda job, index: 1e-6)
    worker = FakeWorker(lambda job, index: 0.02)
    svc = make_service(worker=worker, use_store=False)
    tickets = svc.warm([_pictures_job(5, "time"), _pictures_job(6, "memory"),
                        tiny_compare(seed=1, timed=True)])
    assert all(ticket.wait(20) for ticket in tickets)
    assert set(worker.log[:2]) == {(6, 0), (1, 0)}  # the memory of both views first


def test_the_server_does_not_wait_for_a_pages_later_parts(make_service, capsys):
    from ui.server import first_numbers_waited_for

    svc = make_service(worker=FakeWorker(lambda job, index: 0.01), use_store=False)
    jobs = [_pictures_job(2, "memory"), _pictures_job(2, "time"), _pictures_job(2, "sweep"),
            tiny_compare(seed=1, timed=True)]
    assert [job.later_part() for job in jobs] == [False, True, True, False]
    tickets = [SimpleNamespace(job=job) for job in jobs]
    assert first_numbers_waited_for(svc, tickets) == [tickets[0], tickets[3]]
    assert capsys.readouterr().err == ""  # no view is long here


def test_the_quickest_views_are_measured_whole_before_the_server_listens(make_service,
                                                                         monkeypatch):
    """A view whose whole run is quick is waited for whole: its first learners find its
    times in the store too, as on a warm server. Its timed steps go right after the
    awaited first numbers, before a long view's first step and the other timed steps."""
    import threading

    from ui.server import views_waited_for

    gate = threading.Event()  # holds the first step until the views are marked
    worker = FakeWorker(lambda job, index: 0.05 if gate.wait(20) else 0.05)
    svc = make_service(worker=worker, use_store=False)
    quick, other, long = svc.warm([tiny_compare(seed=s, timed=True) for s in (1, 2, 3)])
    monkeypatch.setattr(svc, "estimate", lambda job: {1: 1.0, 2: 8.0, 3: 9.0}[job.config.seed])
    monkeypatch.setattr(svc, "first_numbers_seconds",
                        lambda jobs: 60.0 if any(j.config.seed == 3 for j in jobs) else 1.0)
    views = views_waited_for(svc, [quick, other, long])
    assert [(v.ticket, v.whole) for v in views] == [(quick, True), (other, False)]
    gate.set()
    assert wait_for_common_views(views, limit_s=20) is not None
    assert quick.done and other.has_numbers
    assert all(ticket.wait(20) for ticket in (quick, other, long))
    assert worker.log == [(1, 0), (2, 0), (1, 1), (3, 0), (2, 1), (3, 1)]
