"""Two simulated learners on one device: one starts a long what-fits search, one second
later another asks for a short Compare. Reports how long the short run waited (from its
request to its result) beside its own run time and the search's length: with the search
split into steps that release the device, the short run waits at most one step.

    python -m benchmarks.fairness            # writes benchmarks/fairness.json
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from demos.device import detect_device
from memory.config import ModelConfig
from memory.strategies import parse_strategies
from serving.jobs import Job
from serving.service import DemoService
from serving.store import ResultStore

OUT = Path(__file__).with_name("fairness.json")
LONG = Job.make("fits", ModelConfig(layers=8, hidden=256, heads=4, seq_len=256, batch=4,
                                    vocab=8192),
                parse_strategies("none,every-layer,sqrt,selective:save-matmuls"), vary="batch",
                budget_bytes=512 * 2**20)
SHORT = Job.make("compare", ModelConfig(layers=4, hidden=128, heads=4, seq_len=128, batch=2,
                                        vocab=2048), parse_strategies("none,every-layer"),
                 repeats=3, timeline=False, time_steps=True)


def _timed(service: DemoService, job: Job, who: str) -> tuple[float, float]:
    """(seconds from request to result, seconds it held the device)."""
    start = time.monotonic()
    ticket = service.submit(job, who)
    while not ticket.wait(0.1):
        pass
    assert ticket.error is None, ticket.error
    return time.monotonic() - start, ticket.status().run_seconds


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        service = DemoService(store=ResultStore(Path(folder))).start()
        service.worker.start()
        alone, _ = _timed(service, SHORT, "alone")
        service.store = None  # measure every run below, never serve it from the store
        long_ticket = service.submit(LONG, "long learner")
        long_start = time.monotonic()
        time.sleep(1.0)
        short_job = Job.make("compare", SHORT.config.replace(seed=1), SHORT.strategies,
                             **dict(SHORT.options))
        queued = service.submit(short_job, "short learner")
        estimate = queued.status()
        waited_start = time.monotonic()
        while not queued.wait(0.1):
            pass
        short_wait = time.monotonic() - waited_start
        while not long_ticket.wait(0.1):
            pass
        long_total = time.monotonic() - long_start
        service.stop()
    report = {
        "device": detect_device().label(),
        "long": {"job": LONG.request(), "steps": LONG.step_count(),
                 "seconds": round(long_total, 2)},
        "short": {"job": SHORT.request(), "alone_seconds": round(alone, 2),
                  "wait_to_result_seconds": round(short_wait, 2),
                  "estimated_start_in_seconds": round(estimate.start_in, 2),
                  "ahead_when_queued": estimate.ahead},
        "without_steps_the_short_run_would_wait_about_seconds": round(long_total - 1.0, 2),
    }
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
