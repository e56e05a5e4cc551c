"""Runs the planner's printed many-GPU code (planner.parallel_code) in two processes on
the CPU over gloo: a tiny transformers Llama, tensor parallel over both ranks, every block
checkpointed and sharded with fully_shard. Each rank writes its loss, the reference loss
of the same weights in one process, and which blocks ran checkpointed."""

from __future__ import annotations

import copy
import json
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper
from transformers import LlamaForCausalLM

from memory.architectures import PRESETS
from memory.footprint import PlannerInputs
from memory.parallel import Layout
from planner.parallel_code import parallel_code
from tests.demos.tiny_hf import SEQ, TINY

WORLD = 2


def printed(sp: bool, strategy: str) -> str:
    p = PlannerInputs(PRESETS["llama-3.1-8b"], strategy=strategy, some_layers=2)
    return parallel_code(p, Layout(tp=WORLD, sp=sp))


def _full(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's whole value (a plain tensor as it is), detached."""
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach()


RUNS = ((False, "every-layer"), (True, "some-layers"))  # some-layers: the first 2 of 4


def _run(rank: int, store: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=WORLD)
    try:
        results = [{"sp": sp, "strategy": strategy, **_step(sp, strategy)}
                   for sp, strategy in RUNS]
        if rank == 0:
            with open(out, "w", encoding="utf-8") as handle:
                json.dump(results, handle)
    finally:
        dist.destroy_process_group()


def _step(sp: bool, strategy: str) -> dict:
    """One training step of the printed code and of the same weights in one process."""
    torch.manual_seed(0)
    config = TINY["llama"]()
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(config)
    ids = torch.randint(0, config.vocab_size, (2, SEQ), generator=torch.Generator()
                        .manual_seed(1))
    reference = copy.deepcopy(model)
    positions = torch.arange(SEQ).expand(2, SEQ)
    ref_loss = reference(input_ids=ids, labels=ids).loss
    ref_loss.backward()
    namespace: dict = {}
    exec(printed(sp, strategy), namespace)  # noqa: S102 - the code under test
    mesh = namespace["build_mesh"]("cpu")
    namespace["parallelize"](model, mesh)
    loss = model(input_ids=ids, labels=ids, position_ids=positions).loss
    loss.backward()
    pairs = list(zip(model.parameters(), reference.parameters(), strict=True))
    grad_diff = max((_full(p.grad) - r.grad).abs().max().item() for p, r in pairs)
    grad_scale = max(r.grad.abs().max().item() for _, r in pairs)
    wrapped = [isinstance(block, CheckpointWrapper) for block in model.model.layers]
    return {"loss": _full(loss).item(), "reference": ref_loss.item(),
            "grad_max_diff": grad_diff, "grad_max": grad_scale,
            "checkpointed": wrapped}


def main(out: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(_run, args=(f"{folder}/store", out), nprocs=WORLD, join=True)


if __name__ == "__main__":
    main(sys.argv[1])
