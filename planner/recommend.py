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
    "chunked-loss": "large-vocabularies", "fused-attention": "language-models",
    "adamw-8bit": "why-memory", "lora": "in-practice",
    "qlora": "in-practice", "more-gpus": "in-practice", "smaller-batch": "in-practice",
    "offload": "in-practice",
}


@dataclass(frozen=True)
class Advice:
    """One step of the recommendation: a change the learner makes (a checkpointing choice or
    another tool), why (a reason id), the lesson that explains it, and the memory per GPU
    once this step and the ones before it are applied (`inputs`, with the plan's
    checkpointing `with_strategy`). `choice` marks a change that alters the task (what is
    trained, how many GPUs): offered as a choice, never applied silently."""

    action: str  # a strategy id or a change id
    reason: str
    lesson: str
    peak: float
    fits: bool
    value: float | int | None = None  # k layers, GPUs, micro-batch ...
    with_strategy: str | None = None  # the checkpointing this step's peak is taken with
    inputs: PlannerInputs | None = None  # the settings with this and the steps before it
    choice: bool = False  # alters the task (LoRA, QLoRA, more GPUs)


@dataclass(frozen=True)
class Recommendation:
    """A plan: steps in the course's order, each with its own peak; the last step's
    settings (`inputs`) are the plan's. `alternatives`: other task-changing choices that
    also fit, each a whole plan."""

    strategy: str
    fits: bool
    steps: tuple[Advice, ...]
    inputs: PlannerInputs  # the settings once every step is applied
    alternatives: tuple[Recommendation, ...] = ()

    @property
    def peak(self) -> float:
        return self.steps[-1].peak

    @property
    def gpus(self) -> int:
        return self.inputs.shards

    @property
    def choices(self) -> tuple[Advice, ...]:
        return tuple(step for step in self.steps if step.choice)


# The checkpointing a recommendation may choose: what Hugging Face's own switches express
# (activation_checkpointing_enable, a layer's gradient_checkpointing flag, the attention
# kernel). Two-layer segments and the compiler's budget stay rows of the table: they need
# your own training loop (the PyTorch tab).
RECOMMENDABLE = ("none", "selective", "some-layers", "every-layer")
MIN_GAIN = 0.03  # a change is advised only if it cuts the peak by at least this share


def _step(action: str, reason: str, q: PlannerInputs, value=None, choice: bool = False
          ) -> Advice:
    """A step whose bar is the plan's own arithmetic (memory.footprint.breakdown, as the
    table's rows) for the settings `q` (its strategy included)."""
    peak = peak_bytes(q)
    return Advice(action, reason, LESSONS[action], peak, peak <= q.usable_bytes, value,
                  q.strategy, q, choice)


def _checkpointing_choice(p: PlannerInputs) -> Advice | None:
    """The cheapest checkpointing that fits on its own (least recomputation, then least
    memory), or None. "Only some layers" with the fewest layers that make it fit."""
    if fits(p, "none"):
        return _step("none", "fits-without-checkpointing", p.with_(strategy="none"))
    options: list[tuple[float, float, Advice]] = []
    sel = activations(p, "selective")
    if sel.recompute_flops and fits(p, "selective"):
        q = p.with_(strategy="selective")
        options.append((sel.recompute_flops, peak_bytes(q),
                        _step("selective", "scores-are-cheap-to-recompute", q)))
    k = minimal_some_layers(p)
    if k is not None:
        q = p.with_(strategy="some-layers", some_layers=k)
        options.append((activations(q, "some-layers").recompute_flops, peak_bytes(q),
                        _step("some-layers", "only-as-many-layers-as-needed", q, k)))
    if fits(p, "every-layer"):
        q = p.with_(strategy="every-layer")
        options.append((activations(q, "every-layer").recompute_flops, peak_bytes(q),
                        _step("every-layer", "every-layer-fits", q)))
    if not options:
        return None
    return min(options, key=lambda o: (o[0], o[1]))[2]


def _remedies(q: PlannerInputs) -> list[tuple[str, str, PlannerInputs, int | None]]:
    """The changes that keep the task (same model, method, GPUs and tokens per step), in the
    course's order, that apply to `q`."""
    out: list[tuple[str, str, PlannerInputs, int | None]] = []
    if not q.fused:
        out.append(("fused-attention", "fused-kernel-keeps-no-scores", q.with_(fused=True),
                    None))
    if not q.chunked_loss:
        out.append(("chunked-loss", "loss-in-chunks", q.with_(chunked_loss=True), None))
    if q.batch > 1:
        out.append(("smaller-batch", "same-tokens-per-step-with-accumulation",
                    q.with_(batch=1, accumulation=q.accumulation * q.batch), 1))
    if q.optimizer == "adamw":
        out.append(("adamw-8bit", "optimizer-state-shrinks", q.with_(optimizer="adamw-8bit"),
                    None))
    return out


REMEDY_ORDER = ("fused-attention", "chunked-loss", "smaller-batch", "adamw-8bit")


def _in_task(p: PlannerInputs) -> list[Advice]:
    """Without changing the task: the cheapest checkpointing that fits alone; else every
    layer, then the other tools in order, each kept only if it cuts the peak (by MIN_GAIN,
    or enough to fit)."""
    choice = _checkpointing_choice(p)
    if choice is not None:
        return [choice]
    q = p.with_(strategy="every-layer")
    steps = [_step("every-layer", "every-layer-keeps-least", q)]
    for action in REMEDY_ORDER:
        if fits(q):
            break
        options = {a: (r, c, v) for a, r, c, v in _remedies(q)}
        if action not in options:
            continue
        reason, changed, value = options[action]
        if fits(changed) or peak_bytes(changed) < (1 - MIN_GAIN) * peak_bytes(q):
            q = changed
            steps.append(_step(action, reason, q, value))
    return steps


def _rebuild(p: PlannerInputs, steps: list[Advice], keep: set[int]) -> list[Advice]:
    """The steps whose index is in `keep`, re-applied in order on `p` (each step's change
    replayed on the settings of the ones kept before it)."""
    q, out = p, []
    for index, step in enumerate(steps):
        if index not in keep:
            continue
        q = _replay(q, step)
        out.append(_step(step.action, step.reason, q, step.value, step.choice))
    return out


def _replay(q: PlannerInputs, step: Advice) -> PlannerInputs:
    a = step.action
    if a in STRATEGIES:
        return q.with_(strategy=a, some_layers=int(step.value or q.some_layers))
    if a == "chunked-loss":
        return q.with_(chunked_loss=True)
    if a == "fused-attention":
        return q.with_(fused=True)
    if a == "smaller-batch":
        return q.with_(batch=1, accumulation=q.accumulation * q.batch)
    if a == "adamw-8bit":
        return q.with_(optimizer="adamw-8bit")
    if a == "more-gpus":  # the same tokens per optimizer step: less accumulation
        n = int(step.value or q.shards)
        total = q.accumulation * q.shards
        return q.with_(shards=n, accumulation=total // n if total % n == 0 else q.accumulation)
    if a in ("lora", "qlora"):
        return q.with_(tuning=a)
    raise ValueError(f"unknown step {a!r}")


def _with_choices(p: PlannerInputs, base: list[Advice],
                  choices: list[tuple[str, str, int | None]]) -> list[Advice] | None:
    """`base` (checkpointing and the task-keeping tools) then the choices; tools the
    choices make unnecessary are dropped. None if it still does not fit."""
    steps = list(base)
    q = base[-1].inputs or p
    for action, reason, value in choices:
        q = _replay(q, Advice(action, reason, "", 0.0, False, value))
        steps.append(_step(action, reason, q, value, choice=True))
    if not steps[-1].fits:
        return None
    keep = set(range(len(steps)))
    for index in range(len(base) - 1, 0, -1):  # never the checkpointing step (index 0)
        if _rebuild(p, steps, keep - {index})[-1].fits:
            keep.discard(index)
    return _rebuild(p, steps, keep)


def recommend(p: PlannerInputs, max_shards: int = 64) -> Recommendation:
    """The course's procedure. Keeping the task: the cheapest checkpointing that fits on its
    own; else every layer, then a chunked loss, a smaller micro-batch with more
    accumulation, 8-bit AdamW (each kept if it helps; the fused attention kernel first
    where the plan starts with eager attention). If that is not enough, the changes
    that alter the task are offered as choices, each a whole plan: more GPUs (FSDP /
    ZeRO-3, the fewest that fit) before changing the method, then LoRA, then QLoRA. The
    first that fits is the recommendation, the others its alternatives."""
    base = _in_task(p)
    if base[-1].fits:
        return _recommendation(base)
    plans: list[list[Advice]] = []
    gpus = [("more-gpus", "shard-the-state", n) for n in _powers(p.shards, max_shards)]
    for choice in gpus:
        steps = _with_choices(p, base, [choice])
        if steps is not None:
            plans.append(steps)
            break
    methods = {"full": ("lora", "qlora"), "lora": ("qlora",)}.get(p.tuning, ())
    reasons = {"lora": "train-adapters-only", "qlora": "four-bit-base"}
    for method in methods:
        steps = _with_choices(p, base, [(method, reasons[method], None)])
        if steps is not None:
            plans.append(steps)
    if not plans:  # a method change and more GPUs together
        for method in methods:
            for choice in gpus:
                steps = _with_choices(p, base, [(method, reasons[method], None), choice])
                if steps is not None:
                    plans.append(steps)
                    break
    if not plans:
        return _recommendation(base)
    first, *others = plans
    return _recommendation(first, tuple(_recommendation(o) for o in others))


def _recommendation(steps: list[Advice], alternatives: tuple[Recommendation, ...] = ()
                    ) -> Recommendation:
    last = steps[-1]
    assert last.inputs is not None
    return Recommendation(last.inputs.strategy, last.fits, tuple(steps), last.inputs,
                          alternatives)


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
    # the layers the table's "only some layers" row checkpoints (table_layers), and the
    # strategy of the row that is the recommendation (None when it also changes other
    # settings: then no row is)
    table_layers: int = 0
    recommended_row: str | None = None

    def row_is_yours(self, strategy: str) -> bool:
        """Whether the table's row for `strategy` is the learner's own setting."""
        return strategy == self.inputs.strategy and (
            strategy != "some-layers" or self.table_layers == self.inputs.some_layers)


def table_layers(p: PlannerInputs, rec: Recommendation) -> int:
    """The k of the table's "only some layers" row: the recommendation's when it is that
    row, else the learner's own when they chose it, else the fewest that fit (half the
    layers when none do), so that the row marked recommended is the recommended plan."""
    if recommended_row(p, rec) == "some-layers":
        return rec.inputs.some_layers
    if p.strategy == "some-layers":
        return p.some_layers
    return minimal_some_layers(p) or max(1, p.arch.layers // 2)


def recommended_row(p: PlannerInputs, rec: Recommendation) -> str | None:
    """The strategy of the table row that is the recommended plan: when the recommendation
    changes only the checkpointing (and its layers); None when it changes more."""
    same = rec.inputs == p.with_(strategy=rec.strategy, some_layers=rec.inputs.some_layers)
    return rec.strategy if same else None


# An approximation smaller than this is not worth a line: the page prints sizes in tenths
# of a GiB, and "overstated by up to 0.0 GiB" says nothing.
MIN_SHOWN_BYTES = 0.05 * 2**30


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
        out.append(Approximation("fsdp-root", state["root"]))
    if p.strategy == "budget":
        out.append(Approximation("compiler-budget", share=p.budget))
    if p.chunked_loss:
        out.append(Approximation("chunk-size", share=CHUNK_TOKENS))
    out.append(Approximation("headroom", p.gpu_bytes - p.usable_bytes, p.headroom))
    return tuple(a for a in out if a.bytes is None or a.bytes >= MIN_SHOWN_BYTES)


def plan(p: PlannerInputs) -> Plan:
    """The whole plan for the settings `p`: its memory, every strategy's row (the headroom
    applied alike), the recommendation, the approximations."""
    bd = breakdown(p)
    rec = recommend(p)
    k = table_layers(p, rec)
    rows = tuple(strategy_row(p.with_(some_layers=k), s) for s in STRATEGIES)
    state = state_bytes(p)
    return Plan(p, bd, bd.total <= p.usable_bytes, p.gpu_bytes - bd.total, rows, rec,
                approximations(p, bd), int(state["params"]), int(state["trainable"]),
                p.batch * p.seq * p.accumulation * p.shards, layer_bytes(p.tensors()),
                p.batch * p.seq * p.arch.hidden * p.residual_bytes, table_layers=k,
                recommended_row=recommended_row(p, rec))
