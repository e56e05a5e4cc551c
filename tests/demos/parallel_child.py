"""Tensor and pipeline parallelism run for real on the CPU: `python -m
tests.demos.parallel_child OUT` spawns two processes that talk over gloo (a file store,
no port), and rank 0 writes what they measured to OUT (JSON).

The model is a stack of tiny pre-norm decoder blocks (LayerNorm, causal attention through
torch's scaled_dot_product_attention, a SiLU-gated MLP), in fp32. Each run measures, on
every rank, the bytes autograd saves for backward (saved_tensors_hooks, each storage
once, parameters left out), the loss and every gradient, beside a single-process run of
the same weights:

* tensor parallel 2 (DTensor `parallelize_module`: ColwiseParallel for q, k, v, gate and
  up, RowwiseParallel for the output and down projections), without and with sequence
  parallelism (SequenceParallel norms, PrepareModuleInput gathering the blocks' inputs),
  each without and with every block checkpointed: the bytes saved over one forward;
* pipeline parallel 2 (`torch.distributed.pipelining`, two blocks per stage behind a
  linear "embedding" on the first) over 4 micro-batches, ScheduleGPipe and Schedule1F1B,
  each without and with every block checkpointed: the most bytes held saved at once over
  the step (a stage keeps the micro-batches it ran forward and not yet backward);
* expert parallel 2 (a mixture-of-experts MLP, 4 experts, a fixed balanced top-1 router,
  the tokens sent to their experts' rank and back with the differentiable
  `torch.distributed.nn.functional.all_to_all_single`): the bytes saved over one forward;
* context parallel 2 (`torch.distributed.tensor.experimental.context_parallel`): what
  torch says when it cannot run it on a CPU.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from demos.pipeline_bubble import exit_without_teardown

# Distinct sizes, so no two kinds of tensor share a shape.
BATCH, SEQ, HIDDEN, HEADS, MLP = 2, 12, 24, 4, 40
WORLD = 2
PIPE_BLOCKS, MICROBATCHES = 4, 4


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(HIDDEN, HIDDEN, bias=False)
                                          for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = (proj(x).view(b, s, -1, HIDDEN // HEADS).transpose(1, 2)
                   for proj in (self.q, self.k, self.v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(out.transpose(1, 2).reshape(b, s, -1))


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Linear(HIDDEN, MLP, bias=False)
        self.up = nn.Linear(HIDDEN, MLP, bias=False)
        self.down = nn.Linear(MLP, HIDDEN, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(HIDDEN, elementwise_affine=False)
        self.attn = Attention()
        self.norm2 = nn.LayerNorm(HIDDEN, elementwise_affine=False)
        self.mlp = Mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Stack(nn.Module):
    """Blocks, each run under a non-reentrant checkpoint when `checkpointed`; an optional
    linear layer first (the pipeline's first stage: its input then needs no gradient)."""

    def __init__(self, blocks: list[Block], checkpointed: bool, embed: nn.Module | None = None):
        super().__init__()
        self.embed = embed
        self.blocks = nn.ModuleList(blocks)
        self.checkpointed = checkpointed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.embed is not None:
            x = self.embed(x)
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointed else block(x)
        return x


def _local(t: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


def _storage(t: torch.Tensor) -> int:
    return _local(t).untyped_storage().data_ptr()


class SavedBytes:
    """saved_tensors_hooks that count each storage autograd saves once while it is saved
    (parameters left out): `total` over the run, `peak` held at once."""

    def __init__(self, params: list[torch.Tensor]) -> None:
        self.leave_out = {_storage(p) for p in params}
        self.holders: dict[int, int] = {}
        self.sizes: dict[int, int] = {}
        self.live = self.peak = self.total = 0

    def _release(self, key: int) -> None:
        self.holders[key] -= 1
        if not self.holders[key]:
            self.live -= self.sizes.pop(key)
            del self.holders[key]

    def pack(self, t: torch.Tensor) -> Any:
        if _local(t).is_meta:  # the pipeline's shape inference runs a forward on meta tensors
            return t
        key = _storage(t)
        if key in self.leave_out:
            return t
        if key not in self.holders:
            self.holders[key] = 0
            self.sizes[key] = _local(t).untyped_storage().nbytes()
            self.live += self.sizes[key]
            self.total += self.sizes[key]
            self.peak = max(self.peak, self.live)
        self.holders[key] += 1
        return _Held(t, key, self)

    @staticmethod
    def unpack(held: Any) -> torch.Tensor:
        return held.tensor if isinstance(held, _Held) else held

    def hooks(self) -> torch.autograd.graph.saved_tensors_hooks:
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)


class _Held:
    """A saved tensor; when autograd drops it (its node ran backward), it leaves the count."""

    def __init__(self, tensor: torch.Tensor, key: int, owner: SavedBytes) -> None:
        self.tensor, self.key, self.owner = tensor, key, owner

    def __del__(self) -> None:
        self.owner._release(self.key)


def blocks(count: int) -> list[Block]:
    torch.manual_seed(0)
    return [Block() for _ in range(count)]


def data(batch: int) -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(batch, SEQ, HIDDEN)


def _grads(module: nn.Module) -> dict[str, list]:
    from torch.distributed.tensor import DTensor

    return {name: (p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad).tolist()
            for name, p in module.named_parameters()}


def square_sum(out: torch.Tensor) -> torch.Tensor:
    return out.square().sum()


def measured_step(module: nn.Module, x: torch.Tensor, shared: bool = False,
                  loss_of: Callable[[torch.Tensor], torch.Tensor] = square_sum
                  ) -> tuple[int, float]:
    """One forward under the counting hooks, then backward: the bytes saved over the
    forward, and the loss (summed over the ranks when each holds a share, `shared`)."""
    counter = SavedBytes(list(module.parameters()))
    with counter.hooks():
        out = module(x)
    loss = loss_of(out)
    loss.backward()
    total = loss.detach().clone()
    if shared:
        dist.all_reduce(total)
    return counter.total, total.item()


def reference(count: int, batch: int, loss_of: Callable[[torch.Tensor], torch.Tensor],
              embed: bool = False) -> dict[str, Any]:
    """One process, no parallelism: the bytes saved over the forward, loss, gradients."""
    torch.manual_seed(2)
    first = nn.Linear(HIDDEN, HIDDEN, bias=False) if embed else None
    model = Stack(blocks(count), checkpointed=False, embed=first)
    x = data(batch).requires_grad_(not embed)
    saved, loss = measured_step(model, x, loss_of=loss_of)
    return {"saved": saved, "loss": loss, "grads": _grads(model),
            "x_grad": x.grad.tolist() if x.grad is not None else None}


def tensor_parallel(rank: int, sp: bool, checkpointed: bool) -> dict[str, Any]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    mesh = init_device_mesh("cpu", (WORLD,))
    plan: dict[str, Any] = {name: ColwiseParallel()
                            for name in ("attn.q", "attn.k", "attn.v", "mlp.gate", "mlp.up")}
    if sp:
        gather = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
        plan.update({"norm1": SequenceParallel(), "norm2": SequenceParallel(),
                     "attn": gather, "mlp": gather,
                     "attn.o": RowwiseParallel(output_layouts=Shard(1)),
                     "mlp.down": RowwiseParallel(output_layouts=Shard(1))})
    else:
        plan.update({"attn.o": RowwiseParallel(), "mlp.down": RowwiseParallel()})
    model = Stack(blocks(2), checkpointed)
    for block in model.blocks:
        parallelize_module(block, mesh, plan)
    whole = data(BATCH)
    x = (whole.chunk(WORLD, dim=1)[rank] if sp else whole).clone().requires_grad_()
    saved, loss = measured_step(model, x, shared=sp)  # under sp each rank holds a share
    x_grad = [None] * WORLD
    dist.all_gather_object(x_grad, x.grad.tolist())
    return {"rank": rank, "saved": saved, "loss": loss, "grads": _grads(model),
            "x_grad": x_grad}


class Experts(nn.Module):
    """A mixture-of-experts MLP with a fixed, balanced router (token j goes to expert
    j mod E, top-1), its experts split over the `ep` ranks of `group`: tokens are grouped
    by expert, sent to the rank that holds their expert (all-to-all), run through it, and
    sent back. ep = 1 runs every expert locally."""

    def __init__(self, experts: list[Mlp], ep: int = 1, rank: int = 0) -> None:
        super().__init__()
        self.count = len(experts) * ep
        self.ep, self.first = ep, rank * len(experts)
        self.experts = nn.ModuleList(experts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.distributed.nn.functional import all_to_all_single

        shape = x.shape
        # [tokens, h] -> [experts, tokens per expert, h]: a copy, grouped by expert
        grouped = x.reshape(-1, self.count, shape[-1]).transpose(0, 1).contiguous()
        if self.ep > 1:
            grouped = all_to_all_single(torch.empty_like(grouped), grouped)
            # now [ranks, local experts, tokens, h]: every rank's tokens for my experts
        mine = grouped.view(self.ep, len(self.experts), -1, shape[-1])
        # one contiguous input per expert (its projections would each copy a strided one)
        out = torch.stack([expert(mine[:, index].contiguous()) for index, expert in
                           enumerate(self.experts)], dim=1).view_as(grouped)
        if self.ep > 1:
            out = all_to_all_single(torch.empty_like(out), out)
        return out.transpose(0, 1).reshape(shape)


def experts(count: int) -> list[Mlp]:
    torch.manual_seed(3)
    return [Mlp() for _ in range(count)]


EXPERTS = 4


def expert_parallel(rank: int) -> dict[str, Any]:
    """Expert parallel 2: each rank holds half of the experts and its own half of the batch."""
    per_rank = EXPERTS // WORLD
    layer = Experts(experts(EXPERTS)[rank * per_rank:(rank + 1) * per_rank], WORLD, rank)
    x = data(BATCH).chunk(WORLD, dim=0)[rank].clone().requires_grad_()
    saved, loss = measured_step(layer, x, shared=True)
    grads = {f"experts.{int(name.split('.')[1]) + rank * per_rank}.{name.split('.', 2)[2]}": value
             for name, value in _grads(layer).items()}
    return {"rank": rank, "saved": saved, "loss": loss, "grads": grads,
            "x_grad": x.grad.tolist()}


def expert_reference() -> dict[str, Any]:
    layer = Experts(experts(EXPERTS))
    x = data(BATCH).requires_grad_()
    saved, loss = measured_step(layer, x)
    return {"saved": saved, "loss": loss, "grads": _grads(layer), "x_grad": x.grad.tolist()}


def context_parallel_attempt() -> str:
    """Context parallel 2 with torch's own `context_parallel` (ring attention over the
    sequence of the input buffer): on a CPU torch 2.13 stops before attention runs. The
    error it raises, or "" when it ran."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel

    mesh = init_device_mesh("cpu", (WORLD,))
    attention = Attention()
    x = data(1)
    try:
        with context_parallel(mesh, buffers=[x], buffer_seq_dims=[1]):
            attention(x).sum().backward()
    except NotImplementedError as error:
        return str(error)
    return ""


def _global_name(name: str, offset: int) -> str:
    """A stage's parameter name as the whole stack names it ("blocks.0.x" -> "blocks.2.x")."""
    if not name.startswith("blocks."):
        return name
    _, index, rest = name.split(".", 2)
    return f"blocks.{int(index) + offset}.{rest}"


def pipeline(rank: int, schedule: str, checkpointed: bool) -> dict[str, Any]:
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    per_stage = PIPE_BLOCKS // WORLD
    every = blocks(PIPE_BLOCKS)
    torch.manual_seed(2)
    embed = nn.Linear(HIDDEN, HIDDEN, bias=False)
    mine = every[rank * per_stage:(rank + 1) * per_stage]
    module = Stack(mine, checkpointed, embed=embed if rank == 0 else None)
    stage = PipelineStage(module, rank, WORLD, torch.device("cpu"))
    kind = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule]
    runner = kind(stage, MICROBATCHES, loss_fn=lambda out, target: out.mean())
    x, target = data(MICROBATCHES), torch.zeros(MICROBATCHES)

    def step(losses: list[torch.Tensor]) -> None:
        if rank == 0:
            runner.step(x)
        else:
            runner.step(target=target, losses=losses)

    # The first step infers what the stages exchange by running each stage's forward once
    # more with gradients on (PipelineStage._forward_metadata_inference, torch 2.13); on the
    # first stage that graph's saved tensors stay held through the step. Measure the second.
    step([])
    module.zero_grad()
    counter = SavedBytes(list(module.parameters()))
    losses: list[torch.Tensor] = []
    with counter.hooks():
        step(losses)
    grads = {_global_name(name, rank * per_stage): value
             for name, value in _grads(module).items()}
    return {"rank": rank, "peak": counter.peak, "after": counter.live, "grads": grads,
            "loss": (torch.stack(losses).mean().item() if losses else None)}


def _run(rank: int, store: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=WORLD)
    try:
        results: dict[str, Any] = {"tp": [], "pp": []}
        for sp in (False, True):
            for checkpointed in (False, True):
                results["tp"].append({"sp": sp, "checkpointed": checkpointed,
                                      **tensor_parallel(rank, sp, checkpointed)})
        for schedule in ("gpipe", "1f1b"):
            for checkpointed in (False, True):
                results["pp"].append({"schedule": schedule, "checkpointed": checkpointed,
                                      **pipeline(rank, schedule, checkpointed)})
        results["ep"] = [expert_parallel(rank)]
        results["cp_error"] = context_parallel_attempt()
        gathered: list[Any] = [None] * WORLD
        dist.all_gather_object(gathered, results)
        if rank == 0:
            single = {"tp": reference(2, BATCH, square_sum),
                      "pp": reference(PIPE_BLOCKS, MICROBATCHES,
                                      lambda o: torch.stack([m.mean() for m in o.chunk(
                                          MICROBATCHES)]).mean(), embed=True),
                      "ep": expert_reference()}
            with open(out, "w", encoding="utf-8") as handle:
                json.dump({"ranks": gathered, "single": single}, handle)
    finally:
        dist.destroy_process_group()
    exit_without_teardown()


def main(out: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(_run, args=(f"{folder}/store", out), nprocs=WORLD, join=True)


if __name__ == "__main__":
    main(sys.argv[1])
