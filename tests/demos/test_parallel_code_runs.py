"""The planner's printed many-GPU code runs: two processes on the CPU over gloo
(tests/demos/parallel_code_child.py), a tiny transformers Llama tensor parallel over both,
with and without sequence parallelism, its blocks checkpointed as the plan names them and
sharded with fully_shard; the loss and every gradient equal the one-process step."""

from __future__ import annotations

import json
import sys

import pytest

from tests.demos.launch import ROOT, environment, run_processes

pytestmark = pytest.mark.xdist_group("parallel-code-runs")
LAUNCH_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("parallel-code") / "runs.json"
    run_processes([sys.executable, "-m", "tests.demos.parallel_code_child", str(out)],
                  cwd=ROOT, env=environment(), timeout_s=LAUNCH_TIMEOUT_S,
                  what="the printed many-GPU code")
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.heavy
def test_printed_code_trains_as_one_process(runs):
    assert [(r["sp"], r["strategy"]) for r in runs] == [(False, "every-layer"),
                                                       (True, "some-layers")]
    for run in runs:
        assert run["loss"] == pytest.approx(run["reference"], rel=1e-5)
        assert run["grad_max"] > 0
        assert run["grad_max_diff"] <= 1e-5 * max(1.0, run["grad_max"])


@pytest.mark.heavy
def test_printed_code_checkpoints_the_blocks_it_names(runs):
    every, some = runs
    assert every["checkpointed"] == [True] * 4
    assert some["checkpointed"] == [True, True, False, False]
