"""One real compiler-budget sweep on a tiny model, measured once per test process and
shared by the engine, CLI and page tests (each compile takes seconds to tens of seconds)."""

from __future__ import annotations

import functools

import pandas as pd
import pytest

from demos.compiler_budget import BASE, EAGER_STRATEGIES
from serving.jobs import Job

# The page's model at one layer of width 64: the page shows this job for
# ?layers=1&hidden=64&budgets=1,0&compiled=no.
TINY = BASE.replace(layers=1, hidden=64)
PAGE_QUERY = {"layers": "1", "hidden": "64", "budgets": "1,0", "compiled": "no"}


# The mark of every test module that uses the sweep: one test process runs them all, so
# a run compiles the sweep once, and the other worker goes on with other tests meanwhile.
# The planner's printed budget code (tests/real_libraries/test_compiler_snippet.py)
# compiles there too: a process's first compile starts Inductor (its compile workers, its
# C++ header), and the snippet's test took 82 s as a process's first compile, 32 s after
# the sweep (load 5-9, an empty Inductor cache each time).
SWEEP_GROUP = pytest.mark.xdist_group("compiler-sweep")


def tiny_job() -> Job:
    return Job.make("budget", TINY, (), budgets=(1.0, 0.0), eager=EAGER_STRATEGIES,
                    compiled=(), repeats=5)


@functools.cache
def tiny_result() -> pd.DataFrame:
    """The job run step by step as the worker runs it, merged as the service merges it."""
    job = tiny_job()
    return job.merge([job.run_step(i, "cpu", None) for i in range(job.step_count())])
