"""Placement on the lab's model with unequal layers (demos.placement_lab on
memory.lab_chain): the chain's prediction is the theory's for equal layers, and one real
step per method peaks where predicted, within the budget for the optimal placement,
which recomputes the fewest FLOPs torch's counter counts."""

from __future__ import annotations

import pytest

from demos import placement_lab
from memory import lab_chain, theory
from memory.config import ModelConfig
from memory.strategies import parse_strategy

SMALL = ModelConfig(layers=8, hidden=32, heads=2, seq_len=128, batch=2, vocab=128)


@pytest.mark.parametrize(
    "cfg",
    [
        SMALL,
        ModelConfig(layers=5, hidden=64, heads=4, seq_len=64, batch=2, vocab=2048, dropout=0.1),
    ],
)
def test_the_chain_of_equal_layers_predicts_what_the_theory_does(cfg):
    chain = lab_chain.chain(cfg, lab_chain.mlp_widths(cfg, "equal"))
    for name in ("none", "every-layer", "every-k:2", "every-k:3", "budget:dp:60%"):
        spec = parse_strategy(name)
        assert chain.need(theory.plan_for(cfg, spec)) == theory.predicted_peak_bytes(cfg, spec)
    assert lab_chain.parameter_bytes(cfg, lab_chain.mlp_widths(cfg, "equal")) == (
        theory.parameter_bytes(cfg)
    )


def test_unequal_layers_measured_each_method_as_predicted_and_the_optimum_recomputes_least():
    run = placement_lab.run(SMALL, "unequal", 0.5)
    assert run.widths[0] == 16 * SMALL.hidden
    model = placement_lab.build_unequal(SMALL, run.widths)
    assert sum(p.numel() * p.element_size() for p in model.parameters()) == run.parameter_bytes
    for r in run.runs:
        assert r.error is None, r.method
        assert r.peak_bytes == pytest.approx(r.predicted_peak_bytes, rel=0.01), r.method
        assert r.recompute_flops == pytest.approx(r.predicted_recompute_flops, rel=0.01)
        if r.within_budget:
            assert r.peak_bytes <= run.budget_bytes, r.method
    best = run.run_of("optimal")
    assert best.within_budget and best.recompute_flops > 0
    # the optimum of whole layers: torch's SAC solver saves single ops inside every block
    others = [r for r in run.runs if r.method not in ("optimal", "sac") and r.within_budget]
    assert {r.method for r in others} >= {"first-k", "every", "greedy"}
    for r in others:
        assert best.recompute_flops < r.recompute_flops, r.method
    assert not run.run_of("sqrt").within_budget  # √N segments put the wide layer in a pair
    assert run.to_json()["runs"][0]["checkpointed_layers"] == best.checkpointed
    # torch's SAC solver's row: measured within the budget as predicted (above), saving
    # some ops in every block, so it recomputes less than checkpointing every layer
    sac = run.run_of("sac")
    assert sac.within_budget and 0 < sac.share < 1
    assert sac.checkpointed == list(range(SMALL.layers))
    assert sac.recompute_flops < run.run_of("every").recompute_flops


def test_torchs_sac_solver_says_when_even_saving_nothing_does_not_fit():
    from demos.sac_placement import METHOD

    run = placement_lab.run(SMALL, "unequal", 0.2, methods=("every",), measure=False)
    every, sac = run.runs
    assert not every.within_budget and sac.method == METHOD
    assert not sac.ran and "too small for torch's SAC solver" in sac.error
    assert sac.error.endswith(" bytes)")


def test_the_compare_command_prints_each_placements_layers(capsys):
    import json

    from demos.cli import main

    small = [
        "--layers",
        "4",
        "--hidden",
        "32",
        "--heads",
        "2",
        "--seq",
        "64",
        "--batch",
        "2",
        "--vocab",
        "64",
        "--device",
        "cpu",
    ]
    assert (
        main(
            [
                "compare",
                *small,
                "--placement",
                "optimal,every,sac",
                "--budget",
                "80%",
                "--shape",
                "unequal",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    optimal, every, sac = out["runs"]
    assert every["checkpointed_layers"] == [0, 1, 2, 3]
    assert sac["method"] == "sac" and sac["share"] is not None
    assert sac["peak_bytes"] == pytest.approx(sac["predicted_peak_bytes"], rel=0.01)
    assert optimal["within_budget"] and optimal["peak_bytes"] <= out["budget_bytes"]
    assert optimal["checkpointed_layers"] == [
        i for a, b, mode in optimal["segments"] if mode == "checkpoint" for i in range(a, b)
    ]
    assert main(["compare", *small, "--placement", "optimal"]) == 2  # no budget
    assert "--budget" in capsys.readouterr().err


def test_a_placement_job_estimates_bounds_and_stores_its_run():
    from memory.placement import place
    from serving import placement_jobs
    from serving.jobs import Job, decode_result, encode_result

    job = Job.make("placement", SMALL, (), **placement_jobs.options("unequal", 50))
    assert Job.from_request(job.request()) == job
    result = placement_lab.run(SMALL, "unequal", 0.5, measure=False)
    result.step_flops = 123.0
    result.runs[0].peak_bytes, result.runs[0].recompute_flops = 456, 789.0
    again = decode_result(encode_result(result))
    assert again.to_json() == result.to_json() and again.frontier == result.frontier
    chain = lab_chain.chain(SMALL, result.widths)
    plain = chain.need(place("none", chain))
    assert job.memory_bytes("cpu") == result.parameter_bytes + plain
    # a tracked and a counted step per distinct plan, the plain one included (and one for
    # torch's SAC solver's row, which step_work adds)
    distinct = {tuple(r.segments) for r in result.runs if r.error is None and r.method != "sac"}
    assert len(placement_jobs.plans(chain, 50)) == len(distinct)
    assert job.step_count() == 1 and job.step_work(0) > 0
