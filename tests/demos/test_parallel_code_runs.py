"""The planner's printed many-GPU code runs: two processes on the CPU over gloo
(tests/demos/parallel_code_child.py), a tiny transformers Llama tensor parallel over both,
with and without sequence parallelism, then split into two pipeline stages over 4
micro-batches (torch.distributed.pipelining, GPipe and 1F1B), its blocks checkpointed as
the plan names them and sharded with fully_shard, and transformers' own tensor-parallel
route it prints beside, and the whole script (meta device, weights read from safetensors,
two optimizer steps); the same for two mixtures of experts, a tiny Mixtral and a tiny
Qwen3-MoE (4 experts, top-2, stored as 3D parameters); the loss and every gradient equal
the one-process step. The
printed context-parallel step is compiled, its imports resolved, not run: torch 2.13 runs
context parallelism with CUDA's attention kernels only (tests/demos/test_parallel_runs.py
records what it says on a CPU)."""

from __future__ import annotations

import ast
import importlib
import json
import sys

import pytest

from memory.architectures import PRESETS
from memory.footprint import PlannerInputs
from memory.parallel import Layout
from planner.parallel_code import experts_words, tp_plan_splits_experts
from tests.demos import parallel_code_child as child
from tests.demos.launch import ROOT, environment, run_processes

LAUNCH_TIMEOUT_S = 240
# one launch serves every test here (one xdist worker); the fixture's launch counts against
# the first test's time limit, so it has room beyond the launch's own
pytestmark = [pytest.mark.xdist_group("parallel-code-runs"),
              pytest.mark.timeout(LAUNCH_TIMEOUT_S + 120)]


def moe_plan(model_type: str) -> PlannerInputs:
    """A plan of a model with experts of transformers' class `model_type` (the words on
    the experts follow its class, not its sizes)."""
    arch = PRESETS["llama-3.1-8b"].with_(family=model_type, expert_params=10**9,
                                         expert_block=10**7)
    return PlannerInputs(arch, seq=4096)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("parallel-code") / "runs.json"
    run_processes([sys.executable, "-m", "tests.demos.parallel_code_child", str(out)],
                  cwd=ROOT, env=environment(), timeout_s=LAUNCH_TIMEOUT_S,
                  what="the printed many-GPU code")
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.heavy
def test_printed_code_trains_as_one_process(runs):
    """A tiny Llama, and two mixtures of experts: their attention split over both
    processes, each MoE block (router and 3D experts) whole on both, gathering the tokens
    and keeping its slice under sequence parallelism; Qwen3's per-head q/k norms on each
    process's heads, their gradient summed (without that, their gradients are one
    process's share: a difference of 6e-3 on this model)."""
    assert [(r["sp"], r["strategy"]) for r in runs["tp"]] == [(False, "every-layer"),
                                                             (True, "some-layers")]
    assert [(r["family"], r["layout"], r["strategy"]) for r in runs["moe"]] == list(
        child.MOE_RUNS)
    for run in runs["tp"] + runs["moe"]:
        assert run["loss"] == pytest.approx(run["reference"], rel=1e-5)
        assert run["grad_max"] > 0
        assert run["grad_max_diff"] <= 1e-5 * max(1.0, run["grad_max"])


@pytest.mark.heavy
def test_printed_code_checkpoints_the_blocks_it_names(runs):
    every, some = runs["tp"]
    assert every["checkpointed"] == [True] * 4
    assert some["checkpointed"] == [True, True, False, False]


@pytest.mark.heavy
def test_printed_code_checkpoints_the_decoder_layers_of_mixtures_of_experts(runs):
    """The blocks wrapped are the models' decoder layers (FSDP's class around each, the
    transformers class inside)."""
    mixtral, mixtral_fsdp, qwen, qwen_sp = runs["moe"]
    for run, layer in ((mixtral, "MixtralDecoderLayer"), (mixtral_fsdp, "MixtralDecoderLayer"),
                       (qwen, "Qwen3MoeDecoderLayer"), (qwen_sp, "Qwen3MoeDecoderLayer")):
        assert all(name.endswith(layer) for name in run["blocks"]), run["blocks"]
    assert mixtral["checkpointed"] == [True, True, False, False]  # some-layers: 2 of 4
    assert mixtral_fsdp["checkpointed"] == qwen["checkpointed"] == [True] * 4
    assert qwen_sp["checkpointed"] == [True] * 4


@pytest.mark.heavy
def test_printed_pipeline_trains_as_one_process(runs):
    """Each stage's gradients equal the one-process run's for its own parameters (the
    first stage: the embedding and blocks 0-1, the last: blocks 2-3, the norm and the
    head), and the mean of the last stage's micro-batch losses is the whole batch's."""
    assert [(r["family"], r["schedule"], r["strategy"]) for r in runs["pp"]] == list(
        child.PIPE_RUNS)
    for run in runs["pp"]:
        first, last = run["ranks"]
        assert first["loss"] is None
        assert last["loss"] == pytest.approx(last["reference"], rel=1e-5)
        assert all(name.startswith(("model.embed_tokens", "model.layers.0.",
                                    "model.layers.1.")) for name in first["grads"])
        assert all(name.startswith(("model.norm", "lm_head", "model.layers.2.",
                                    "model.layers.3.")) for name in last["grads"])
        # every parameter has its gradient on one stage (Llama: 3 + 4 x 9)
        assert len(first["grads"]) + len(last["grads"]) == first["parameters"]
        for rank in (first, last):
            assert rank["grad_max_diff"] <= 1e-5 * max(1.0, rank["grad_max"])
    assert runs["pp"][0]["ranks"][0]["parameters"] == 3 + 4 * 9
    # Mixtral's stages hold its experts (3D parameters) and routers
    assert "model.layers.0.mlp.experts.gate_up_proj" in runs["pp"][2]["ranks"][0]["grads"]


@pytest.mark.heavy
def test_printed_pipeline_checkpoints_the_blocks_it_names(runs):
    """Every block under every-layer; some-layers (2 of the 8B preset's 32 layers) is one
    block in each of the two stages: `if i < 1` in the printed loop (Llama and Mixtral)."""
    every, some, mixtral = runs["pp"]
    assert [rank["checkpointed"] for rank in every["ranks"]] == [[True, True]] * 2
    assert [rank["checkpointed"] for rank in some["ranks"]] == [[True, False]] * 2
    assert [rank["checkpointed"] for rank in mixtral["ranks"]] == [[True, False]] * 2
    assert "if i < 1:" in child.printed("some-layers", Layout(pp=2, microbatches=4))


@pytest.mark.heavy
def test_the_printed_transformers_route_trains_as_one_process(runs):
    """transformers' own tensor parallelism (the class's base_model_tp_plan through
    from_pretrained's DistributedConfig), printed beside torch's: its weights are split
    (DTensor), every layer checkpointed, and the loss and gradients are one process's; for
    Mixtral and Qwen3-MoE it splits the experts (half of each expert's gate and up rows on
    each process) where the installed class's plan names them (transformers 5.24) and
    keeps them whole where it does not (5.25), as the words on the experts say."""
    assert [run["family"] for run in runs["transformers"]] == list(child.TRANSFORMERS_RUNS)
    for run in runs["transformers"]:
        assert run["split"] == "DTensor" and run["checkpointed"] == [True] * 4
        assert run["loss"] == pytest.approx(run["reference"], rel=1e-5)
        assert run["grad_max_diff"] <= 1e-5 * max(1.0, run["grad_max"])
    llama, mixtral, qwen = runs["transformers"]
    assert llama["expert_rows"] is None
    for run in (mixtral, qwen):
        mine, whole = run["expert_rows"]
        words = experts_words(moe_plan(run["model_type"]), Layout(tp=2))
        if tp_plan_splits_experts(run["model_type"]):
            assert mine * 2 == whole, (f"{run['family']}: the class's tp_plan left the "
                                       f"experts whole ({mine} of {whole} rows on each process)")
            assert "as transformers' from_pretrained with a DistributedConfig splits" in words
        else:
            assert mine == whole, f"{run['family']}: {mine} of {whole} rows on each process"
            assert "own route keeps them whole as well" in words


@pytest.mark.heavy
def test_the_printed_script_trains_as_one_process(runs):
    """The whole script: the tiny Llama built with its parameters on the meta device,
    split (tensor with sequence parallelism; two 1F1B stages), each rank reading its
    slices of the saved safetensors, then two AdamW steps: both steps' losses are one
    process's that loaded the same checkpoint (so the weights were read, and the
    optimizer stepped them alike); on the pipeline, the last stage's."""
    assert [(r["layout"], r["strategy"]) for r in runs["script"]] == list(child.SCRIPT_RUNS)
    tp, pp = runs["script"]
    for rank in (*tp["ranks"], pp["ranks"][1]):
        assert rank["built_on"] == ["meta"]
        assert rank["losses"] == pytest.approx(rank["reference"], rel=1e-5)
        assert rank["losses"][0] != rank["losses"][1]
    assert pp["ranks"][0]["losses"] == [0.0, 0.0]  # the first stage has no loss


def test_printed_context_parallel_code_compiles_and_its_imports_resolve():
    code = child.printed("every-layer", Layout(tp=2, sp=True, cp=2, pp=2, microbatches=4))
    tree = ast.parse(code)
    namespace: dict = {}
    exec(compile(tree, "<plan>", "exec"), namespace)  # noqa: S102 - defines functions only
    assert callable(namespace["context_parallel_step"])
    for node in ast.walk(tree):  # the imports inside the functions too
        if isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{node.module}.{alias.name}"
