"""The checkpointing strategies: one record each, and their text form ("every-k:2").

A strategy is a `Strategy` record in STRATEGIES: its stable id, its description, its
colour on every chart, how it plans its segments, the devices it runs on, what it costs
in theory, and the examples the demo pages offer. The model, the theory, the measurement,
the figures, the pages, the CLI and the benchmark iterate over these records; adding a
strategy is one record here plus its tests.

Selective checkpointing's per-op policies are the `SelectivePolicy` enum, each with a
`PolicyRecord`: which ops' outputs it saves, which tensors a block then keeps, and which
matmuls backward has to rerun.

A strategy travels as a `StrategySpec` record. Text becomes a record once, at the edge
where it comes in: `parse_strategy` / `parse_strategies` for the command line's
--strategies and for a job or result read back from JSON (serving.jobs), the offered
records' labels for the pages' widgets and query strings (ui.demo_controls), and
`spec_of_label` for the canonical text a results table carries (its "strategy" column).
Everything inside (memory.theory, the look-ups below, demos, reports) takes records and
refuses text (`require_spec`: TypeError).

Text forms: `label` is canonical and parseable ("every-k:4", "budget:dp:40%"): the URL's,
the store key's, the tables' and the CSV's; `title` is for reading ("every 4 layers",
"budget (dp, 40%)") and is looked up only through `title()`, never parsed back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import lru_cache

from i18n import N_
from i18n import gettext as i18n_gettext
from i18n.units import format_bytes
from memory.config import ConfigError, parse_bytes
from memory.placement import dp_plan, greedy_plan
from memory.segments import Segment, sqrt_k

DEVICES = frozenset({"cpu", "cuda"})


# ---------------------------------------------------------------- selective policies


class SelectivePolicy(StrEnum):
    SAVE_MATMULS = "save-matmuls"
    SAVE_ATTENTION = "save-attention"
    SAVE_ALL_BUT_ATTENTION = "save-all-but-attention"


class SavedOps(StrEnum):
    """Which ops' outputs a policy caches (demos.model maps these to aten ops)."""

    MATMULS = "matmuls"
    ATTENTION = "attention"
    ALL_BUT_ATTENTION = "all-but-attention"


# The tensors a plain (not checkpointed) block keeps alive for backward, by the names of
# memory.theory.block_tensors.
PLAIN_BLOCK_KEEPS = frozenset({
    "input", "ln1.out", "ln1.stats", "qkv", "attn.out", "attn.lse", "drop1.mask", "x2",
    "ln2.out", "ln2.stats", "fc", "gelu", "drop2.mask"})
CHECKPOINT_KEEPS = frozenset({"input"})


@dataclass(frozen=True)
class PolicyRecord:
    policy: SelectivePolicy
    title: str  # a catalog message (N_): the strategy's display title, through title()
    description: str  # a catalog message (N_), shown through describe()
    saves: SavedOps
    keeps: frozenset[str]  # block tensors held for backward (theory.block_tensors names)
    # cached by the policy but not by a plain block, and alive while the layer is rebuilt
    # ("output": the block's output, kept by the cache of its add)
    rebuild_extra: tuple[str, ...]
    recomputed_matmuls: tuple[str, ...]  # the Linear layers backward has to rerun
    recomputes_attention: bool


POLICIES: dict[SelectivePolicy, PolicyRecord] = {p.policy: p for p in (
    PolicyRecord(
        SelectivePolicy.SAVE_MATMULS, N_("selective: save the matmuls"),
        N_("Save the outputs of the matrix multiplications (QKV, projections, MLP); "
           "recompute LayerNorm, attention, GELU and the additions."),
        SavedOps.MATMULS, frozenset({"input", "qkv", "proj", "fc", "out"}), ("proj",),
        recomputed_matmuls=(), recomputes_attention=True),
    PolicyRecord(
        SelectivePolicy.SAVE_ATTENTION, N_("selective: save attention"),
        N_("Save only the attention kernel's output and log-sum-exp; recompute everything "
           "else, matmuls too (less memory, more recompute)."),
        SavedOps.ATTENTION, frozenset({"input", "attn.out", "attn.lse"}), (),
        # backward needs q, k, v (QKV), the MLP's input (proj feeds the residual that
        # ln2 reads) and the GELU output (fc): 8h² of the block's 12h²; the MLP's last
        # linear is left to early stop (memory.theory.segment_recompute adds it back when a
        # dropout after the MLP saves its mask after it)
        recomputed_matmuls=("qkv", "proj", "fc"), recomputes_attention=False),
    PolicyRecord(
        SelectivePolicy.SAVE_ALL_BUT_ATTENTION, N_("selective: save all but attention"),
        N_("Save the output of every op except attention: a bad policy that keeps more "
           "bytes than no checkpointing at all."),
        SavedOps.ALL_BUT_ATTENTION,
        # saving the views after attention keeps its output alive; everything else is saved
        (PLAIN_BLOCK_KEEPS - {"attn.lse", "drop1.mask", "drop2.mask"})
        | {"proj", "out", "drop1.out", "drop2.out"},
        ("proj", "out", "output"), recomputed_matmuls=(), recomputes_attention=True),
)}
DEFAULT_POLICY = SelectivePolicy.SAVE_MATMULS
SELECTIVE_POLICIES: dict[str, str] = {p.value: r.description for p, r in POLICIES.items()}


# The same policies on a llama layer (demos.llama): the op lists still fit (its seven
# linear layers have no bias, so each is one aten.mm; attention is the same fused kernel);
# what they keep differs. Names: memory.layer.layer_tensors and cached_only_tensors for
# that kind (16-bit adds "input", "x2" and the norms' fp32 copies; names absent at a dtype
# simply do not occur). RMSNorm, rotary positions and SiLU are "everything else".
_LLAMA_OUTPUTS = frozenset(
    {"input", "x2", "q", "k", "v", "q.rot", "k.rot", "attn.out", "o", "gate", "silu", "up",
     "gated", "down"}
    | {f"{n}.{t}" for n in ("ln1", "ln2")
       for t in ("in32", "pow", "mean", "eps", "rstd", "scaled", "normed", "out")}
    | {f"rope.{n}.{t}" for n in ("q", "k") for t in ("cos", "neg", "cat", "sin")})
LLAMA_POLICIES: dict[SelectivePolicy, PolicyRecord] = {
    SelectivePolicy.SAVE_MATMULS: replace(
        POLICIES[SelectivePolicy.SAVE_MATMULS],
        keeps=frozenset({"input", "q", "k", "v", "o", "gate", "up", "down"}),
        rebuild_extra=("o",)),
    SelectivePolicy.SAVE_ATTENTION: replace(
        POLICIES[SelectivePolicy.SAVE_ATTENTION],
        # backward needs q, k, v, the residual o feeds, and gate and up (SiLU, product)
        recomputed_matmuls=("q", "k", "v", "o", "gate", "up")),
    SelectivePolicy.SAVE_ALL_BUT_ATTENTION: replace(
        POLICIES[SelectivePolicy.SAVE_ALL_BUT_ATTENTION],
        keeps=_LLAMA_OUTPUTS, rebuild_extra=("o", "down", "output")),
}


def policy(value: str | SelectivePolicy | None, arch: str = "gpt") -> PolicyRecord:
    """The record of a policy ('save-matmuls', or None for the default) on a layer of
    `arch` (memory.config.ARCHS)."""
    try:
        return (LLAMA_POLICIES if arch == "llama" else POLICIES)[
            SelectivePolicy(value or DEFAULT_POLICY)]
    except ValueError:
        raise ConfigError(f"selective policy {value!r} is unknown; allowed: "
                          f"{', '.join(SELECTIVE_POLICIES)}") from None


BUDGET_METHODS: dict[str, str] = {
    "greedy": "Chen et al.'s greedy walk: start a new segment when the running size "
              "would pass the budget; every layer is recomputed.",
    "dp": "Optimal placement by dynamic programming: keep as many layers as fit, "
          "checkpoint the rest; least recompute within the budget.",
}


# ---------------------------------------------------------------- a strategy's text form


@dataclass(frozen=True)
class StrategySpec:
    """One strategy with its arguments: `StrategySpec("every-k", k=4)`, or parsed from its
    text at an edge (`parse_strategy("every-k:4")`). Checked when made (ConfigError on an
    unknown name or bad arguments), so a record is always one the lab can run; a selective
    record without a policy gets the default one."""

    name: str
    k: int | None = None
    policy: str | None = None
    budget_bytes: int | None = None
    budget_method: str = "greedy"
    budget_share: float | None = None  # 'budget:dp:40%': of what no checkpointing holds

    def __post_init__(self) -> None:
        if self.name == "selective" and self.policy is None:
            object.__setattr__(self, "policy", DEFAULT_POLICY.value)
        _check(self)

    @property
    def strategy(self) -> Strategy:
        return STRATEGIES[self.name]

    @property
    def label(self) -> str:
        """Canonical text, parseable by parse_strategy."""
        return self.strategy.label_of(self)

    @property
    def title(self) -> str:
        """Human-readable label for tables and charts."""
        return title(self)

    def budget_text(self) -> str:
        if self.budget_share is not None:
            return f"{self.budget_share * 100:g}%"
        return format_bytes(self.budget_bytes)


@dataclass(frozen=True)
class PlanInputs:
    """What a strategy plans its segments from: the depth and, for byte budgets, each
    plain layer's held bytes and each layer input's bytes (from memory.theory)."""

    layers: int
    block_bytes: int
    input_bytes: int


# ---------------------------------------------------------------- the records


@dataclass(frozen=True)
class Strategy:
    id: str  # stable: URLs, CSV files, the CLI and the tests use it
    description: str  # a catalog message (N_): "{k}" is the spec's k; see describe()
    colour: str  # on every chart
    plan: Callable[[StrategySpec, PlanInputs], list[Segment]]
    cost: str  # what it costs in theory: memory held and recomputation
    # the display title, a catalog message (N_) over the spec's fields ({k}, {policy},
    # {method}, {budget}); "{id}" is the id itself
    title_template: str = "{id}"
    label_template: str = "{id}"
    parse_args: Callable[[str, list[str]], StrategySpec] | None = None  # None: no argument
    check: Callable[[StrategySpec], None] | None = None  # raises ConfigError on bad args
    devices: frozenset[str] = DEVICES
    needs: str = ""  # why it needs those devices, said when it is refused elsewhere
    offloads: bool = False  # saved tensors move to CPU memory (save_on_cpu) and back
    examples: Callable[[], tuple[StrategySpec, ...]] = field(default=lambda: ())
    baseline: bool = False  # the reference every other strategy is compared with

    def runs_on(self, kind: str) -> bool:
        return kind in self.devices

    def label_of(self, spec: StrategySpec) -> str:
        return self.label_template.format(**_fields(spec))


def _fields(spec: StrategySpec) -> dict[str, object]:
    share = spec.budget_share
    return {"id": spec.name, "k": spec.k, "policy": spec.policy or DEFAULT_POLICY,
            "method": spec.budget_method,
            "budget": spec.budget_text() if spec.name == "budget" else "",
            "budget_arg": f"{share * 100:g}%" if share is not None else spec.budget_bytes}


def _keep_all(spec: StrategySpec, p: PlanInputs) -> list[Segment]:
    return [Segment(0, p.layers, "keep")]


def _segments_of(k: Callable[[StrategySpec, int], int]
                 ) -> Callable[[StrategySpec, PlanInputs], list[Segment]]:
    def plan(spec: StrategySpec, p: PlanInputs) -> list[Segment]:
        size = k(spec, p.layers)
        return [Segment(i, min(i + size, p.layers), "checkpoint")
                for i in range(0, p.layers, size)]
    return plan


def _selective_plan(spec: StrategySpec, p: PlanInputs) -> list[Segment]:
    return [Segment(i, i + 1, "selective", spec.policy or DEFAULT_POLICY)
            for i in range(p.layers)]


def _budget_plan(spec: StrategySpec, p: PlanInputs) -> list[Segment]:
    full = [p.block_bytes] * p.layers
    budget = (int(spec.budget_share * sum(full)) if spec.budget_share is not None
              else spec.budget_bytes)
    method = dp_plan if spec.budget_method == "dp" else greedy_plan
    return method(full, [p.input_bytes] * p.layers, budget)


def _check_k(spec: StrategySpec) -> None:
    if spec.k is None or not 1 <= spec.k <= 96:
        raise ConfigError(f"every-k: k={spec.k} is out of range; allowed 1..96")


def _check_policy(spec: StrategySpec) -> None:
    policy(spec.policy)


def _check_budget(spec: StrategySpec) -> None:
    if spec.budget_method not in BUDGET_METHODS:
        raise ConfigError(f"budget method {spec.budget_method!r} is unknown; "
                          f"allowed: {', '.join(BUDGET_METHODS)}")
    if spec.budget_share is not None:
        if not 0 < spec.budget_share <= 1:
            raise ConfigError(f"budget share {spec.budget_share:.0%} must be in 1%..100%")
    elif spec.budget_bytes is None or spec.budget_bytes <= 0:
        raise ConfigError(f"budget={spec.budget_bytes} bytes must be positive")


def _parse_k(text: str, args: list[str]) -> StrategySpec:
    if len(args) != 1 or not args[0].isdigit():
        raise ConfigError(f"strategy {text!r}: write every-k:K with K a layer count, "
                          f"e.g. every-k:2")
    return StrategySpec("every-k", k=int(args[0]))


def _parse_policy(text: str, args: list[str]) -> StrategySpec:
    if len(args) > 1:
        raise ConfigError(f"strategy {text!r}: write selective or selective:POLICY")
    name = args[0] if args else DEFAULT_POLICY.value
    if name and not name.startswith("save-"):
        name = "save-" + name
    return StrategySpec("selective", policy=name)


def _parse_budget(text: str, args: list[str]) -> StrategySpec:
    method = "greedy"
    if len(args) == 2:
        method, size = args
    elif len(args) == 1:
        size = args[0]
    else:
        raise ConfigError(f"strategy {text!r}: write budget:greedy:50MiB, budget:dp:50MiB "
                          f"or budget:dp:40% (of what no checkpointing holds)")
    if size.endswith("%"):
        try:
            share = float(size[:-1]) / 100
        except ValueError:
            raise ConfigError(f"strategy {text!r}: {size!r} is not a percentage") from None
        return StrategySpec("budget", budget_share=share, budget_method=method.lower())
    return StrategySpec("budget", budget_bytes=parse_bytes(size), budget_method=method.lower())


STRATEGIES: dict[str, Strategy] = {s.id: s for s in (
    Strategy(
        "none", N_("No checkpointing: every activation is kept for backward (fastest, most "
                   "memory)."),
        "#64748b",  # slate: the baseline
        _keep_all, cost="holds every layer's internals: O(N) memory, no recomputation",
        title_template=N_("no checkpoints"), baseline=True),
    Strategy(
        "every-layer", N_("Checkpoint each layer: keep only its input, rebuild its "
                          "internals in backward."),
        "#2563eb",  # blue
        _segments_of(lambda spec, n: 1),
        cost="holds one input per layer and one layer rebuilt; one extra forward",
        title_template=N_("every layer"), examples=lambda: (StrategySpec("every-layer"),)),
    Strategy(
        "every-k", N_("Checkpoint segments of {k} layers: keep one input per segment, "
                      "rebuild {k} layers."),
        "#0891b2",  # cyan
        _segments_of(lambda spec, n: spec.k or 1),
        cost="holds N/k inputs and one k-layer segment rebuilt; one extra forward",
        title_template=N_("every {k} layers"), label_template="every-k:{k}",
        parse_args=_parse_k, check=_check_k,
        examples=lambda: (StrategySpec("every-k", k=2), StrategySpec("every-k", k=4))),
    Strategy(
        "sqrt", N_("Segments of about sqrt(N) layers (Chen et al. 2016): O(sqrt N) memory."),
        "#ea580c",  # orange
        _segments_of(lambda spec, n: sqrt_k(n)),
        cost="O(√N) memory: √N inputs and one √N-layer segment; one extra forward",
        title_template=N_("every √N layers"), examples=lambda: (StrategySpec("sqrt"),)),
    Strategy(
        "selective", N_("Per-op policy: keep the outputs of expensive ops, recompute the "
                        "cheap ones."),
        "#16a34a",  # green
        _selective_plan,
        cost="holds what the policy saves per layer; recomputes only the rest",
        label_template="selective:{policy}",  # titled by its policy: title()
        parse_args=_parse_policy, check=_check_policy,
        examples=lambda: tuple(StrategySpec("selective", policy=p) for p in SELECTIVE_POLICIES)),
    Strategy(
        "budget", N_("Place checkpoints to fit a byte budget: Chen's greedy walk or optimal "
                     "DP."),
        "#9333ea",  # purple
        _budget_plan,
        cost="holds at most the budget; recomputes the checkpointed layers",
        title_template=N_("budget ({method}, {budget})"),
        label_template="budget:{method}:{budget_arg}",
        parse_args=_parse_budget, check=_check_budget,
        examples=lambda: tuple(StrategySpec("budget", budget_method=method, budget_share=0.4)
                               for method in ("dp", "greedy"))),
    Strategy(
        "offload", N_("Move saved tensors to CPU memory (save_on_cpu) and back in backward; "
                      "CUDA only."),
        "#be185d",  # pink
        _keep_all, cost="holds nothing on the GPU; copies every saved tensor both ways",
        devices=frozenset({"cuda"}), needs="a CUDA GPU (it moves saved tensors to CPU memory)",
        title_template=N_("offload to CPU"), offloads=True,
        examples=lambda: (StrategySpec("offload"),)),
)}
FALLBACK_COLOURS = ("#ca8a04", "#0d9488", "#7c3aed", "#dc2626", "#4d7c0f")


# ---------------------------------------------------------------- look-ups


def require_spec(value: object) -> StrategySpec:
    """`value` itself when it is a StrategySpec; TypeError for anything else (text above
    all: a strategy's text is parsed once, where it comes in, never inside)."""
    if isinstance(value, StrategySpec):
        return value
    raise TypeError(f"a StrategySpec record is expected, not {type(value).__name__} "
                    f"{value!r}: parse text where it comes in (memory.strategies."
                    f"parse_strategy)")


def title(spec: StrategySpec, locale: str = "en") -> str:
    """The display title of a strategy ('every 4 layers', 'selective: save the matmuls') in
    the language `locale` (a code of i18n.languages: "en", "de", "vi"): the one place titles
    are made, the record's template (a selective policy's own title) translated through
    the catalog."""
    spec = require_spec(spec)
    if spec.name == "selective":
        return i18n_gettext(locale, policy(spec.policy).title)
    fields = {k: v for k, v in _fields(spec).items() if k != "id"}
    return i18n_gettext(locale, spec.strategy.title_template.replace("{id}", spec.name),
                        **fields)


def colour(spec: StrategySpec) -> str:
    """The colour of a strategy on every chart (its record decides; variants share it)."""
    return require_spec(spec).strategy.colour


def fallback_colour(text: str) -> str:
    """A stable colour for a text that names no strategy of the lab (a table's own row)."""
    return FALLBACK_COLOURS[sum(map(ord, str(text))) % len(FALLBACK_COLOURS)]


def describe(spec: StrategySpec, locale: str = "en") -> str:
    """What a strategy does, for the pages' help, in the language `locale` (a code of
    i18n.languages): a policy's own description for selective, k filled in for every-k.
    Descriptions are catalog messages (N_), translated here as titles are."""
    spec = require_spec(spec)
    if spec.name == "selective":
        return i18n_gettext(locale, policy(spec.policy).description)
    return i18n_gettext(locale, spec.strategy.description, **_fields(spec))


def examples(kind: str) -> list[StrategySpec]:
    """The strategies the demo pages offer on a device, in record order (the baseline
    excluded: it is always measured)."""
    return [spec for s in STRATEGIES.values() if not s.baseline and s.runs_on(kind)
            for spec in s.examples()]


def device_refusal(spec: StrategySpec, device_label: str) -> str:
    """Why a strategy does not run on this device: 'offload needs a CUDA GPU (...)'."""
    return f"{spec.name} needs {spec.strategy.needs}; this device is {device_label}"


def plan(spec: StrategySpec, inputs: PlanInputs) -> list[Segment]:
    """The segments a strategy runs the layers in. Raises BudgetTooSmall for budgets."""
    spec = require_spec(spec)
    return spec.strategy.plan(spec, inputs)


# ---------------------------------------------------------------- parsing: the edges


def parse_strategy(text: str) -> StrategySpec:
    """'none', 'every-layer', 'every-k:4', 'sqrt', 'selective[:policy]', 'offload',
    'budget[:greedy|dp]:50MiB' or ':40%' -> StrategySpec. Raises ConfigError on bad text.
    For the edges only, where text comes in (a command line, a job or result read back
    from JSON); a record passed here is a TypeError: it was parsed already."""
    if not isinstance(text, str):
        raise TypeError(f"parse_strategy takes text, not {type(text).__name__} {text!r}")
    parts = [p.strip() for p in text.strip().split(":")]
    name, args = parts[0].lower(), parts[1:]
    if name not in STRATEGIES:
        raise ConfigError(f"strategy {text!r} is unknown; allowed: {', '.join(STRATEGIES)}")
    record = STRATEGIES[name]
    if record.parse_args is not None:
        return record.parse_args(text, args)
    if args:
        raise ConfigError(f"strategy {text!r}: {name} takes no argument")
    return StrategySpec(name)


def _check(spec: StrategySpec) -> None:
    if spec.name not in STRATEGIES:
        raise ConfigError(f"strategy {spec.name!r} is unknown; allowed: {', '.join(STRATEGIES)}")
    check = STRATEGIES[spec.name].check
    if check is not None:
        check(spec)


def parse_strategies(text: str) -> list[StrategySpec]:
    """'none,every-layer,every-k:2' -> specs (comma-separated)."""
    if not isinstance(text, str):
        raise TypeError(f"parse_strategies takes text, not {type(text).__name__} {text!r}")
    items = [t for t in (s.strip() for s in text.split(",")) if t]
    if not items:
        raise ConfigError("strategies: give at least one, e.g. none,every-layer")
    return [parse_strategy(t) for t in items]


@lru_cache(maxsize=512)
def spec_of_label(text: str) -> StrategySpec | None:
    """The strategy a table's canonical text names ("every-k:2"), or None for a text that
    names no strategy of the lab (the compiler page's own points). For the "strategy"
    column of a results table (a sweep, a what-fits search, training losses, the compiler
    page's points; read back from the store or made by the engine): the one place inside
    the app a strategy is looked up by its text, each text parsed once (parse_strategy)
    and remembered."""
    try:
        return parse_strategy(text)
    except ValueError:
        return None
