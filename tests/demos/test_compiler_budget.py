"""The compiler-budget sweep on a tiny model, measured for real: the budget moves the bytes
saved for backward between the end points the partitioner defines
(torch/_functorch/partitioners.py, choose_saved_values_set: 1.0 its runtime-optimised set,
0.0 only the graph's inputs), the FLOPs count the recomputation, and the manual
strategies sit on the same model. Compiling takes seconds to tens of seconds: one sweep
is shared (tests.compiler_budget_data)."""

from __future__ import annotations

import json

import pytest
import torch

from demos import cli
from demos.compiler_budget import (
    held_by_tracker,
    measure_point,
    saved_by_hooks,
    strategy_model,
)
from demos.model import make_batch
from serving.jobs import decode_result, encode_result
from tests.compiler_budget_data import SWEEP_GROUP, TINY, tiny_job, tiny_result

pytestmark = SWEEP_GROUP


def _row(frame, strategy):
    return frame[frame["strategy"] == strategy].iloc[0]


@pytest.mark.compile
def test_budget_sweep_end_points() -> None:
    frame = tiny_result()
    full, least = _row(frame, "budget:1"), _row(frame, "budget:0")
    plain = frame[(frame["kind"] == "eager") & (frame["strategy"] == "none")].iloc[0]
    # The budget moves the bytes: at 0 only the graph's inputs are saved (parameters and
    # token ids, both left out of the count), at 1 the default plan.
    assert least["saved_bytes"] < full["saved_bytes"]
    assert least["saved_bytes"] == 0
    # 1.0 is "no recomputation": the same FLOPs as the eager step without checkpointing,
    # and never more bytes kept than eager.
    assert full["recomputed_flops"] == 0
    assert full["flops"] == plain["flops"]
    assert full["saved_bytes"] <= plain["saved_bytes"]
    # 0.0 recomputes the whole forward once in backward.
    assert least["recomputed_flops"] == least["forward_flops"] == plain["forward_flops"]
    # Every point trains the same network: the gradients agree with the eager plain step.
    assert frame["max_grad_diff"].max() < 1e-5
    assert (frame["loss"] - plain["loss"]).abs().max() < 1e-5
    assert set(frame.loc[frame["kind"] == "budget", "measured_by"]) == {"saved-tensors-hooks"}


@pytest.mark.compile
def test_manual_strategies_sit_between_the_end_points() -> None:
    frame = tiny_result()
    plain = frame[(frame["kind"] == "eager") & (frame["strategy"] == "none")].iloc[0]
    every = _row(frame, "every-layer")
    matmuls = _row(frame, "selective:save-matmuls")
    other = _row(frame, "selective:save-every-other-matmul")
    assert every["saved_bytes"] < other["saved_bytes"] < matmuls["saved_bytes"] \
        < plain["saved_bytes"]
    assert 0 < matmuls["recomputed_flops"] < other["recomputed_flops"] \
        < every["recomputed_flops"] < plain["forward_flops"]


@pytest.mark.compile
def test_a_budget_result_survives_the_store() -> None:
    frame = tiny_result()
    back = decode_result(encode_result(frame))
    assert list(back["strategy"]) == list(frame["strategy"])
    assert list(back["saved_bytes"]) == list(frame["saved_bytes"])
    assert back["budget"].isna().tolist() == frame["budget"].isna().tolist()


def test_budget_job_estimates_its_compiles() -> None:
    job = tiny_job()
    works = [job.step_work(i) for i in range(job.step_count())]
    assert job.step_count() == 2 + 6  # two budgets, six eager strategies
    assert min(works[:2]) > 10 * max(works[2:])  # a compile dwarfs an eager step
    assert job.memory_bytes() > 256 * 2**20  # the compiler's own memory is bounded too


def test_tracker_and_hooks_agree_on_the_plain_model() -> None:
    """Eager points are measured with the live tracker, compiled ones with saved-tensor
    hooks: without checkpointing both see the same bytes."""
    model = strategy_model(TINY, "none")
    idx, tgt = make_batch(TINY)
    params = list(model.parameters())
    leave_out = {t.untyped_storage().data_ptr() for t in [*params, idx, tgt]}
    _, hooked = saved_by_hooks(lambda: model(idx, tgt), leave_out)
    _, tracked, events = held_by_tracker(model, lambda: model(idx, tgt), [idx, tgt])
    assert hooked == tracked > 0
    assert {e[4] for e in events} >= {"forward", "backward"}  # the whole step, tracked


def test_every_other_matmul_saves_half_the_matmuls() -> None:
    """It is a real policy: between saving every matmul and saving none, gradients exact."""
    reference = measure_point(TINY, "eager", "none", 1)[1]
    other, _ = measure_point(TINY, "eager", "selective:save-every-other-matmul", 1, reference)
    every, _ = measure_point(TINY, "eager", "every-layer", 1, reference)
    assert every.saved_bytes < other.saved_bytes
    assert other.max_grad_diff == 0.0


@pytest.mark.compile
def test_cli_budget_json(capsys: pytest.CaptureFixture) -> None:
    torch.set_num_threads(1)
    code = cli.main(["budget", "--layers", "1", "--hidden", "64", "--budgets", "1,0",
                     "--eager", "none", "--compiled", "", "--repeats", "1", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert "private" in out["setting"]
    points = {p["strategy"]: p for p in out["points"]}
    assert set(points) == {"budget:1", "budget:0", "none"}
    for point in points.values():
        assert point["flops"] > 0 and point["step_seconds"] > 0
    assert points["budget:0"]["saved_bytes"] < points["budget:1"]["saved_bytes"]


def test_cli_budget_refuses_a_budget_out_of_range(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["budget", "--budgets", "1,1.5"]) == 2
    assert "0..1" in capsys.readouterr().err
