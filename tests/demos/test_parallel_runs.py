"""Tensor, sequence, pipeline and expert parallelism run for real: two processes on the CPU over
gloo (tests/demos/parallel_child.py, one launch for every run below), each rank's bytes
saved for backward held against memory.parallel's per-GPU prediction for the tiny blocks,
and the loss and every gradient against the single-process run of the same weights.

What one tiny block keeps per token, in fp32, from the autograd nodes torch 2.13 records
for it on a CPU (the single-process run checks the sum):

* between the split blocks: each LayerNorm's input and its mean and reciprocal standard
  deviation (NativeLayerNormBackward0), 2·(h + 2) values;
* the column-split projections' inputs: the two normalised tensors (each saved once by
  the matmuls that read it), 2·h;
* inside the split blocks: q, k, v, the attention output and its log-sum-exp per head
  (ScaledDotProductFlashAttentionForCpuBackward0; the output projection's input is a view
  of the attention output), the gate projection's output (SiLU's input), SiLU's output and
  the up projection's output (the product's operands) and the product (the down
  projection's input): 4·h + a + 4·i.

torch's SequenceParallel with PrepareModuleInput all-gathers a block's input before the
column-split projections and autograd keeps the gathered tensor: the projections' inputs
stay whole on every rank (Megatron keeps each rank's shard and gathers again in backward).
"""

from __future__ import annotations

import json
import sys
import time

import pytest
import torch

from memory.parallel import (
    Layout,
    expert_bytes,
    expert_token_bytes,
    in_flight,
    input_bytes,
    split_bytes,
)
from tests.demos import parallel_child as child
from tests.demos.launch import ROOT, environment, run_processes

LAUNCH_TIMEOUT_S = 240
# one launch serves every test here: keep them on one xdist worker. The launch runs in a
# fixture that counts against the first test's time limit: give it room beyond the
# launch's own limit, so a slow launch fails with its log, not a bare timeout
pytestmark = [pytest.mark.xdist_group("parallel-runs"),
              pytest.mark.timeout(LAUNCH_TIMEOUT_S + 120)]
FP32 = 4
BETWEEN = FP32 * 2 * (child.HIDDEN + 2)
GATHERED = FP32 * 2 * child.HIDDEN
INSIDE = FP32 * (4 * child.HIDDEN + child.HEADS + 4 * child.MLP)


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("parallel") / "measured.json"
    start = time.perf_counter()
    run_processes([sys.executable, "-m", "tests.demos.parallel_child", str(out)], cwd=ROOT,
                  env=environment(), timeout_s=LAUNCH_TIMEOUT_S, what="the parallel runs")
    result = json.loads(out.read_text(encoding="utf-8"))
    result["seconds"] = time.perf_counter() - start
    return result


def block_bytes(tokens: float, tp: int = 1, sp: bool = False) -> float:
    """memory.parallel's prediction for one tiny block on one rank; torch keeps the
    gathered projection inputs (regather=False)."""
    return split_bytes(tokens, BETWEEN, GATHERED, INSIDE, tp, sp, regather=False)


def runs(measured: dict, kind: str) -> list[tuple[int, dict]]:
    return [(rank, run) for rank, ranks in enumerate(measured["ranks"])
            for run in ranks[kind]]


def assert_same_gradients(grads: dict, reference: dict) -> None:
    assert set(grads) == set(reference)
    for name, values in grads.items():
        torch.testing.assert_close(torch.tensor(values), torch.tensor(reference[name]),
                                   rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.heavy
def test_the_single_process_run_keeps_what_the_block_model_says(measured):
    tokens = child.BATCH * child.SEQ
    assert measured["single"]["tp"]["saved"] == pytest.approx(2 * block_bytes(tokens),
                                                              rel=0.01)


@pytest.mark.heavy
@pytest.mark.parametrize("sp,checkpointed", [(False, False), (False, True), (True, False),
                                             (True, True)])
def test_tensor_parallel_ranks_keep_the_predicted_bytes(measured, sp, checkpointed):
    tokens = child.BATCH * child.SEQ
    if checkpointed:  # each block's input, split along the sequence under sp
        predicted = 2 * input_bytes(tokens, child.HIDDEN, child.WORLD, sp, act_bytes=FP32)
    else:
        predicted = 2 * block_bytes(tokens, child.WORLD, sp)
    single = measured["single"]["tp"]
    chosen = [(rank, run) for rank, run in runs(measured, "tp")
              if run["sp"] == sp and run["checkpointed"] == checkpointed]
    assert [rank for rank, _ in chosen] == [0, 1]
    for _rank, run in chosen:
        assert run["saved"] == pytest.approx(predicted, rel=0.01)
        assert run["loss"] == pytest.approx(single["loss"], rel=1e-5)
        assert_same_gradients(run["grads"], single["grads"])
        whole = (torch.cat([torch.tensor(part) for part in run["x_grad"]], dim=1) if sp
                 else torch.tensor(run["x_grad"][0]))
        torch.testing.assert_close(whole, torch.tensor(single["x_grad"]), rtol=1e-4,
                                   atol=1e-5)
    print(f"tp=2 sp={sp} checkpointed={checkpointed}: {chosen[0][1]['saved']:,} bytes per "
          f"rank, predicted {predicted:,.0f}; one process {single['saved']:,}; launch "
          f"{measured['seconds']:.1f} s")


@pytest.mark.heavy
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("checkpointed", [False, True])
def test_pipeline_stages_hold_the_predicted_micro_batches(measured, schedule, checkpointed):
    """Each stage's peak of bytes held saved is the micro-batches memory.parallel says it
    holds (GPipe: all 4; 1F1B: p - stage) times its two blocks' bytes for one micro-batch;
    the first stage's linear layer also keeps its input, the micro-batches' views of one
    batch tensor, so the whole batch (each storage counts once)."""
    layout = Layout(pp=child.WORLD, microbatches=child.MICROBATCHES, schedule=schedule)
    tokens = child.SEQ  # micro-batches of one sequence
    per_block = (input_bytes(tokens, child.HIDDEN, act_bytes=FP32) if checkpointed
                 else block_bytes(tokens))
    stage_blocks = child.PIPE_BLOCKS // child.WORLD
    batch_input = child.MICROBATCHES * input_bytes(tokens, child.HIDDEN, act_bytes=FP32)
    single = measured["single"]["pp"]
    chosen = [(rank, run) for rank, run in runs(measured, "pp")
              if run["schedule"] == schedule and run["checkpointed"] == checkpointed]
    assert [rank for rank, _ in chosen] == [0, 1]
    grads: dict = {}
    for rank, run in chosen:
        predicted = in_flight(layout, rank) * stage_blocks * per_block
        if rank == 0:
            predicted += batch_input
        assert run["peak"] == pytest.approx(predicted, rel=0.01), rank
        assert run["after"] == 0  # every saved tensor freed by the end of the step
        grads.update(run["grads"])
    assert chosen[1][1]["loss"] == pytest.approx(single["loss"], rel=1e-5)
    assert_same_gradients(grads, single["grads"])
    print(f"pp=2 {schedule} checkpointed={checkpointed}: peaks "
          f"{[run['peak'] for _, run in chosen]} bytes")


@pytest.mark.heavy
def test_expert_parallel_ranks_keep_top_k_times_their_own_tokens(measured):
    """Each rank owns half the batch and holds half the experts; with balanced routing its
    experts process as many tokens as it owns (top-1), so it keeps what memory.parallel
    says: its tokens times one expert's bytes per token (the token's grouped copy, the
    gate's and up projection's outputs, SiLU's output and the product: h + 4·i values),
    the per-token bytes the planner prices each GPU's experts with
    (planner.parallel_plan.expert_split)."""
    per_token = expert_token_bytes(child.HIDDEN, child.MLP, FP32)
    tokens = child.BATCH * child.SEQ
    single = measured["single"]["ep"]
    assert single["saved"] == pytest.approx(expert_bytes(tokens, 1, per_token), rel=0.01)
    chosen = runs(measured, "ep")
    assert [rank for rank, _ in chosen] == [0, 1]
    grads: dict = {}
    for _rank, run in chosen:
        assert run["saved"] == pytest.approx(expert_bytes(tokens / child.WORLD, 1, per_token),
                                             rel=0.01)
        assert run["loss"] == pytest.approx(single["loss"], rel=1e-5)
        grads.update(run["grads"])
    assert_same_gradients(grads, single["grads"])
    whole = torch.cat([torch.tensor(run["x_grad"]) for _, run in chosen], dim=0)
    torch.testing.assert_close(whole, torch.tensor(single["x_grad"]), rtol=1e-4, atol=1e-5)


@pytest.mark.heavy  # with the others on the launch: a test ordered later would launch again
def test_context_parallel_does_not_run_on_a_cpu(measured):
    """torch 2.13's ring attention (torch/distributed/tensor/experimental/_context_parallel/
    _attention.py; _attention.py beside it only re-exports it) handles only the flash,
    memory-efficient and cuDNN attention kernels, which have no CPU kernel;
    on a CPU scaled_dot_product_attention runs _scaled_dot_product_flash_attention_for_cpu,
    for which DTensor has no sharding rule. Lesson 8 says so; its context-parallel figures
    rest on the formulas alone."""
    for ranks in measured["ranks"]:
        assert ("aten._scaled_dot_product_flash_attention_for_cpu.default does not have a "
                "sharding strategy registered") in ranks["cp_error"]


def test_the_ring_dispatches_only_kernels_that_have_no_cpu_implementation():
    """What lesson 8 cites: the ops torch 2.13's context parallelism routes to its ring
    (the custom_ops table of torch/distributed/tensor/experimental/_context_parallel/
    _attention.py) are the flash, memory-efficient and cuDNN attention kernels and their
    backwards, and none of the three forwards runs on a CPU tensor."""
    from torch.distributed.tensor.experimental._context_parallel import _attention

    aten = torch.ops.aten
    kernels = {"flash": aten._scaled_dot_product_flash_attention,
               "efficient": aten._scaled_dot_product_efficient_attention,
               "cudnn": aten._scaled_dot_product_cudnn_attention}
    names = {str(op) for op in _attention.custom_ops}
    assert names == {f"aten._scaled_dot_product_{kind}_attention{tail}.default"
                     for kind in kernels for tail in ("", "_backward")}
    q = torch.randn(1, 2, 8, 16)
    calls = {"flash": lambda op: op(q, q, q),
             "efficient": lambda op: op(q, q, q, None, True),
             "cudnn": lambda op: op(q, q, q, None, True, False)}
    for kind, op in kernels.items():
        with pytest.raises(NotImplementedError, match="'CPU' backend"):
            calls[kind](op)
