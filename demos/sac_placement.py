"""torch's SAC solver as one more placement on the /placement page: every block
checkpointed with a selective policy that saves exactly the ops torch's solver picks for
one share of the block's op memory (demos.op_policy: `SACEstimator`'s op list, solved by
`sac_ilp.get_optimal_checkpointing_policy_per_module`), the largest share whose predicted
peak fits the byte budget.

The prediction reads the placement's chain (memory.lab_chain, the same memory model every
other row's prediction reads) with every layer checkpointed, each block holding beside its
input the bytes of the ops it saves (the estimator's output bytes, per storage), and, while
its own backward runs, the saved outputs that the rebuild never takes back: torch's
non-reentrant checkpoint stops rebuilding once the last tensor autograd saved is rebuilt
(torch/utils/checkpoint.py, `_StopRecomputationError`), so a cached output past that op
stays in the cache until the block's backward is over. The predicted recompute is what the
FLOP counter counts of the ops rebuilt: those not saved, up to that last op (the fused
attention only where the installed counter has a formula for it on this device).

At every share, even 0, the solver saves the block's last op: the estimator counts its
output as 0 bytes ("always stored as the output of the checkpoint block",
torch/distributed/_tools/sac_estimator.py), and saving it avoids a recompute cost above 0.
The next block does hold that output until its own backward, but the cache then holds it
on through this block's backward, so the least this row needs is a little above
checkpointing every layer, and a budget between the two says so.

The policy matches an op by its name and how many ops of that name came before it in the
block (the estimator leaves out the ops in its `OPS_TO_ALWAYS_SKIP`, so the policy does
too); the fused attention's kernel, which differs by device, counts as one name."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from i18n.units import format_bytes
from memory.placement import BudgetTooSmall, Chain
from memory.segments import Segment

METHOD = "sac"
# shares tried: 0 and 1, then halving the gap this many times (torch's solver per try and
# distinct layer width: a pulp CBC solve in a subprocess, about 20 ms; the shares tried are
# the same for every budget, so each answer is kept for the worker's next run)
SEARCH_STEPS = 6


def _name(func_name: str) -> str:
    return "attention" if "scaled_dot_product" in func_name else func_name


@dataclass(frozen=True)
class BlockChoice:
    """torch's solver's choice for one block width at one share."""

    saved: frozenset[tuple[str, int]]  # (op name, its index among the block's ops of that name)
    saved_bytes: int  # the saved outputs' bytes
    late_bytes: int  # of those, the outputs past the rebuild's early stop
    recompute_flops: float  # what the counter counts of the rebuilt ops

    def policy(self) -> Callable:
        """A fresh selective-checkpoint policy (one per checkpointed call: it counts the
        block's ops as they run): MUST_SAVE for the chosen ops, PREFER_RECOMPUTE else."""
        from torch.distributed._tools.sac_estimator import OPS_TO_ALWAYS_SKIP
        from torch.utils.checkpoint import CheckpointPolicy

        seen: dict[str, int] = defaultdict(int)

        def decide(ctx, func, *args, **kwargs):
            if func in OPS_TO_ALWAYS_SKIP:
                return CheckpointPolicy.PREFER_RECOMPUTE
            name = _name(func._overloadpacket.__name__)
            index = seen[name]
            seen[name] += 1
            if (name, index) in self.saved:
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE

        return decide


def block_choice(
    stats, decisions: list[int], attention_counted: bool, output_bytes: int
) -> BlockChoice:
    """What saving `decisions` (torch's solver's 0/1 per op of `stats`) keeps and reruns.
    `output_bytes`: the block's output, which the estimator counts as 0 bytes (its last
    op, "always stored as the output of the checkpoint block"; its own rule for that op:
    the last that is neither a view nor in place): the next block holds it anyway, but a
    cache that keeps it holds it on through this block's backward."""
    views = set(stats.view_like_ops)
    last = max(stats.saved_autograd_ops, default=len(stats.func_names) - 1)
    output = len(stats.func_names) - 1
    while output in views or output in {x[0] for x in stats.inplace_ops}:
        output -= 1
    seen: dict[str, int] = defaultdict(int)
    saved, saved_bytes, late, flops = set(), 0, 0, 0.0
    for i, (name, mem, cost, keep) in enumerate(
        zip(stats.func_names, stats.memory, stats.runtimes, decisions, strict=True)
    ):
        key = _name(name)
        index = seen[key]
        seen[key] += 1
        if keep and i not in views:
            saved.add((key, index))
            saved_bytes += mem
            late += (output_bytes if i == output else mem) if i > last else 0
        elif i <= last and (attention_counted or key != "attention") and cost > 1e-3:
            flops += cost
    return BlockChoice(frozenset(saved), saved_bytes, late, flops)


@dataclass(frozen=True)
class SacPlacement:
    share: float
    blocks: tuple[BlockChoice, ...]  # one per layer
    predicted_peak_bytes: int
    predicted_recompute_flops: float

    @property
    def segments(self) -> list[tuple[int, int, str]]:
        return [(i, i + 1, "selective") for i in range(len(self.blocks))]

    def plan(self) -> list[Segment]:
        """The model's plan: each block its own selective segment, its policy a factory."""
        return [Segment(i, i + 1, "selective", block.policy) for i, block in enumerate(self.blocks)]


def predicted(chain: Chain, blocks: tuple[BlockChoice, ...]) -> int:
    """The chain's need with every layer checkpointed, each holding its saved outputs."""
    n = chain.layers
    sac_chain = Chain(
        [f + b.late_bytes for f, b in zip(chain.full, blocks, strict=True)],
        [x + b.saved_bytes for x, b in zip(chain.inputs, blocks, strict=True)],
        chain.cost,
        chain.skip,
        chain.after,
        top=chain.top,
        base=chain.base,
        floor=chain.floor,
    )
    return sac_chain.need([Segment(i, i + 1, "checkpoint") for i in range(n)])


@lru_cache(maxsize=64)
def _stats(cfg, width: int):
    from demos.op_policy import block_stats

    return block_stats(cfg, width)


@lru_cache(maxsize=1024)
def _decisions(cfg, width: int, share: float) -> tuple[int, ...]:
    from torch.distributed._tools.sac_ilp import get_optimal_checkpointing_policy_per_module

    decisions = get_optimal_checkpointing_policy_per_module(_stats(cfg, width), share)
    if not decisions:
        raise RuntimeError("torch's SAC solver found no solution")
    return tuple(decisions)


def place_sac(cfg, widths: tuple[int, ...], chain: Chain, budget: int, attention_counted: bool):
    """The largest share (searched) whose predicted peak fits `budget`: a SacPlacement.
    BudgetTooSmall when even share 0 (the least the solver saves) does not."""

    block = cfg.replace(layers=1)  # one block's ops: the same at every depth

    def at(share: float) -> SacPlacement:
        by_width = {
            w: block_choice(
                _stats(block, w),
                list(_decisions(block, w, share)),
                attention_counted,
                chain.inputs[0],
            )
            for w in set(widths)
        }
        blocks = tuple(by_width[w] for w in widths)
        return SacPlacement(
            share, blocks, predicted(chain, blocks), sum(b.recompute_flops for b in blocks)
        )

    best = at(0.0)
    if best.predicted_peak_bytes > budget:
        need = best.predicted_peak_bytes
        raise BudgetTooSmall(
            f"budget {format_bytes(budget)} is too small for torch's SAC solver: even at a "
            f"share of 0 its policy needs {format_bytes(need)} ({need} bytes)"
        )
    top = at(1.0)
    if top.predicted_peak_bytes <= budget:
        return top
    low, high = 0.0, 1.0
    for _ in range(SEARCH_STEPS):
        middle = (low + high) / 2
        found = at(middle)
        if found.predicted_peak_bytes <= budget:
            low, best = middle, found
        else:
            high = middle
    return best
