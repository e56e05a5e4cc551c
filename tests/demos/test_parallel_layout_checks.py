"""Layouts checked as the libraries check them (planner.parallel_plan.check_layout): tensor
parallelism splits whole attention and key/value heads and stays inside a node, a pipeline
stage holds a layer, 1F1B runs at least as many micro-batches as stages. Each layout below
was planned, with code, by the earlier planner; torch 2.13's Schedule1F1B raises on the
last one."""

from __future__ import annotations

import json

import pytest

from memory import parallel as M
from memory.architectures import PRESETS
from memory.footprint import PlannerInputs
from planner import parallel_plan as PP
from planner.cli import main
from tests.demos.class_fixtures import FOLDER

REFUSED = [  # flags on Llama 3.1 70B (64 heads, 8 key/value heads, 80 layers) -> the line
    (["--tp", "3", "--gpus", "3"], "--tp 3 must divide the model's 64 attention heads"),
    (["--tp", "16", "--gpus", "16"], "--tp 16 is more than the 8 GPUs of a node"),
    (["--tp", "16", "--gpus", "16", "--gpus-per-node", "16"],
     "--tp 16 must divide the model's 8 key/value heads"),
    (["--pp", "128", "--gpus", "128"], "more than the model's 80 layers"),
    (["--pp", "4", "--microbatches", "2", "--gpus", "4"],
     "needs at least as many micro-batches as stages: --microbatches 2 for --pp 4"),
    (["--pp", "16", "--schedule", "interleaved", "--chunks", "8", "--microbatches", "16",
      "--gpus", "16"], "--pp 16 x --chunks 8 stages are more than the model's 80 layers"),
]


@pytest.mark.parametrize("flags,says", REFUSED, ids=lambda v: " ".join(v)[:30])
def test_a_layout_the_model_or_the_nodes_cannot_run_is_one_line(flags, says, capsys):
    assert main(["--model", "llama-3.1-70b", *flags]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


def test_the_replicated_key_value_heads_are_said(capsys):
    """Fewer key/value heads than t: the line says that none is replicated, and that the
    planner counts them split (memory.parallel divides the keys and values by t)."""
    assert main(["--model", "llama-3.1-70b", "--tp", "16", "--gpus", "16",
                 "--gpus-per-node", "16"]) == 2
    err = capsys.readouterr().err
    assert "replicate none" in err and "divided by tp" in err


def test_gpipe_runs_any_number_of_micro_batches(capsys):
    assert main(["--model", "llama-3.1-70b", "--pp", "4", "--schedule", "gpipe",
                 "--microbatches", "2", "--gpus", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["parallel"]["layout"]["microbatches"] == 2


def test_a_pasted_configs_own_heads_and_layers_are_checked(capsys):
    """Mixtral: 32 heads, 8 key/value heads, 32 layers (its class's architecture)."""
    config = str(FOLDER / "mixtral-8x7b.json")
    assert main(["--config", config, "--tp", "16", "--gpus", "16",
                 "--gpus-per-node", "16"]) == 2
    assert "8 key/value heads" in capsys.readouterr().err
    assert main(["--config", config, "--pp", "64", "--gpus", "64"]) == 2
    assert "more than the model's 32 layers" in capsys.readouterr().err


def test_check_layout_names_each_rule():
    arch = PRESETS["llama-3.1-8b"]  # 32 heads, 8 key/value heads, 32 layers
    cases = {"tp-heads": (M.Layout(tp=3), 8), "tp-node": (M.Layout(tp=8), 4),
             "tp-kv-heads": (M.Layout(tp=16), 16),
             "pp-layers": (M.Layout(pp=64, microbatches=64), 8),
             "chunks-layers": (M.Layout(pp=8, schedule="interleaved", chunks=8,
                                        microbatches=8), 8),
             "microbatches": (M.Layout(pp=4, microbatches=3), 8)}
    for problem, (layout, per_node) in cases.items():
        with pytest.raises(PP.LayoutRefused) as refused:
            PP.check_layout(layout, arch, per_node)
        assert refused.value.problem == problem and refused.value.params
    assert PP.check_layout(M.Layout(tp=8, pp=4, microbatches=4), arch, 8)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_recommended_layout_passes_the_checks(preset):
    p = PlannerInputs(PRESETS[preset], seq=8192, accumulation=2)
    for gpus in (2, 8, 16, 64, 256):
        for per_node in (4, 8):
            for _, layout in PP.candidates(p, gpus, per_node):
                PP.check_layout(layout, p.arch, per_node)
