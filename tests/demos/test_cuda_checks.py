"""The GPU proof's engine checks (benchmarks/gpu_check.py): bytes per layer against the formula,
faults, and two runs at once. The CUDA cases skip without a GPU; the same functions run
here on the CPU at a tiny size, so the GPU script cannot hold dead code."""

from pathlib import Path

import pytest
import torch

from benchmarks.gpu_check import (
    layer_shape,
    limit_fault,
    oom_fault,
    row_problems,
    take_turns,
    verify_bench,
)
from benchmarks.gpu_environment import carried_packages
from demos.measure import CUDA_METHOD, compare
from memory.config import ModelConfig
from tests.demos.test_cuda import cuda

TINY = ModelConfig(layers=2, hidden=64, heads=2, seq_len=32, batch=1, vocab=256)


@pytest.mark.parametrize("cfg", [TINY, TINY.replace(dtype="bfloat16", dropout=0.1)],
                         ids=["fp32", "bf16-dropout"])
def test_bytes_per_layer_measured_two_ways_equal_the_formula(cfg):
    result = layer_shape(cfg, layers=(1, 2))
    assert result["problems"] == []  # within 1% on any device
    if not torch.cuda.is_available():  # the tracker on the CPU: to the byte
        assert result["measured_per_layer_by_depth"] == result["predicted_per_layer"]
        assert result["measured_per_layer_by_checkpoint"] == result["predicted_per_layer"]
    assert "34·s·b·h" in result["explanation"]


@cuda
def test_seed_2b_layer_shape_on_cuda():
    """Hidden 2,048, batch 2, sequence 1,024, bf16, 16 heads: within 1% of the formula,
    about 32·b·s·h against the source's 34 (no dropout masks: 2·b·s·h less)."""
    result = layer_shape(layers=(1, 2))
    assert result["problems"] == [], result
    assert 31.5 < result["measured_over_sbh"] < 33


def test_a_config_over_the_limit_does_not_fit_and_the_next_run_works():
    result = limit_fault()
    assert result["problems"] == []
    assert [r["fits"] for r in result["refused"]] == [False, False]
    assert all("over the limit" in r["error"] for r in result["refused"])
    assert result["next_run_fits"]


@cuda
def test_out_of_memory_on_cuda_is_a_result_and_memory_returns_to_baseline():
    result = oom_fault()
    assert result["problems"] == [], result
    assert [c["fits"] for c in result["cases"]] == [False, False]
    assert result["next_run_fits"]


def test_two_runs_asked_at_once_take_turns():
    result = take_turns(TINY, runs=3)
    assert result["problems"] == []
    assert result["order"] == [0, 1, 2]
    assert result["waited"]["2"]["first_ahead"] == 2


@cuda
def test_cuda_default_runs_measure_with_the_allocator_and_hold_what_theory_says():
    """The held-bytes criterion (1%) on CUDA in both dtypes, offload included."""
    for dtype in ("float32", "bfloat16"):
        comp = compare(TINY.replace(hidden=128, seq_len=64, dtype=dtype),
                       ["none", "every-layer", "selective", "offload"], device="cuda", repeats=1)
        rows = [r.as_dict() for r in comp.results]
        none_held = rows[0]["activation_bytes"]
        assert all(r.measured_by == CUDA_METHOD for r in comp.results)
        assert [p for r in rows for p in row_problems(r, none_held)] == []


def test_the_held_bytes_criterion_catches_a_miss():
    row = {"strategy": "every-layer", "fits": True, "activation_bytes": 1020,
           "predicted_activation_bytes": 1000}
    assert row_problems(row) and not row_problems({**row, "activation_bytes": 1005})
    offload = {"strategy": "offload", "fits": True, "activation_bytes": 50,
               "predicted_activation_bytes": 0}
    assert row_problems(offload, none_held=1000) and not row_problems(offload, none_held=10**6)
    assert row_problems({**row, "activation_bytes": None})
    assert not row_problems({"strategy": "x", "fits": False})


def test_the_bench_criteria_hold_on_the_committed_cpu_results():
    """The reader of `python -m demos bench` output, on the CPU figures in the repository:
    held bytes equal the prediction there, so no problem is reported."""
    result = verify_bench(Path(__file__).parents[2] / "benchmarks" / "results-cpu.json")
    assert result["configs"] and all(c["rows"] for c in result["configs"])
    assert result["problems"] == []


def test_the_wheels_to_carry_are_what_the_gpu_image_lacks(tmp_path):
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("torch==2.13.0\nstreamlit==1.67.0  # the app\npandas==3.1.1\n")
    names = {line.split("==")[0] for line in carried_packages([reqs])}
    assert {"streamlit", "altair", "starlette"} <= names
    assert not names & {"torch", "pandas", "numpy", "pydeck", "sympy"}
