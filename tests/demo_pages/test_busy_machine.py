"""Page tests on a busy machine: the runs a page test starts are guarded at the theory's
speed (tests/conftest.py), whatever this process measured meanwhile, so the long-run
guard never refuses a test's run because other work slowed the machine down."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from serving import service as service_module
from serving.estimates import DEFAULT_SPEED, STEP_OVERHEAD_S
from tests.runtime.conftest import CPU, FakeWorker, long_training
from ui import demo_runner

BUSY = 6.0  # seconds per estimate-second: what a loaded two-core machine measured


@pytest.fixture
def busy_service() -> Iterator[service_module.DemoService]:
    """The process's service, its recent runs measured on a machine six times slower than
    the theory's speed."""
    svc = service_module.DemoService(CPU, worker=FakeWorker(lambda job, i: 0.01),
                                     use_store=False).start()
    with svc._cond:
        svc._history.extend([(2.0, STEP_OVERHEAD_S + 2.0 * BUSY)] * 7)
    old = service_module.set_service(svc)
    try:
        yield svc
    finally:
        service_module.set_service(old)
        svc.stop()


def test_a_page_tests_run_is_estimated_at_the_theorys_speed(busy_service) -> None:
    job = long_training()  # minutes of work: the speed counts
    works = [job.step_work(i, "cpu") for i in range(job.step_count())]
    theory = sum(STEP_OVERHEAD_S + work * DEFAULT_SPEED["cpu"] for work in works)
    assert demo_runner.estimated_seconds(job) == pytest.approx(theory)
