"""Inside one block: which ops a selective policy should save, as torch's own estimator and
solver choose it on the real module (torch.distributed._tools: `SACEstimator` lists the
block's ops with their output bytes, which autograd saves, which are views or random;
`sac_ilp.get_optimal_checkpointing_policy_per_module` solves the 0/1 choice with pulp's
CBC: the most recompute avoided within a share of the block's op memory).

Two things differ from torch's defaults, and why: the estimator times ops with CUDA events
or a roofline model that needs a CUDA device (`runtime_estimator.py`), so on a CPU each
op's cost here is its FLOPs (torch's FlopCounterMode registry; the fused attention kernel,
which torch 2.13's registry counts on CUDA only, from memory.layer's formula); and the
solver leaves a variable that is in no constraint and costs nothing unset (pulp), which
its last line cannot round, so such ops (no bytes, no FLOPs: an in-place add) get a
negligible cost."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils import _pytree
from torch.utils.flop_counter import flop_registry

from demos.gpt import GPTBlock
from memory.architectures import of_config
from memory.config import ModelConfig

NEGLIGIBLE = 1e-6  # the cost of an op with no bytes and no FLOPs (see above)


@dataclass(frozen=True)
class OpChoice:
    op: str
    bytes: int  # its output
    flops: float  # what recomputing it costs
    saved: bool  # the solver's choice


def _cost(cfg: ModelConfig):
    arch = of_config(cfg)
    attention = 4.0 * cfg.batch * arch.heads * cfg.seq_len**2 * arch.head_dim

    def estimate(func, args, kwargs):
        out = func(*args, **(kwargs or {}))
        packet = func._overloadpacket
        if packet in flop_registry:
            shape = _pytree.tree_map(
                lambda t: t.shape if isinstance(t, torch.Tensor) else t, (args, kwargs or {}, out)
            )
            return out, float(flop_registry[packet](*shape[0], **shape[1], out_val=shape[2]))
        if "scaled_dot_product" in packet.__name__:
            return out, attention
        return out, 0.0

    return estimate


def block_stats(cfg: ModelConfig, mlp_width: int | None = None):
    """torch's SACStats of one of the lab's GPT blocks, measured under fake tensors."""
    from torch.distributed._tools.sac_estimator import SACEstimator

    with FakeTensorMode():
        block = GPTBlock(cfg, 0, mlp_width)  # float32: the lab's dtype
        x = torch.randn(cfg.batch, cfg.seq_len, cfg.hidden)
        estimator = SACEstimator()
        estimator._estimate_runtime = _cost(cfg)
        with estimator:
            block(x).sum().backward()
    stats = estimator.sac_mod_stats["GPTBlock"]
    views = set(stats.view_like_ops)
    runtimes = [
        r if (r or m or i in views) else NEGLIGIBLE
        for i, (r, m) in enumerate(zip(stats.runtimes, stats.memory, strict=True))
    ]
    return dataclasses.replace(stats, runtimes=runtimes)


def choose(cfg: ModelConfig, share: float, mlp_width: int | None = None) -> list[OpChoice]:
    """The block's ops that are not views, each with torch's solver's choice for a memory
    budget of `share` (0..1) of what saving every op's output would hold."""
    from torch.distributed._tools.sac_ilp import get_optimal_checkpointing_policy_per_module

    stats = block_stats(cfg, mlp_width)
    decisions = get_optimal_checkpointing_policy_per_module(stats, share)
    if not decisions:
        raise RuntimeError("torch's SAC solver found no solution")
    views = set(stats.view_like_ops)
    return [
        OpChoice(name, mem, 0.0 if cost == NEGLIGIBLE else cost, bool(keep))
        for i, (name, mem, cost, keep) in enumerate(
            zip(stats.func_names, stats.memory, stats.runtimes, decisions, strict=True)
        )
        if i not in views
    ]
