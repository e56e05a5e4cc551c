"""The planner's advice: the cheapest checkpointing that fits, the other tools in the course's
order when none does, and the whole plan (breakdown, every strategy's row, the named
approximations) for the page. Pure arithmetic on memory.footprint; ids and numbers out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from memory import parallel as M
from memory.footprint import (
    CHUNK_TOKENS,
    QLORA_BITS,
    STRATEGIES,
    Breakdown,
    PlannerInputs,
    StrategyRow,
    activations,
    breakdown,
    minimal_some_layers,
    peak_bytes,
    state_bytes,
    strategy_row,
)
from memory.hardware import FRAGMENTATION, WORKSPACE_BYTES
from memory.layer import layer_bytes
from planner import parallel_plan as PP

LESSONS = {  # lesson slug (lessons.catalog) that explains each advice
    "none": "cost-and-correctness", "selective": "language-models", "some-layers": "how-many",
    "two-layer": "how-many", "every-layer": "how-it-works", "budget": "cost-and-correctness",
    "chunked-loss": "large-vocabularies", "fused-attention": "language-models",
    "adamw-8bit": "why-memory", "lora": "in-practice",
    "qlora": "in-practice", "more-gpus": "in-practice", "smaller-batch": "in-practice",
    "offload": "in-practice", "shorter-seq": "in-practice", "sharded-adamw": "why-memory",
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
    choice: bool = False  # alters the task (LoRA, QLoRA, more GPUs, a shorter sequence)
    layout: M.Layout | None = None  # across GPUs: the layout the peak is taken on


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
    # across GPUs: the plan's layout, the layouts tried on the way (in the course's order;
    # one, "yours", when the learner chose it), the GPUs per node
    layout: M.Layout | None = None
    layout_steps: tuple[PP.LayoutStep, ...] = ()
    per_node: int = 8
    # when the task as set fits on no layout of the learner's GPUs: that search's closest
    # plan (its layouts tried), and this recommendation is a choice that fits
    closest: Recommendation | None = None

    @property
    def peak(self) -> float:
        return self.steps[-1].peak

    @property
    def gpus(self) -> int:
        return self.inputs.shards

    @property
    def choices(self) -> tuple[Advice, ...]:
        return tuple(step for step in self.steps if step.choice)

    @property
    def chosen_by(self) -> str:
        """"learner" when the learner gave the layout, else "recommendation"."""
        return "learner" if [s.action for s in self.layout_steps] == ["yours"] else (
            "recommendation")

    @property
    def spread(self) -> bool:
        """Whether the plan's layout splits more than the training state (tensor,
        context, pipeline or expert parallelism): then only the PyTorch code runs it."""
        return self.layout is not None and not PP.fsdp_only(self.layout)


# The checkpointing a recommendation may choose: what Hugging Face's own switches express
# (activation_checkpointing_enable, a layer's gradient_checkpointing flag, the attention
# kernel). Two-layer segments and the compiler's budget stay rows of the table: they need
# your own training loop (the PyTorch tab).
RECOMMENDABLE = ("none", "selective", "some-layers", "every-layer")
MIN_GAIN = 0.03  # a change is advised only if it cuts the peak by at least this share


def _peak(q: PlannerInputs, layout: M.Layout | None) -> float:
    """The step peak of the settings `q` (their strategy) on one GPU, or on the most
    loaded GPU of `layout` (planner.parallel_plan: the same arithmetic split)."""
    return peak_bytes(q) if layout is None else PP.layout_peak(q, layout)


def _step(action: str, reason: str, q: PlannerInputs, value=None, choice: bool = False,
          layout: M.Layout | None = None) -> Advice:
    """A step whose bar is the plan's own arithmetic (memory.footprint.breakdown, as the
    table's rows; on the most loaded GPU of `layout` across GPUs) for the settings `q`
    (its strategy included)."""
    peak = _peak(q, layout)
    return Advice(action, reason, LESSONS[action], peak, peak <= q.usable_bytes, value,
                  q.strategy, q, choice, layout)


def _checkpointing_choice(p: PlannerInputs, layout: M.Layout | None = None
                          ) -> Advice | None:
    """The cheapest checkpointing that fits on its own (least recomputation, then least
    memory), or None. "Only some layers" with the fewest layers that make it fit."""
    def ok(q: PlannerInputs) -> bool:
        return _peak(q, layout) <= q.usable_bytes

    if ok(p.with_(strategy="none")):
        return _step("none", "fits-without-checkpointing", p.with_(strategy="none"),
                     layout=layout)
    options: list[tuple[float, float, Advice]] = []
    sel = activations(p, "selective")
    if sel.recompute_flops and ok(p.with_(strategy="selective")):
        q = p.with_(strategy="selective")
        options.append((sel.recompute_flops, _peak(q, layout),
                        _step("selective", "scores-are-cheap-to-recompute", q,
                              layout=layout)))
    k = minimal_some_layers(p) if layout is None else PP.fewest_layers(p, layout)
    if k is not None:
        q = p.with_(strategy="some-layers", some_layers=k)
        options.append((activations(q, "some-layers").recompute_flops, _peak(q, layout),
                        _step("some-layers", "only-as-many-layers-as-needed", q, k,
                              layout=layout)))
    if ok(p.with_(strategy="every-layer")):
        q = p.with_(strategy="every-layer")
        options.append((activations(q, "every-layer").recompute_flops, _peak(q, layout),
                        _step("every-layer", "every-layer-fits", q, layout=layout)))
    if not options:
        return None
    return min(options, key=lambda o: (o[0], o[1]))[2]


def sharded(q: PlannerInputs, layout: M.Layout | None = None) -> bool:
    """Whether the plan's parameters are DTensors (FSDP2 over several GPUs, or any layout
    across GPUs): bitsandbytes' 8-bit AdamW cannot step them (docs/PLANNER_GPUS.md)."""
    return q.shards > 1 or (layout is not None and layout.gpus > 1)


def _remedies(q: PlannerInputs, layout: M.Layout | None = None
              ) -> list[tuple[str, str, PlannerInputs, int | None]]:
    """The changes that keep the task (same model, method, GPUs and tokens per step), in the
    course's order, that apply to `q` (8-bit AdamW only where nothing is sharded)."""
    out: list[tuple[str, str, PlannerInputs, int | None]] = []
    if not q.fused:
        out.append(("fused-attention", "fused-kernel-keeps-no-scores", q.with_(fused=True),
                    None))
    if not q.chunked_loss:
        out.append(("chunked-loss", "loss-in-chunks", q.with_(chunked_loss=True), None))
    if q.batch > 1:
        out.append(("smaller-batch", "same-tokens-per-step-with-accumulation",
                    q.with_(batch=1, accumulation=q.accumulation * q.batch), 1))
    if q.optimizer == "adamw" and not sharded(q, layout):
        out.append(("adamw-8bit", "optimizer-state-shrinks", q.with_(optimizer="adamw-8bit"),
                    None))
    return out


REMEDY_ORDER = ("fused-attention", "chunked-loss", "smaller-batch", "adamw-8bit")


def _in_task(p: PlannerInputs, layout: M.Layout | None = None) -> list[Advice]:
    """Without changing the task: the cheapest checkpointing that fits alone; else every
    layer, then the other tools in order, each kept only if it cuts the peak (by MIN_GAIN,
    or enough to fit). Across GPUs, each peak on the most loaded GPU of `layout`."""
    choice = _checkpointing_choice(p, layout)
    if choice is not None:
        return [choice]
    q = p.with_(strategy="every-layer")
    steps = [_step("every-layer", "every-layer-keeps-least", q, layout=layout)]
    for action in REMEDY_ORDER:
        if _peak(q, layout) <= q.usable_bytes:
            break
        options = {a: (r, c, v) for a, r, c, v in _remedies(q, layout)}
        if action not in options:
            continue
        reason, changed, value = options[action]
        before, after = _peak(q, layout), _peak(changed, layout)
        if after <= changed.usable_bytes or after < (1 - MIN_GAIN) * before:
            q = changed
            steps.append(_step(action, reason, q, value, layout=layout))
    return steps


def _rebuild(p: PlannerInputs, steps: list[Advice], keep: set[int]) -> list[Advice]:
    """The steps whose index is in `keep`, re-applied in order on `p` (each step's change
    replayed on the settings of the ones kept before it)."""
    q, out = p, []
    for index, step in enumerate(steps):
        if index not in keep:
            continue
        q = _replay(q, step)
        out.append(_step(step.action, step.reason, q, step.value, step.choice, step.layout))
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
    if a == "sharded-adamw":
        return q.with_(optimizer="adamw")
    if a == "shorter-seq":  # the same tokens per optimizer step where they divide
        n = int(step.value or q.seq)
        total = q.accumulation * q.seq
        return q.with_(seq=n, accumulation=total // n if total % n == 0 else q.accumulation)
    if a == "more-gpus":  # the same tokens per optimizer step: less accumulation
        n = int(step.value or q.shards)
        total = q.accumulation * q.shards
        return q.with_(shards=n, accumulation=total // n if total % n == 0 else q.accumulation)
    if a in ("lora", "qlora"):
        return q.with_(tuning=a)
    raise ValueError(f"unknown step {a!r}")


def _replay_all(p: PlannerInputs, steps: list[Advice]) -> PlannerInputs:
    for step in steps:
        p = _replay(p, step)
    return p


def _with_choices(p: PlannerInputs, base: list[Advice],
                  choices: list[tuple[str, str, int | None]]) -> list[Advice] | None:
    """`base` (checkpointing and the task-keeping tools) then the choices; tools the
    choices make unnecessary are dropped, and with more GPUs (FSDP2) 8-bit AdamW, which
    cannot step its DTensors (AdamW instead). None if it still does not fit."""
    more = any(action == "more-gpus" for action, _, _ in choices)
    steps = [s for s in base if not (more and s.action == "adamw-8bit")]
    base = steps[:]
    q = _replay_all(p, steps)
    for action, reason, value in choices:
        q = _replay(q, Advice(action, reason, "", 0.0, False, value))
        steps.append(_step(action, reason, q, value, choice=True))
    if more and q.optimizer == "adamw-8bit":
        q = q.with_(optimizer="adamw")
        steps.append(_step("sharded-adamw", "eight-bit-adamw-not-sharded", q))
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


def _layout_search(p: PlannerInputs, per_node: int, given: M.Layout | None
                   ) -> Recommendation:
    """The plan on p.shards GPUs keeping the task: the learner's layout (`given`), or the
    layouts in the course's order (planner.parallel_plan.candidates), each with the
    cheapest checkpointing and task-keeping tools that fit on its most loaded GPU; the
    first where that fits ends the search (or the last tried, not fitting)."""
    start, fix = p, []
    if p.optimizer == "adamw-8bit":  # FSDP2's DTensors: bitsandbytes cannot step them
        start = p.with_(optimizer="adamw")
    layouts = ([("yours", given)] if given is not None else
               PP.candidates(start, p.shards, per_node))
    tried: list[PP.LayoutStep] = []
    for action, layout in layouts:
        steps = _in_task(start, layout)
        last = steps[-1].inputs
        assert last is not None
        tried.append(PP.LayoutStep(action, layout, PP.gpu_row(last, layout, last.strategy)))
        if steps[-1].fits:
            break
    if start is not p:
        fix = [_step("sharded-adamw", "eight-bit-adamw-not-sharded",
                     start.with_(strategy=p.strategy), layout=layout)]
    return replace(_recommendation(fix + steps), layout=layout, layout_steps=tuple(tried),
                   per_node=per_node)


def _choice_plan(p: PlannerInputs, per_node: int, given: M.Layout | None, action: str,
                 reason: str, value: int | None = None) -> Recommendation | None:
    """The plan with one task-changing choice applied first (more GPUs: the layout
    searched again, or the learner's with more FSDP GPUs), or None if it does not fit."""
    q = _replay(p, Advice(action, reason, "", 0.0, False, value))
    layout = given
    if given is not None and action == "more-gpus":  # its sizes and micro-batches kept
        layout = PP.with_dp(given, q.shards)
    rec = _layout_search(q, per_node, layout)
    if not rec.fits:
        return None
    first = _step(action, reason, q, value, choice=True, layout=rec.layout)
    return replace(rec, steps=(first, *rec.steps))


SHORTEST_SEQ = 128  # the planner page's shortest sequence


def _fewest(values: list[int], plan_for) -> Recommendation | None:
    """The plan for the first of `values` (steps of one change, each a bigger one: more
    GPUs, a shorter sequence) where `plan_for` fits, found by bisection (a bigger change
    never needs more memory per GPU); None if even the last does not fit."""
    lo, hi, best = 0, len(values) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        found = plan_for(values[mid])
        if found is not None:
            best, hi = found, mid - 1
        else:
            lo = mid + 1
    return best


def recommend_across(p: PlannerInputs, per_node: int = 8, given: M.Layout | None = None,
                     max_gpus: int = 4096) -> Recommendation:
    """The plan across p.shards GPUs (p.shards > 1): one recommendation over layouts,
    checkpointing and task-keeping tools together (_layout_search), on the learner's
    layout when `given`. When nothing fits, the choices that would, each a whole plan in
    this order: the fewest GPUs that fit (doubling), LoRA, QLoRA, the longest sequence
    that fits (halving); the first is the recommendation, the others its alternatives.
    8-bit AdamW is never in a plan across GPUs: bitsandbytes' optimizer cannot step FSDP2's
    DTensor parameters (AdamW instead, said in a step)."""
    found = _layout_search(p, per_node, given)
    if found.fits:
        return found
    plans: list[Recommendation] = []
    counts = [p.shards * 2**k for k in range(1, 13) if p.shards * 2**k <= max_gpus]
    more = _fewest(counts, lambda n: _choice_plan(p, per_node, given, "more-gpus",
                                                  "shard-the-state", n))
    methods = {"full": ("lora", "qlora"), "lora": ("qlora",)}.get(p.tuning, ())
    reasons = {"lora": "train-adapters-only", "qlora": "four-bit-base"}
    method = next((found_ for m in methods if (found_ := _choice_plan(
        p, per_node, given, m, reasons[m])) is not None), None)  # QLoRA where LoRA fails
    seqs = [p.seq // 2**k for k in range(1, 20) if p.seq // 2**k >= SHORTEST_SEQ]
    shorter = _fewest(seqs, lambda n: _choice_plan(p, per_node, given, "shorter-seq",
                                                   "fewer-tokens", n))
    plans = [plan_ for plan_ in (more, method, shorter) if plan_ is not None]
    if not plans:
        return found
    first, *others = plans
    return replace(first, alternatives=tuple(others), closest=found)


def layout_reason(rec: Recommendation) -> tuple[str, dict]:
    """Why the plan has its layout, as an id and the numbers its sentence names: the
    learner's own; or the kind of parallelism whose step first fitted, with the peak of
    the step before it (FSDP alone for tensor parallelism ...); or none fits."""
    search = rec.closest or rec
    steps, layout = search.layout_steps, search.layout
    assert layout is not None and steps
    params = {"gpus": layout.gpus, "tp": layout.tp, "cp": layout.cp, "pp": layout.pp,
              "ep": layout.ep, "seq": search.inputs.seq, "peak": search.peak}
    if not search.fits:
        return "none-fits", params
    last = steps[-1].action
    if last in ("yours", "fsdp"):
        return last, params
    before = next(s for s in reversed(steps) if s.action != last)
    return last, {**params, "before": before.row.peak, "before_kind": before.action}


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
    # across GPUs: the layout of "yours" and of the table's rows (the learner's, or FSDP
    # over every GPU), and the GPUs per node; None on one GPU
    layout: M.Layout | None = None

    def row_is_yours(self, strategy: str) -> bool:
        """Whether the table's row for `strategy` is the learner's own setting."""
        return strategy == self.inputs.strategy and (
            strategy != "some-layers" or self.table_layers == self.inputs.some_layers)


def table_layers(p: PlannerInputs, rec: Recommendation, layout: M.Layout | None = None
                 ) -> int:
    """The k of the table's "only some layers" row: the recommendation's when it is that
    row, else the learner's own when they chose it, else the fewest that fit (half the
    layers when none do), so that the row marked recommended is the recommended plan."""
    if recommended_row(p, rec, layout) == "some-layers":
        return rec.inputs.some_layers
    if p.strategy == "some-layers":
        return p.some_layers
    fewest = minimal_some_layers(p) if layout is None else PP.fewest_layers(p, layout)
    return fewest or max(1, p.arch.layers // 2)


def recommended_row(p: PlannerInputs, rec: Recommendation, layout: M.Layout | None = None
                    ) -> str | None:
    """The strategy of the table row that is the recommended plan: when the recommendation
    changes only the checkpointing (and its layers), on the table's layout; None when it
    changes more."""
    same = rec.inputs == p.with_(strategy=rec.strategy, some_layers=rec.inputs.some_layers)
    return rec.strategy if same and rec.layout == layout else None


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


def plan(p: PlannerInputs, layout: M.Layout | None = None, per_node: int = 8) -> Plan:
    """The whole plan for the settings `p`: its memory, every strategy's row (the headroom
    applied alike), the recommendation, the approximations. Across GPUs (p.shards > 1) on
    the most loaded GPU of the learner's `layout` (FSDP over every GPU when None), and the
    recommendation over layouts too (recommend_across)."""
    if p.shards > 1:
        rec = recommend_across(p, per_node, layout)
        layout = layout or M.Layout(dp=p.shards)
        bd = PP.layout_breakdown(p, layout)[0]
        k = table_layers(p, rec, layout)
        rows = tuple(PP.layout_row(p.with_(some_layers=k), layout, s) for s in STRATEGIES)
    else:
        layout, bd, rec = None, breakdown(p), recommend(p)
        k = table_layers(p, rec)
        rows = tuple(strategy_row(p.with_(some_layers=k), s) for s in STRATEGIES)
    state = state_bytes(p)
    return Plan(p, bd, bd.total <= p.usable_bytes, p.gpu_bytes - bd.total, rows, rec,
                approximations(p, bd), int(state["params"]), int(state["trainable"]),
                p.batch * p.seq * p.accumulation * p.shards, layer_bytes(p.tensors()),
                p.batch * p.seq * p.arch.hidden * p.residual_bytes, table_layers=k,
                recommended_row=recommended_row(p, rec, layout), layout=layout)
