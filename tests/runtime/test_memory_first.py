"""A comparison is measured in two steps, its memory first and its timed steps after, so
that every learner of a class arriving at once gets memory numbers before anyone's steps
are timed; the two parts merge into what one run measured."""

from __future__ import annotations

import pickle

import pytest

from demos.measure import compare
from memory.config import ModelConfig
from memory.strategies import parse_strategies
from serving.jobs import Job
from tests.runtime.conftest import TINY, FakeWorker, tiny_compare, wait_for


def test_a_timed_comparison_is_two_steps_its_memory_first() -> None:
    job = tiny_compare(timed=True)
    assert job.timed_apart() and job.step_count() == 2
    memory, timing = (job.step_runs(i) for i in (0, 1))
    assert [steps for *_, steps in timing] == [2, 2]  # one timed repeat and one untimed
    assert job.step_work(0) > 0 and job.step_work(1) > 0
    untimed = tiny_compare(timed=False)
    assert not untimed.timed_apart() and untimed.step_count() == 1
    assert untimed.step_runs(0) == memory  # the memory step is the untimed comparison


def test_every_learners_memory_comes_before_anyones_timed_steps(make_service) -> None:
    worker = FakeWorker(lambda job, index: 0.1)
    svc = make_service(worker=worker, use_store=False)
    tickets = [svc.submit(tiny_compare(seed=s, timed=True), f"learner {s}")
               for s in range(4)]
    for ticket in tickets:
        assert ticket.wait(20) and ticket.error is None
    assert worker.log[:4] == [(s, 0) for s in range(4)]
    assert sorted(worker.log[4:]) == [(s, 1) for s in range(4)]


def test_the_memory_is_on_the_ticket_while_the_steps_are_timed(make_service) -> None:
    worker = FakeWorker(lambda job, index: 0.05 if index == 0 else 2.0)
    svc = make_service(worker=worker, use_store=False)
    ticket = svc.submit(tiny_compare(seed=1, timed=True), "learner")
    wait_for(lambda: ticket.partial[1] is not None, timeout=10)
    assert not ticket.done and worker.log == [(1, 0)]
    assert ticket.wait(20) and ticket.error is None


@pytest.mark.heavy
def test_the_two_steps_measure_what_one_comparison_does() -> None:
    job = Job.make("compare", TINY.replace(layers=3), parse_strategies("none,every-layer"),
                   repeats=2,
                   timeline=True, time_steps=True)
    seen = []
    memory = job.run_step(0, "cpu", None, partial=seen.append)
    assert all(r.step_seconds is None and r.peak_bytes for r in memory.results)
    timing = job.run_step(1, "cpu", None, partial=seen.append)
    merged = job.merge([memory, timing])
    assert seen and job.merge([memory, seen[-1]]).results[0].step_seconds_runs
    whole = compare(job.config, list(job.strategies), device="cpu", repeats=2,
                    timeline=True)
    for two, one in zip(merged.results, whole.results, strict=True):
        assert two.peak_bytes == one.peak_bytes and two.flops_counted == one.flops_counted
        assert two.bitwise_equal == one.bitwise_equal and two.loss == one.loss
        assert two.timeline and len(two.step_seconds_runs) >= 2
        assert len(two.cpu_seconds_runs) == len(two.step_seconds_runs)
        assert two.step_seconds is not None and two.threads == one.threads
    assert memory.results[0].step_seconds is None  # the parts are not changed by merging


def _large(seed: int) -> Job:
    """A comparison whose memory step is many times a tiny one's."""
    return Job.make("compare", ModelConfig(layers=8, hidden=256, heads=4, seq_len=256,
                                           batch=4, vocab=1024, seed=seed),
                    parse_strategies("none,every-layer"), repeats=1, timeline=True,
                    time_steps=False)


def _class_behind_a_first_run(make_service, ahead: int) -> FakeWorker:
    worker = FakeWorker(lambda job, index: 0.3 if job.config.seed == 0 else 0.05)
    svc = make_service(worker=worker, use_store=False)
    first = svc.submit(tiny_compare(seed=0), "first learner")  # on the device at once
    wait_for(lambda: first.status().state == "running", timeout=10)
    tickets = [first, svc.submit(_large(seed=7), "large"),
               *(svc.submit(tiny_compare(seed=s), f"learner {s}") for s in (1, 2))]
    assert tickets[-1].status().ahead == ahead  # the running run counted
    for ticket in tickets:
        assert ticket.wait(20) and ticket.error is None
    return worker


def test_a_class_sees_its_short_first_steps_before_one_long_one(make_service) -> None:
    assert _large(7).step_work(0) > 10 * tiny_compare().step_work(0)
    worker = _class_behind_a_first_run(make_service, ahead=2)  # not behind the large one
    assert [seed for seed, _ in worker.log] == [0, 1, 2, 7]


def test_a_run_waiting_past_its_due_keeps_its_place(make_service, monkeypatch) -> None:
    from serving import service as service_module

    monkeypatch.setattr(service_module, "OVERDUE_S", 0.0)  # every run is overdue at once
    worker = _class_behind_a_first_run(make_service, ahead=3)
    assert [seed for seed, _ in worker.log] == [0, 7, 1, 2]  # arrival order


def test_the_memory_part_shows_its_memory_before_the_flop_count_and_the_reference_step(
        ) -> None:
    """Without 'none' among the strategies the gradients are checked against a plain
    step: that step and the FLOP count come after the memory is shown, the check with the
    timing part's first timed step."""
    job = Job.make("compare", TINY, parse_strategies("every-layer,sqrt"), repeats=1,
                   timeline=False, time_steps=True)
    seen = []  # as the worker's pipe sends it: a copy at that moment
    memory = job.run_step(0, "cpu", None,
                          partial=lambda part: seen.append(pickle.loads(pickle.dumps(part))))
    first = seen[0].results
    assert all(r.peak_bytes and r.flops_counted is None for r in first)  # no count yet
    assert all(r.bitwise_equal is None for r in memory.results)  # no plain step yet
    assert all(r.flops_counted for r in memory.results)
    merged = job.merge([memory, job.run_step(1, "cpu", None)])
    assert all(r.bitwise_equal and r.max_grad_diff == 0.0 for r in merged.results)
    assert all(r.flops_counted and r.step_seconds for r in merged.results)


def test_a_page_waiting_for_numbers_wakes_with_the_memory(make_service) -> None:
    worker = FakeWorker(lambda job, index: 0.05 if index == 0 else 1.0)
    svc = make_service(worker=worker, use_store=False)
    ticket = svc.submit(tiny_compare(seed=2, timed=True), "learner")
    assert ticket.wait_numbers(10)
    assert ticket.partial[1] is not None and not ticket.done  # the memory, not the end
    assert ticket.wait(20) and ticket.wait_numbers(0)
