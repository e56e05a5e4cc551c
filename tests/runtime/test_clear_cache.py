"""Fault 1: any learner could reset the run queue and the results with Streamlit's "clear
cache" websocket message (they lived in st.cache_resource / st.cache_data)."""

from __future__ import annotations

from types import SimpleNamespace

from streamlit.runtime.app_session import AppSession

from serving import service as service_module
from tests.runtime.conftest import FakeWorker, tiny_compare, wait_for


def _clear_cache_message() -> None:
    """What the server does for a client's BackMsg clear_cache (app_session.py)."""
    AppSession._handle_clear_cache_request(SimpleNamespace(_session_state={}))


def test_the_queue_and_the_results_survive_a_clear_cache_message(make_service) -> None:
    from ui import demo_runner

    worker = FakeWorker(lambda job, index: 0.8 if job.config.seed == 1 else 0.05)
    svc = make_service(worker=worker)
    svc.store = None  # this process's memory alone must keep the result
    old = service_module.set_service(svc)
    try:
        done = svc.submit(tiny_compare(seed=0), "learner-a")
        wait_for(lambda: done.done)
        running = svc.submit(tiny_compare(seed=1), "learner-b")
        queued = svc.submit(tiny_compare(seed=2), "learner-c")
        wait_for(lambda: running.status().state == "running")
        _clear_cache_message()
        assert demo_runner.service() is svc  # not replaced by a new queue
        assert svc.waiting() == 2  # the running and the queued run are still there
        assert svc.cached(tiny_compare(seed=0)) is not None  # the result is still there
        wait_for(lambda: queued.done)
        assert [seed for seed, _ in worker.log] == [0, 1, 2]  # one at a time, in order
        assert svc.runs_started == 3
    finally:
        service_module.set_service(old)
