"""Checkpoint placement for a byte budget, run for real on the lab's model with equal or
unequal layers: each method of memory.placement places its segments on the model's chain
(memory.lab_chain), then one step per placement is measured: its peak under the live
tracker (above the parameters, as every demo measures it) and its recomputed FLOPs under
torch's FlopCounterMode (the step's count less the plain step's), beside what the chain
predicts, and its step time over a few runs (this process's CPU time on a CPU, the
synchronised wall time on a GPU; a spread for the page, never a verdict: which placement
recomputes least is read from the counted FLOPs). Methods that give the same segments are
run once. One more row, "sac" (demos.sac_placement): every block checkpointed with a
selective policy that saves the ops torch's SAC solver picks, at the largest share of the
block's op memory whose predicted peak fits the budget. The result also holds the
optimal placements' frontier (memory.placement.frontier: the least recompute at every
budget), predicted. Also `python -m demos compare --placement ...` and the /placement page
(a "placement" job of the demo service: serving.placement_jobs)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
from torch import nn

from demos.gpt import GPTBlock
from demos.installed_torch import counter_counts_attention
from demos.measure import PAGE_REPEATS, Step, warm_up
from demos.model import GPT, build_model, make_batch
from demos.sac_placement import METHOD as SAC
from demos.sac_placement import SacPlacement, place_sac
from memory import lab_chain
from memory.config import ModelConfig
from memory.placement import BUDGETED, METHODS, BudgetTooSmall, Chain, frontier, place
from memory.segments import Segment
from memory.strategies import StrategySpec

# the step runs as the plan says; the spec only says where saved tensors live (in place)
_IN_PLACE = StrategySpec("none")


@dataclass
class MethodRun:
    """One method's placement: its segments, what the chain predicts, what was measured."""

    method: str
    segments: list[tuple[int, int, str]]
    predicted_peak_bytes: int
    predicted_recompute_flops: float
    within_budget: bool  # predicted
    peak_bytes: int | None = None
    recompute_flops: float | None = None
    error: str | None = None
    step_seconds: list[float] = field(default_factory=list)  # each timed step
    share: float | None = None  # "sac": the share of each block's op memory torch's solver had

    @property
    def checkpointed(self) -> list[int]:
        """The layers the placement rebuilds in backward."""
        return [i for a, b, mode in self.segments if mode != "keep" for i in range(a, b)]

    @property
    def ran(self) -> bool:
        """Whether the placement was run and measured (a budget too small: not placed)."""
        return self.error is None and self.peak_bytes is not None


@dataclass
class PlacementRun:
    config: ModelConfig
    shape: str
    widths: tuple[int, ...]
    budget_bytes: int
    device: str
    parameter_bytes: int
    step_flops: float | None  # counted, the plain step
    runs: list[MethodRun] = field(default_factory=list)
    # (bytes needed, FLOPs recomputed) of the optimal placement as the budget falls
    frontier: list[tuple[int, float]] = field(default_factory=list)
    timing: str = "cpu"  # the step times: "cpu" (process CPU time) or "wall" (on a GPU)

    def run_of(self, method: str) -> MethodRun:
        return next(r for r in self.runs if r.method == method)

    def to_json(self) -> dict:
        out = asdict(self)
        out["config"] = asdict(self.config)
        for run, record in zip(self.runs, out["runs"], strict=True):
            record["checkpointed_layers"] = run.checkpointed
        return out

    @staticmethod
    def from_json(data: dict) -> PlacementRun:
        """The run `to_json` wrote (the demo service stores it as JSON)."""
        names = set(MethodRun.__dataclass_fields__)
        runs = [
            MethodRun(
                **{k: v for k, v in item.items() if k in names}
                | {"segments": [tuple(s) for s in item["segments"]]}
            )
            for item in data["runs"]
        ]
        return PlacementRun(
            ModelConfig(**data["config"]),
            data["shape"],
            tuple(data["widths"]),
            data["budget_bytes"],
            data["device"],
            data["parameter_bytes"],
            data["step_flops"],
            runs,
            [(int(n), float(r)) for n, r in data.get("frontier", [])],
            data.get("timing", "cpu"),
        )


def build_unequal(
    cfg: ModelConfig, widths: tuple[int, ...], device: str | torch.device = "cpu"
) -> GPT:
    """The lab's model with each layer's MLP as wide as `widths` says (seeded weights)."""
    model = build_model(cfg, device)
    if all(w == 4 * cfg.hidden for w in widths):
        return model
    device = torch.device(device)
    with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
        torch.manual_seed(cfg.seed + 1)
        with device:
            blocks = nn.ModuleList(GPTBlock(cfg, i, w) for i, w in enumerate(widths))
        blocks.apply(GPT._init)
    model.blocks = blocks.to(dtype=model.head.weight.dtype).train()
    return model


def budget_of(chain: Chain, share: float) -> int:
    """A budget as a share of what the step peaks at without checkpointing."""
    return int(share * chain.need(place("none", chain)))


def plan_methods(
    chain: Chain, budget: int, methods=METHODS
) -> list[tuple[str, list[Segment] | None, str | None]]:
    """(method, segments or None, the refusal) for each method."""
    out = []
    for method in methods:
        try:
            out.append((method, place(method, chain, budget if method in BUDGETED else None), None))
        except BudgetTooSmall as exc:
            out.append((method, None, str(exc)))
    return out


def run(
    cfg: ModelConfig,
    shape: str,
    budget: int | float,
    methods=METHODS,
    device: str = "cpu",
    measure: bool = True,
    repeats: int | None = None,
    sac: bool = True,
) -> PlacementRun:
    """Place and (`measure`) run each method, and (`sac`) torch's SAC solver's policy in
    every block. `budget`: bytes above the parameters, or a share (a float up to 1) of the
    plain step's predicted peak; `repeats`: timed steps per placement (default: the
    page's, demos.measure.PAGE_REPEATS; 0: none)."""
    widths = lab_chain.mlp_widths(cfg, shape)
    counted = counter_counts_attention(device)
    chain = lab_chain.chain(cfg, widths, device, attention_counted=counted)
    if isinstance(budget, float) and budget <= 1:
        budget = budget_of(chain, budget)
    result = PlacementRun(
        cfg,
        shape,
        widths,
        int(budget),
        device,
        lab_chain.parameter_bytes(cfg, widths),
        None,
        frontier=frontier(chain),
        timing="wall" if torch.device(device).type == "cuda" else "cpu",
    )
    for method, plan, error in plan_methods(chain, int(budget), methods):
        segments = [(s.start, s.stop, s.mode) for s in plan or []]
        predicted = chain.need(plan) if plan else 0
        result.runs.append(
            MethodRun(
                method,
                segments,
                predicted,
                chain.recompute(plan) if plan else 0.0,
                plan is not None and predicted <= budget,
                error=error,
            )
        )
    sac_plan = _sac_row(cfg, widths, chain, int(budget), counted, result) if sac else None
    if measure:
        if repeats is None:
            repeats = PAGE_REPEATS[torch.device(device).type]
        _measure(cfg, widths, device, result, repeats, sac_plan)
    return result


def _sac_row(
    cfg: ModelConfig,
    widths: tuple[int, ...],
    chain: Chain,
    budget: int,
    counted: bool,
    result: PlacementRun,
) -> SacPlacement | None:
    """torch's SAC solver's row (its placement, for the measuring; None: nothing fits)."""
    try:
        found = place_sac(cfg, widths, chain, budget, counted)
    except BudgetTooSmall as exc:
        result.runs.append(MethodRun(SAC, [], 0, 0.0, False, error=str(exc)))
        return None
    result.runs.append(
        MethodRun(
            SAC,
            found.segments,
            found.predicted_peak_bytes,
            found.predicted_recompute_flops,
            found.predicted_peak_bytes <= budget,
            share=found.share,
        )
    )
    return found


def _measure(
    cfg: ModelConfig,
    widths: tuple[int, ...],
    device: str,
    result: PlacementRun,
    repeats: int,
    sac_plan: SacPlacement | None = None,
) -> None:
    warm_up()
    dev = torch.device(device)
    model = build_unequal(cfg, widths, dev)
    idx, tgt = make_batch(cfg, 0, dev)
    step = Step(cfg, model, idx, tgt, dev)
    plain = [Segment(0, cfg.layers, "keep")]
    result.step_flops = float(step.counted(_IN_PLACE, plain))
    done: dict[tuple, tuple[int, float, list[float]]] = {}
    for r in result.runs:
        if r.error is not None:
            continue
        key = (r.method,) if r.method == SAC else tuple(r.segments)
        if key not in done:
            plan = (
                sac_plan.plan()
                if r.method == SAC and sac_plan is not None
                else [Segment(a, b, mode) for a, b, mode in r.segments]
            )
            tracker, _, _ = step.tracked(_IN_PLACE, plan, False)
            tracker.close()
            peak = (
                step.allocator_peak(_IN_PLACE, plan) if dev.type == "cuda" else tracker.peak_bytes
            )
            flops = step.counted(_IN_PLACE, plan) - result.step_flops
            done[key] = (int(peak), flops, _times(step, plan, repeats, result.timing))
        r.peak_bytes, r.recompute_flops, r.step_seconds = done[key]
        model.zero_grad(set_to_none=True)


def _times(step: Step, plan: list[Segment], repeats: int, timing: str) -> list[float]:
    """`repeats` steps' times after one untimed step: CPU seconds, or wall seconds."""
    if repeats:
        step.timed_with_cpu(_IN_PLACE, plan)
    runs = [step.timed_with_cpu(_IN_PLACE, plan) for _ in range(repeats)]
    return [cpu if timing == "cpu" else wall for wall, cpu in runs]
