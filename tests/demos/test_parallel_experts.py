"""Expert parallelism in the planner: a mixture-of-experts model's expert weights counted on
its transformers class, split over the expert-parallel GPUs and sharded by FSDP over the
rest, and what its experts keep per GPU with balanced routing; checked against sums done by
hand for Mixtral 8x7B (its public config.json) and on the command line."""

from __future__ import annotations

import json

import pytest

from memory import parallel as M
from memory.footprint import PlannerInputs
from planner import parallel_plan as PP
from planner.class_memory import MeasuredClass
from planner.cli import main
from tests.demos.class_fixtures import FOLDER, load

H, WIDTH, EXPERTS, LAYERS = 4096, 14336, 8, 32  # Mixtral 8x7B
EXPERT = 3 * H * WIDTH  # gate, up and down projections of one expert
MIXED_ADAMW = 6 + 4 + 8  # bytes per parameter: fp32 master + bf16 copy, fp32 grad, 2 states
BF16 = 2


@pytest.fixture(scope="module")
def mixtral() -> PlannerInputs:
    arch = MeasuredClass(load("mixtral-8x7b")).architecture()
    return PlannerInputs(arch, seq=4096, batch=1, precision="mixed", optimizer="adamw",
                         shards=8)


def test_the_experts_are_counted_on_the_class(mixtral):
    assert mixtral.arch.expert_block == EXPERTS * EXPERT
    assert mixtral.arch.expert_params == LAYERS * EXPERTS * EXPERT  # 45.1 billion


def test_expert_parallel_4_of_8_gpus_by_hand(mixtral):
    """8 GPUs, FSDP over all of them, ep = 4: each GPU holds 2 of the 8 experts of each
    layer, sharded over the 2 GPUs that hold the same ones: its share of the experts'
    state is 1/8, as FSDP alone gives; the layer FSDP gathers holds 2 experts, not 8."""
    layout = M.Layout(dp=8, ep=4)
    split = PP.expert_split(mixtral, layout, (EXPERTS, 2))
    assert (split.per_gpu, split.sharded_over) == (2, 2)
    assert split.state == pytest.approx(LAYERS * EXPERTS * EXPERT * MIXED_ADAMW / 8,
                                        rel=1e-9)
    # two layers gathered at once (one prefetched), in bf16, half of them from the other GPU
    assert split.gathered == pytest.approx(2 * BF16 * (EXPERTS // 4) * EXPERT * 1 / 2,
                                           rel=1e-9)
    # balanced routing, top-2: the GPU's 4,096 tokens reach 2 experts each; an expert keeps
    # the token's copy and 4 of its width per token, in bf16
    assert split.layer_activations == 4096 * 2 * BF16 * (H + 4 * WIDTH)
    whole = PP.expert_split(mixtral, M.Layout(dp=8), (EXPERTS, 2))
    assert whole.layer_activations == split.layer_activations  # whatever ep is
    assert whole.gathered == pytest.approx(2 * BF16 * EXPERTS * EXPERT * 7 / 8, rel=1e-9)


def test_the_gpu_rows_drop_the_gathered_experts(mixtral):
    """Every strategy's peak on a GPU falls by what FSDP no longer gathers: all 8 experts
    of two layers from 7 of 8 GPUs, against 2 of them from 1 of 2 (plus the fragmentation
    allowance on it); the activations stay."""
    plain = PP.gpu_rows(mixtral, M.Layout(dp=8))
    split = PP.gpu_rows(mixtral, M.Layout(dp=8, ep=4))
    saving = 2 * BF16 * EXPERT * (EXPERTS * 7 / 8 - 2 * 1 / 2)
    for strategy, row in plain.items():
        assert row.kept == split[strategy].kept
        assert row.state - split[strategy].state == pytest.approx(saving, rel=1e-9)


def test_the_command_line_splits_the_experts(capsys):
    assert main(["--config", str(FOLDER / "mixtral-8x7b.json"), "--seq", "4096",
                 "--gpus", "16", "--tp", "2", "--sp", "--ep", "4", "--gpu", "h100",
                 "--json"]) == 0
    par = json.loads(capsys.readouterr().out)["parallel"]
    assert par["layout"]["ep"] == 4 and par["layout"]["dp"] == 8
    experts = par["experts"]
    assert (experts["experts_per_gpu"], experts["sharded_over_gpus"]) == (2, 2)
    assert experts["expert_params"] == LAYERS * EXPERTS * EXPERT
    assert experts["routing"].startswith("balanced")


@pytest.mark.parametrize("flags,says", [
    (["--model", "llama-3.1-8b", "--gpus", "8", "--ep", "2"], "mixture-of-experts"),
    (["--config", str(FOLDER / "mixtral-8x7b.json"), "--gpus", "16", "--ep", "16"],
     "must divide the model's 8 experts"),
])
def test_ep_refusals_say_why(capsys, flags, says):
    assert main([*flags]) == 2
    assert says in capsys.readouterr().err
