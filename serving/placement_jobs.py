"""The /placement page's runs as demo-service jobs (serving.jobs, kind "placement"): each
checkpoint placement method of memory.placement placed on the lab's model for a byte
budget and run for real (demos.placement_lab), in the device's worker process, taking
turns in the fair queue and stored for every learner like the other demos' runs.

A job's `config` is the model (the page's small GPT model, its layers from a slider), its
options the layers' `shape` (memory.lab_chain.SHAPES) and the budget as a percentage of
what the plain step peaks at (`budget_percent`). One step: every method's placement and
torch's SAC solver's policy in every block (demos.sac_placement), one tracked and one
counted step per distinct plan (a second or two on a CPU at the page's
sizes). Its result is a demos.placement_lab.PlacementRun, stored as its JSON."""

from __future__ import annotations

from typing import Any

from memory import lab_chain, theory
from memory.config import ModelConfig
from memory.placement import BUDGETED, METHODS, BudgetTooSmall, Chain, place
from memory.segments import Segment
from memory.strategies import StrategySpec

# The page's model: small enough that every method's step runs in about a second on a
# CPU (the FLOP counter's and the tracker's cost per op dominates at this size), its
# activations well above its logits so that where the checkpoints go shows.
BASE = ModelConfig(layers=8, hidden=32, heads=2, seq_len=128, batch=2, vocab=128)
LAYERS = (2, 16)  # the page's layers slider
BUDGETS = (20, 100, 5)  # percent of the plain step's peak: lowest, highest, step
DEFAULT_BUDGET = 50
DEFAULT_SHAPE = "unequal"
# per distinct plan: a tracked step, a counted one, and six plain steps timed
# (demos.placement_lab._times: one untimed, then demos.measure.PAGE_REPEATS["cpu"]; that
# module imports torch, which an estimate does not)
STEP_COST = theory.TRACKED_STEP_COST + theory.COUNTED_STEP_COST + 6
# What a tracked or counted step costs per layer beyond its FLOPs at these sizes: the
# tracker's and the FLOP counter's Python work per op (measured: about 1.2 s of CPU for
# the default's 8 layers and 5 distinct plans, a tracked and a counted step each, against
# 0.07 s the FLOPs alone predict)
LAYER_STEP_SECONDS = 0.015


def options(shape: str, budget_percent: int) -> dict[str, Any]:
    return {"shape": shape, "budget_percent": int(budget_percent)}


def chain_of(config: ModelConfig, shape: str, device_kind: str = "cpu") -> Chain:
    """The model's chain as the worker will place on it (rebuild costs as the installed
    torch's FLOP counter counts them on this device)."""
    from demos.installed_torch import counter_counts_attention

    widths = lab_chain.mlp_widths(config, shape)
    return lab_chain.chain(
        config, widths, device_kind, attention_counted=counter_counts_attention(device_kind)
    )


def plans(chain: Chain, budget_percent: int) -> list[list[Segment]]:
    """The distinct plans the methods place (each is measured once), no checkpointing
    first: its step is the baseline of every recompute count."""
    budget = int(budget_percent / 100 * chain.need(place("none", chain)))
    found: list[list[Segment]] = [place("none", chain)]
    for method in METHODS:
        try:
            plan = place(method, chain, budget if method in BUDGETED else None)
        except BudgetTooSmall:
            continue
        if plan not in found:
            found.append(plan)
    return found


def step_work(job: Any, device_kind: str = "cpu") -> float:
    """The step's work in CPU-estimate seconds (memory.theory.cpu_seconds): a tracked and a
    counted step per distinct plan, a checkpointed one costing what checkpointing every
    layer costs, and the measuring's own cost per layer and step."""
    config = job.config
    try:
        found = plans(
            chain_of(config, job.option("shape"), device_kind), job.option("budget_percent")
        )
    except ValueError:  # an invalid combination: the engine explains it
        return 0.0
    count = len(found) + 1  # and torch's SAC solver's policy in every block
    runs = [
        (config, StrategySpec("none" if i == 0 else "every-layer"), STEP_COST) for i in range(count)
    ]
    overhead = LAYER_STEP_SECONDS * config.layers * 2 * count
    return theory.cpu_seconds(runs) + overhead


def memory_bytes(job: Any, device_kind: str = "cpu") -> int:
    """Parameters plus the plain step's predicted peak, the largest of the job's steps."""
    config, shape = job.config, job.option("shape")
    try:
        chain = chain_of(config, shape, device_kind)
        params = lab_chain.parameter_bytes(config, lab_chain.mlp_widths(config, shape))
    except ValueError:
        return 0
    return params + chain.need(place("none", chain))


def run_step(job: Any, device_kind: str) -> Any:
    """Place and run every method on this process's device: a PlacementRun."""
    from demos.placement_lab import run

    return run(
        job.config, job.option("shape"), job.option("budget_percent") / 100, device=device_kind
    )
