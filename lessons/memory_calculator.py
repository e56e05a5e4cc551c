"""What training memory is made of: weights, gradients, optimizer state, activations, logits.

Bytes per parameter follow the Hugging Face "model training anatomy" accounting; the
activations use Korthikanti et al.'s 34·b·s·h bytes per layer (16-bit values, efficient
attention), scaled by the bytes of one activation value; logits are b·s·V in 32-bit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from i18n import DEFAULT, N_, gettext
from lessons.checkpoint_math import GB, layer_activation_bytes, layer_input_bytes, logits_bytes
from memory.precisions import OPTIMIZERS, PRECISIONS, optimizer_state_bytes


@dataclass(frozen=True)
class TrainingSetup:
    params: float  # number of parameters
    precision: str = "mixed"
    optimizer: str = "adamw"
    batch: int = 2
    tokens: int = 1_024
    hidden: int = 2_048
    layers: int = 28
    vocab: int = 248_000
    logits_bytes_per_value: int = 4

    def with_(self, **changes: object) -> TrainingSetup:
        return replace(self, **changes)


@dataclass(frozen=True)
class Preset:
    key: str
    label: str  # marked N_
    setup: TrainingSetup
    note: str  # marked N_; its {placeholders} are filled from the setup by `describe`

    def describe(self, code: str = DEFAULT) -> str:
        """The preset's shape in language `code`, from its setup (never stale)."""
        return describe_setup(self.setup, code, self.note)


def transformer_params(hidden: int, layers: int, vocab: int) -> float:
    """About 12·h² per layer (attention 4h², MLP 8h²) plus the embedding table V·h."""
    return 12.0 * hidden * hidden * layers + float(vocab) * hidden


PRESETS: dict[str, Preset] = {
    "seed-2b": Preset(
        "seed-2b", N_("2B-class model (the worked example)"),
        TrainingSetup(transformer_params(2_048, 28, 248_000), batch=2, tokens=1_024,
                      hidden=2_048, layers=28, vocab=248_000),
        N_("parameters estimated as 12·h²·L + V·h"),
    ),
    "gpt2-small": Preset(
        "gpt2-small", N_("GPT-2 small (124M)"),
        TrainingSetup(124_000_000, batch=8, tokens=1_024, hidden=768, layers=12,
                      vocab=50_257),
        "",
    ),
    "8b": Preset(
        "8b", N_("8B model (Llama-3-8B-like)"),
        TrainingSetup(8_030_000_000, batch=2, tokens=4_096, hidden=4_096, layers=32,
                      vocab=128_256),
        "",
    ),
}
DEFAULT_PRESET = "seed-2b"


def describe_setup(setup: TrainingSetup, code: str = DEFAULT, note: str = "") -> str:
    """A setup's shape in words, in language `code`: "hidden 2,048 · 28 layers · vocabulary
    248,000 · 1.9B parameters · batch 2 × 1,024 tokens", and the note (a message) if any."""
    text = gettext(code, "hidden {hidden:,} · {layers} layers · vocabulary {vocab:,} · "
                         "{params:,.2f}B parameters · batch {batch} × {tokens:,} tokens",
                   hidden=setup.hidden, layers=setup.layers, vocab=setup.vocab,
                   params=setup.params / 1e9, batch=setup.batch, tokens=setup.tokens)
    return f"{text}; {gettext(code, note)}" if note else text


# Memory components: ids, in stacking order; their words are COMPONENT_LABELS.
COMPONENTS: tuple[str, ...] = ("weights", "gradients", "optimizer", "activations", "logits")
COMPONENT_LABELS: dict[str, str] = {
    "weights": N_("Weights"),
    "gradients": N_("Gradients"),
    "optimizer": N_("Optimizer state"),
    "activations": N_("Activations"),
    "logits": N_("Logits"),
}


@dataclass(frozen=True)
class MemoryBreakdown:
    weights: float
    gradients: float
    optimizer: float
    activations: float
    logits: float

    def parts(self) -> dict[str, float]:
        return dict(zip(COMPONENTS, (self.weights, self.gradients, self.optimizer,
                                     self.activations, self.logits), strict=True))

    @property
    def total(self) -> float:
        return sum(self.parts().values())

    @property
    def per_parameter_state(self) -> float:
        """Weights + gradients + optimizer state: what checkpointing never touches."""
        return self.weights + self.gradients + self.optimizer

    def in_gb(self) -> dict[str, float]:
        return {name: value / GB for name, value in self.parts().items()}


def bytes_per_parameter(precision: str, optimizer: str) -> int:
    """Weights + gradients + optimizer state per parameter (18 for mixed-precision AdamW)."""
    p, o = PRECISIONS[precision], OPTIMIZERS[optimizer]
    return p.weight_bytes + p.grad_bytes + optimizer_state_bytes(precision, o.key)


def activation_bytes(setup: TrainingSetup, checkpointing: bool = False) -> float:
    """All layers' activations; with checkpointing at every layer, every layer's input plus
    one layer rebuilt at a time."""
    scale = PRECISIONS[setup.precision].activation_bytes / 2  # the 34 counts 16-bit values
    per_layer = layer_activation_bytes(setup.batch, setup.tokens, setup.hidden) * scale
    if not checkpointing:
        return per_layer * setup.layers
    inputs = layer_input_bytes(setup.batch, setup.tokens, setup.hidden,
                               PRECISIONS[setup.precision].activation_bytes)
    return inputs * setup.layers + per_layer


def breakdown(setup: TrainingSetup, checkpointing: bool = False) -> MemoryBreakdown:
    p, o = PRECISIONS[setup.precision], OPTIMIZERS[setup.optimizer]
    return MemoryBreakdown(
        weights=setup.params * p.weight_bytes,
        gradients=setup.params * p.grad_bytes,
        optimizer=setup.params * optimizer_state_bytes(setup.precision, o.key),
        activations=activation_bytes(setup, checkpointing),
        logits=logits_bytes(setup.batch, setup.tokens, setup.vocab,
                            setup.logits_bytes_per_value),
    )
