"""Checkpointing strategies: names, descriptions, parsing of 'name:arg' strings."""

from __future__ import annotations

from dataclasses import dataclass

from demos.config import ConfigError, format_bytes, parse_bytes

STRATEGIES: dict[str, str] = {
    "none": "No checkpointing: every activation is kept for backward (fastest, most memory).",
    "every-layer": "Checkpoint each layer: keep only its input, rebuild its internals in backward.",
    "every-k": "Checkpoint segments of k layers: keep one input per segment, rebuild k layers.",
    "sqrt": "Segments of about sqrt(N) layers (Chen et al. 2016): O(sqrt N) memory.",
    "selective": "Per-op policy: keep the outputs of expensive ops, recompute the cheap ones.",
    "budget": "Place checkpoints to fit a byte budget: Chen's greedy walk or optimal DP.",
    "offload": "Move saved tensors to CPU memory (save_on_cpu) and back in backward; CUDA only.",
}
CUDA_ONLY: set[str] = {"offload"}

SELECTIVE_POLICIES: dict[str, str] = {
    "save-matmuls": "Save the outputs of the matrix multiplications (QKV, projections, MLP); "
                    "recompute LayerNorm, attention, GELU and the additions.",
    "save-attention": "Save only the attention kernel's output and log-sum-exp; recompute "
                      "everything else, matmuls too (less memory, more recompute).",
    "save-all-but-attention": "Save the output of every op except attention: a bad policy "
                              "that keeps more bytes than no checkpointing at all.",
}
DEFAULT_POLICY = "save-matmuls"
BUDGET_METHODS: dict[str, str] = {
    "greedy": "Chen et al.'s greedy walk: start a new segment when the running size "
              "would pass the budget; every layer is recomputed.",
    "dp": "Optimal placement by dynamic programming: keep as many layers as fit, "
          "checkpoint the rest; least recompute within the budget.",
}


@dataclass(frozen=True)
class StrategySpec:
    name: str
    k: int | None = None
    policy: str | None = None
    budget_bytes: int | None = None
    budget_method: str = "greedy"

    @property
    def label(self) -> str:
        """Canonical text, parseable by parse_strategy."""
        if self.name == "every-k":
            return f"every-k:{self.k}"
        if self.name == "selective":
            return f"selective:{self.policy or DEFAULT_POLICY}"
        if self.name == "budget":
            return f"budget:{self.budget_method}:{self.budget_bytes}"
        return self.name

    @property
    def title(self) -> str:
        """Human-readable label for tables and charts."""
        if self.name == "budget":
            return f"budget ({self.budget_method}, {format_bytes(self.budget_bytes)})"
        if self.name == "selective":
            return f"selective ({self.policy or DEFAULT_POLICY})"
        if self.name == "every-k":
            return f"every-{self.k}"
        return self.name


def parse_strategy(text: str | StrategySpec) -> StrategySpec:
    """'none', 'every-layer', 'every-k:4', 'sqrt', 'selective[:policy]', 'offload',
    'budget[:greedy|dp]:50MiB' -> StrategySpec. Raises ConfigError on bad text."""
    if isinstance(text, StrategySpec):
        return _check(text)
    parts = [p.strip() for p in str(text).strip().split(":")]
    name, args = parts[0].lower(), parts[1:]
    allowed = ", ".join(STRATEGIES)
    if name not in STRATEGIES:
        raise ConfigError(f"strategy {text!r} is unknown; allowed: {allowed}")
    if name == "every-k":
        if len(args) != 1 or not args[0].isdigit():
            raise ConfigError(f"strategy {text!r}: write every-k:K with K a layer count, "
                              f"e.g. every-k:2")
        return _check(StrategySpec("every-k", k=int(args[0])))
    if name == "selective":
        if len(args) > 1:
            raise ConfigError(f"strategy {text!r}: write selective or selective:POLICY")
        policy = args[0] if args else DEFAULT_POLICY
        if policy and not policy.startswith("save-"):
            policy = "save-" + policy
        return _check(StrategySpec("selective", policy=policy))
    if name == "budget":
        method = "greedy"
        if len(args) == 2:
            method, size = args
        elif len(args) == 1:
            size = args[0]
        else:
            raise ConfigError(f"strategy {text!r}: write budget:greedy:50MiB or budget:dp:50MiB")
        return _check(StrategySpec("budget", budget_bytes=parse_bytes(size),
                                   budget_method=method.lower()))
    if args:
        raise ConfigError(f"strategy {text!r}: {name} takes no argument")
    return StrategySpec(name)


def _check(spec: StrategySpec) -> StrategySpec:
    if spec.name not in STRATEGIES:
        raise ConfigError(f"strategy {spec.name!r} is unknown; allowed: {', '.join(STRATEGIES)}")
    if spec.name == "every-k" and (spec.k is None or not 1 <= spec.k <= 96):
        raise ConfigError(f"every-k: k={spec.k} is out of range; allowed 1..96")
    if spec.name == "selective" and (spec.policy or DEFAULT_POLICY) not in SELECTIVE_POLICIES:
        raise ConfigError(f"selective policy {spec.policy!r} is unknown; allowed: "
                          f"{', '.join(SELECTIVE_POLICIES)}")
    if spec.name == "budget":
        if spec.budget_method not in BUDGET_METHODS:
            raise ConfigError(f"budget method {spec.budget_method!r} is unknown; "
                              f"allowed: {', '.join(BUDGET_METHODS)}")
        if spec.budget_bytes is None or spec.budget_bytes <= 0:
            raise ConfigError(f"budget={spec.budget_bytes} bytes must be positive")
    return spec


def parse_strategies(text: str) -> list[StrategySpec]:
    """'none,every-layer,every-k:2' -> specs (comma-separated)."""
    items = [t for t in (s.strip() for s in str(text).split(",")) if t]
    if not items:
        raise ConfigError("strategies: give at least one, e.g. none,every-layer")
    return [parse_strategy(t) for t in items]
