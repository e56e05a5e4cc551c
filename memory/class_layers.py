"""What a model family's real decoder layers keep for backward, as exact formulas in the
batch b and the sequence length s (pure arithmetic, no torch: planner.class_memory
measures the transformers class and fits these; the memory model only evaluates them).

Every saved tensor of a layer has a size that is a polynomial in b and s of degree one
in b and at most two in s (b·s·h activations, b·a·s² attention scores, b·s² masks, s·d
rotary tables): `Poly` holds b·(g0 + g1·s + g2·s²) + (h0 + h1·s + h2·s²) with exact
rational coefficients (and its own quadratic at b = 1). A sliding window makes the size
piecewise (at s ≥ window transformers builds a real mask): a `Term` holds one Poly per
stretch of s, split at `ClassFit.breaks`. A term may be `padded`: the GPU's
memory-efficient attention kernel pads its log-sum-exp to 32 tokens, so it is evaluated
at s rounded up to 32.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Protocol

from i18n import units
from memory.layer import Held

# a layer type's suffix for a dense decoder layer in a model that mixes dense and MoE ones
# ("full_attention+dense_mlp": DeepSeek's first layers; model_classes.causal_lm_config.layer_types)
DENSE_MLP = "+dense_mlp"


@dataclass(frozen=True)
class Poly:
    """b·(g0 + g1·s + g2·s²) + (h0 + h1·s + h2·s²) for b ≥ 2, and `one` (o0 + o1·s +
    o2·s²) at b = 1: one sequence can keep a view where several keep a copy (the loss's
    shifted labels: b·(s + 1) numbers for one sequence, b·s for more)."""

    g: tuple[Fraction, Fraction, Fraction]
    h: tuple[Fraction, Fraction, Fraction]
    one: tuple[Fraction, Fraction, Fraction]

    def __post_init__(self) -> None:
        # integers over one common denominator: plans evaluate a poly thousands of times
        coeffs = (*self.g, *self.h, *self.one)
        den = math.lcm(*(Fraction(c).denominator for c in coeffs))
        object.__setattr__(self, "_den", den)
        object.__setattr__(self, "_num", tuple(int(Fraction(c) * den) for c in coeffs))

    def __call__(self, b: int, s: int) -> int:
        g0, g1, g2, h0, h1, h2, o0, o1, o2 = self._num  # type: ignore[attr-defined]
        if b == 1:
            value = o0 + o1 * s + o2 * s * s
        else:
            value = b * (g0 + g1 * s + g2 * s * s) + h0 + h1 * s + h2 * s * s
        return value // self._den  # type: ignore[attr-defined]

    def text(self, locale: str = "en") -> str:
        """The formula in b and s, e.g. "128·b·s + 4·s²" (its integers grouped as the
        locale writes them: German "14.340·b·s")."""
        parts = []
        for coeffs, unit in ((self.g, "b"), (self.h, "")):
            for power, c in enumerate(coeffs):
                if not c:
                    continue
                factors = [unit] if unit else []
                factors += [] if power == 0 else ["s" if power == 1 else "s²"]
                number = (str(c) if c.denominator != 1
                          else units.number(c.numerator, locale=locale))
                parts.append("·".join([number, *factors]) if factors else number)
        return " + ".join(parts) or "0"


@dataclass(frozen=True)
class Term:
    """One named piece of what a layer (or the rest of the model) keeps: `slot` says whose
    ("first": layer 0, else a layer type such as "full_attention", "sliding_attention", or
    "outside": the embeddings, final norm, head and loss), `name` the module that saved it
    (its path inside the layer), `kind` input | lora | lse | loss | other."""

    slot: str
    name: str
    kind: str
    polys: tuple[Poly, ...]  # one per stretch of s (ClassFit.breaks)
    padded: bool = False


@dataclass(frozen=True)
class ClassFit:
    """The fitted terms of one variant (precision, tuning, kernel, device) of a class.

    A fit may be measured at a batch of one sequence only (`one_only`: each term's `one`
    quadratic; its g and h are not known): the first plan of a config that fits nowhere
    evaluates no other batch, and measuring one batch size takes a third of the steps.
    Asked for b ≥ 2, such a fit answers from `whole()`, the whole fit measured then."""

    terms: tuple[Term, ...]
    breaks: tuple[int, ...] = ()  # s at which a new stretch starts (a sliding window)
    trainable: int = 0  # parameters trained in the whole model (LoRA: the adapters)
    one_only: bool = False
    whole: Callable[[], ClassFit] | None = field(default=None, compare=False, repr=False)

    def at(self, b: int) -> ClassFit:
        """The fit that answers for a batch of b sequences: this one, or the whole fit
        where this one was measured at b = 1 only."""
        if b == 1 or not self.one_only:
            return self
        if self.whole is None:
            raise ValueError("this fit was measured at a batch of one sequence only")
        return self.whole()

    def stretch(self, s: int) -> int:
        return bisect_right(self.breaks, s)

    def value(self, term: Term, b: int, s: int) -> int:
        """One of this fit's terms at (b, s); b ≥ 2 needs a whole fit (`at(b)`)."""
        if b != 1 and self.one_only:
            raise ValueError("this fit was measured at a batch of one sequence only")
        at = math.ceil(s / 32) * 32 if term.padded else s
        return term.polys[self.stretch(s)](b, at)

    def held(self, slot: str, b: int, s: int) -> tuple[Held, ...]:
        """A slot's terms as the memory model's Held records (kind input stays input)."""
        fit = self.at(b)
        return tuple(Held(t.name or "residual", fit.value(t, b, s),
                          "input" if t.kind == "input" else
                          "lora" if t.kind == "lora" else "measured")
                     for t in fit.terms if t.slot == slot and fit.value(t, b, s))

    def slot_bytes(self, slot: str, b: int, s: int) -> int:
        return _slot_bytes(self.at(b), slot, b, s)


@lru_cache(maxsize=65536)
def _slot_bytes(fit: ClassFit, slot: str, b: int, s: int) -> int:
    return sum(fit.value(t, b, s) for t in fit.terms if t.slot == slot)


class LayerSource(Protocol):
    """Where a plan takes its layers from when not from the course's formula: a measured
    class (planner.class_memory.MeasuredClass). `layer_types` lists every decoder
    layer's type in order; `fit(key)` the fitted terms of a variant key (see
    memory.footprint.PlannerInputs.variant)."""

    family: str
    layer_types: tuple[str, ...]

    def fit(self, key: tuple) -> ClassFit: ...


def at_rank(low: ClassFit, low_rank: int, high: ClassFit, high_rank: int, rank: int
            ) -> ClassFit:
    """A LoRA variant's fit at `rank` from the same variant's fits at two other ranks.
    Every tensor a LoRA layer keeps is a rank-wide one (lora_A's output, b·s·r numbers) or
    does not depend on the rank, and so are the adapters' parameters: each coefficient
    is affine in the rank, and two ranks give it exactly (a term one fit has not is 0
    there)."""
    if low.breaks != high.breaks:
        raise ValueError("the two fits split the sequence length differently")
    span = Fraction(rank - low_rank, high_rank - low_rank)

    def key(term: Term) -> tuple:
        return (term.slot, term.name, term.kind, term.padded)

    def line(a: tuple[Fraction, ...], b: tuple[Fraction, ...]) -> tuple[Fraction, ...]:
        return tuple(x + (y - x) * span for x, y in zip(a, b, strict=True))

    zero = Poly((Fraction(0),) * 3, (Fraction(0),) * 3, (Fraction(0),) * 3)  # type: ignore[arg-type]
    stretches = len(low.breaks) + 1
    lows = {key(t): t.polys for t in low.terms}
    highs = {key(t): t.polys for t in high.terms}
    terms = []
    for k in dict.fromkeys([*lows, *highs]):
        a = lows.get(k, (zero,) * stretches)
        b = highs.get(k, (zero,) * stretches)
        polys = tuple(Poly(line(p.g, q.g), line(p.h, q.h), line(p.one, q.one))  # type: ignore[arg-type]
                      for p, q in zip(a, b, strict=True))
        if any(any((*p.g, *p.h, *p.one)) for p in polys):
            terms.append(Term(k[0], k[1], k[2], polys, k[3]))
    trainable = low.trainable + (high.trainable - low.trainable) * span
    if trainable.denominator != 1:
        raise ValueError("the adapters' parameters are not affine in the rank")
    return ClassFit(tuple(terms), low.breaks, int(trainable))
