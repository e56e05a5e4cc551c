"""The planner's advice: the cheapest checkpointing that fits, the other tools in the course's
order when none does, and the whole plan (breakdown, every strategy's row, the named
approximations) for the page. Pure arithmetic on memory.footprint; ids and numbers out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memory.footprint import (
    CHUNK_TOKENS,
    QLORA_BITS,
    STRATEGIES,
    Breakdown,
    PlannerInputs,
    StrategyRow,
    activations,
    breakdown,
    fits,
    minimal_some_layers,
    peak_bytes,
    state_bytes,
    strategy_row,
)
from memory.hardware import FRAGMENTATION, WORKSPACE_BYTES
from memory.layer import layer_bytes

LESSONS = {  # lesson slug (lessons.catalog) that explains each advice
    "none": "cost-and-correctness", "selective": "language-models", "some-layers": "how-many",
    "two-layer": "how-many", "every-layer": "how-it-works", "budget": "cost-and-correctness",
    "chunked-loss": "large-vocabularies", "adamw-8bit": "why-memory", "lora": "in-practice",
    "qlora": "in-practice", "more-shards": "in-practice", "smaller-batch": "in-practice",
    "offload": "in-practice",
}


@dataclass(frozen=True)
class Advice:
    """One step of the recommendation: what to set, why (a reason id), the lesson that
    explains it, and the peak once this and the steps before it are applied."""

    action: str  # a strategy id or a remedy id
    reason: str
    lesson: str
    peak: float
    fits: bool
    value: float | int | None = None  # k layers, shards, micro-batch ...
    with_strategy: str | None = None  # a remedy's peak is taken with this checkpointing


@dataclass(frozen=True)
class Recommendation:
    strategy: str
    fits: bool
    steps: tuple[Advice, ...]
    inputs: PlannerInputs  # the settings once every step is applied


def _checkpointing_choice(p: PlannerInputs) -> Advice | None:
    """The cheapest checkpointing setting (least recomputation) that fits, or None."""
    if fits(p, "none"):
        return Advice("none", "fits-without-checkpointing", LESSONS["none"],
                      peak_bytes(p, "none"), True)
    options: list[tuple[float, float, Advice]] = []
    sel = activations(p, "selective")
    if sel.recompute_flops and fits(p, "selective"):
        options.append((sel.recompute_flops, peak_bytes(p, "selective"),
                        Advice("selective", "scores-are-cheap-to-recompute",
                               LESSONS["selective"], peak_bytes(p, "selective"), True)))
    k = minimal_some_layers(p)
    if k is not None:
        q = p.with_(some_layers=k)
        options.append((activations(q, "some-layers").recompute_flops,
                        peak_bytes(q, "some-layers"),
                        Advice("some-layers", "only-as-many-layers-as-needed",
                               LESSONS["some-layers"], peak_bytes(q, "some-layers"), True, k)))
    for strategy, reason in (("every-layer", "every-layer-fits"),
                             ("two-layer", "two-layer-keeps-less")):
        if fits(p, strategy):
            options.append((activations(p, strategy).recompute_flops, peak_bytes(p, strategy),
                            Advice(strategy, reason, LESSONS[strategy],
                                   peak_bytes(p, strategy), True)))
    if not options:
        return None
    return min(options, key=lambda o: (o[0], o[1]))[2]


def _least_memory(p: PlannerInputs) -> str:
    return min(("every-layer", "two-layer"), key=lambda s: peak_bytes(p, s))


MIN_GAIN = 0.03  # a remedy is advised only if it cuts the peak by at least this share


def recommend(p: PlannerInputs, max_shards: int = 64) -> Recommendation:
    """The course's procedure: the cheapest checkpointing that fits; when none does, the
    other tools in order (each kept if it helps), then checkpointing again on top."""
    choice = _checkpointing_choice(p)
    if choice is not None:
        return Recommendation(choice.action, True, (choice,), _apply(p, choice))
    steps: list[Advice] = []
    q = p

    def step(action: str, reason: str, changed: PlannerInputs, value=None) -> None:
        nonlocal q
        best = _least_memory(changed)
        if peak_bytes(changed, best) < (1 - MIN_GAIN) * peak_bytes(q, _least_memory(q)):
            q = changed
            steps.append(Advice(action, reason, LESSONS[action], peak_bytes(q, best),
                                fits(q, best), value, best))

    remedies = []
    if not p.chunked_loss:
        remedies.append(("chunked-loss", "loss-in-chunks", lambda r: r.with_(chunked_loss=True)))
    if p.optimizer == "adamw":
        remedies.append(("adamw-8bit", "optimizer-state-shrinks",
                         lambda r: r.with_(optimizer="adamw-8bit")))
    if p.tuning == "full":
        remedies.append(("lora", "train-adapters-only", lambda r: r.with_(tuning="lora")))
    if p.tuning != "qlora":
        remedies.append(("qlora", "four-bit-base", lambda r: r.with_(tuning="qlora")))
    for action, reason, change in remedies:
        if _fits_any(q):
            break
        step(action, reason, change(q))
    if not _fits_any(q):
        shards = next((n for n in _powers(q.shards, max_shards)
                       if _fits_any(q.with_(shards=n))), None)
        if shards is not None:
            step("more-shards", "shard-the-state", q.with_(shards=shards), shards)
    if not _fits_any(q) and q.batch > 1:
        step("smaller-batch", "same-tokens-per-step-with-accumulation",
             q.with_(batch=1, accumulation=q.accumulation * q.batch), 1)
    if not _fits_any(q) and not q.offload:
        step("offload", "state-in-host-memory", q.with_(offload=True))
    final = _checkpointing_choice(q)
    if final is not None:
        steps.append(final)
        return Recommendation(final.action, True, tuple(steps), _apply(q, final))
    best = _least_memory(q)
    steps.append(Advice(best, "nothing-fits", LESSONS[best], peak_bytes(q, best), False))
    return Recommendation(best, False, tuple(steps), q.with_(strategy=best))


def _apply(p: PlannerInputs, choice: Advice) -> PlannerInputs:
    if choice.action == "some-layers":
        return p.with_(strategy="some-layers", some_layers=int(choice.value or 0))
    return p.with_(strategy=choice.action)


def _fits_any(p: PlannerInputs) -> bool:
    return fits(p, _least_memory(p))


def _powers(start: int, stop: int) -> list[int]:
    n, out = max(2, start * 2), []
    while n <= stop:
        out.append(n)
        n *= 2
    return out


# ---------------------------------------------------------------- the whole plan


@dataclass(frozen=True)
class Approximation:
    id: str
    bytes: float | None = None  # its size in this plan, where it has one
    share: float | None = None  # or its size as a fraction


@dataclass(frozen=True)
class Plan:
    inputs: PlannerInputs
    breakdown: Breakdown
    fits: bool
    spare: float
    rows: tuple[StrategyRow, ...]
    recommendation: Recommendation
    approximations: tuple[Approximation, ...]
    params: int
    trainable: int
    tokens_per_step: int
    layer_bytes: int  # one plain layer's activations at this batch and sequence
    checkpoint_bytes: int  # one layer's input
    extra: dict = field(default_factory=dict)


def approximations(p: PlannerInputs, bd: Breakdown) -> tuple[Approximation, ...]:
    state = state_bytes(p)
    kernel_parts = sum(t.bytes for t in p.tensors() if t.kind == "stats" or t.name == "attn.lse")
    out = [Approximation("workspace", WORKSPACE_BYTES),
           Approximation("gpu-kernels", kernel_parts * p.arch.layers),
           Approximation("fragmentation", bd.workspace - WORKSPACE_BYTES, FRAGMENTATION),
           Approximation("peaks-added", min(bd.activations_rebuilt, bd.logits)),
           Approximation("gpu-usable", p.gpu_bytes),
           Approximation("logits-fp32", bd.logits)]
    if p.tuning != "full":
        lora = sum(t.bytes for t in p.tensors() if t.kind == "lora") * p.arch.layers
        out.append(Approximation("lora-activations", lora))
        out.append(Approximation("adapter-backward", share=0.5))
    if p.tuning == "qlora":
        out.append(Approximation("qlora-bits", share=QLORA_BITS))
    if p.shards > 1:
        out.append(Approximation("fsdp-gather", state["gathered"]))
    if p.strategy == "budget":
        out.append(Approximation("compiler-budget", share=p.budget))
    if p.chunked_loss:
        out.append(Approximation("chunk-size", share=CHUNK_TOKENS))
    return tuple(out)


def plan(p: PlannerInputs) -> Plan:
    bd = breakdown(p)
    rows = tuple(strategy_row(p, s) for s in STRATEGIES)
    state = state_bytes(p)
    return Plan(p, bd, bd.total <= p.gpu_bytes, p.gpu_bytes - bd.total, rows, recommend(p),
                approximations(p, bd), int(state["params"]), int(state["trainable"]),
                p.batch * p.seq * p.accumulation * p.shards, layer_bytes(p.tensors()),
                p.batch * p.seq * p.arch.hidden * p.act_bytes)
