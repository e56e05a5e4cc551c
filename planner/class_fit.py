"""A model kind's class measured at a few sizes and fitted, exactly, to full size.

The class is built with the config's own shapes but only as many blocks as it takes to
meet each block type once after the first (Llama: 2 decoder layers; Gemma 2: 3, local then
global; Gemma 3: 6), and one training step's forward runs with its loss. Nothing is
downloaded and nothing is allocated: the model is built and run under torch's
FakeTensorMode, whose tensors have shapes, dtypes and storages but no data, so a 70B layer
at 4,096 tokens costs what a tiny one does. What each step keeps is measured by the kind
(model_classes.kinds: for a causal LM, model_classes.causal_lm_step).

An image model (a kind whose size is a square image's side in pixels) is fitted in
t = (side / unit)², not in the side: a feature map is C·H·W numbers, ∝ side², attention
scores ∝ tokens² ∝ side⁴, so each term is a quadratic in t. `unit` is the side the
model needs whole (the VAE's 8 pixels per latent, times its patch or its UNet's
downsampling): sides of unit·2, unit·3 and unit·4 are sampled (unit·5 checked), so that
no level rounds and the fit is exact at every multiple of the unit.

Full size: run at three sizes and three batch sizes (1, 2, 3) per stretch of s (a sliding
window splits s at the window: transformers builds a real mask from there on), and each
term's bytes are fitted exactly as b·(g0 + g1·s + g2·s²) + (h0 + h1·s + h2·s²) for
b ≥ 2 and as its own quadratic in s at b = 1 (memory.class_layers.Poly).
`fit_variant(..., check=True)` measures one more point per stretch and refuses a fit that
misses it by a byte; the tests compare the fit with real CPU steps.
"""

from __future__ import annotations

import math
from fractions import Fraction

import torch

from memory.class_layers import ClassFit, Poly, Term
from model_classes.causal_lm_config import ClassConfigError
from model_classes.kinds import CAUSAL_LM, ModelKind
from model_classes.variant import Variant

SAMPLE_STEP = 64  # tokens between the sampled sequence lengths (without a window)


def _samples(start: int, stop: int | None) -> list[int]:
    """Three sequence lengths in [start, stop) (stop None: unbounded), spread apart."""
    if stop is None:
        step = SAMPLE_STEP
        first = start if start > 1 else step
        return [first, first + step, first + 2 * step]
    span = stop - start
    if span < 3:
        raise ClassConfigError("window", f"a sliding window of {stop} tokens is too small "
                               "to plan")
    step = span // 3
    return [start + step // 2, start + step // 2 + step, start + step // 2 + 2 * step]


def picture_samples(unit: int) -> list[int]:
    """The sampled t = (side / unit)² of an image model: sides of 2, 3 and 4 units."""
    return [m * m for m in (2, 3, 4)]


def side_of(t: int, unit: int) -> int:
    """The side in pixels of t = (side / unit)²."""
    return math.isqrt(t) * unit


def _quadratic(xs: list[int], ys: list[int]) -> tuple[Fraction, Fraction, Fraction]:
    """The polynomial c0 + c1·x + c2·x² through three points, exactly."""
    c = [Fraction(0)] * 3
    for i, (xi, yi) in enumerate(zip(xs, ys, strict=True)):
        others = [xj for j, xj in enumerate(xs) if j != i]
        denom = Fraction((xi - others[0]) * (xi - others[1]))
        a, b2 = others
        # (x - a)(x - b) = x² - (a + b)x + ab
        c[0] += yi * Fraction(a * b2) / denom
        c[1] += yi * Fraction(-(a + b2)) / denom
        c[2] += yi * Fraction(1) / denom
    return (c[0], c[1], c[2])


def whole_model(model: torch.nn.Module, types: tuple[str, ...], slot_names: dict[int, str],
                trainable: bool = False, kind: ModelKind = CAUSAL_LM) -> int:
    """Parameters (trainable ones: `trainable`) of the whole model, from the reduced one:
    those outside the decoder layers once, each layer's by its type."""
    layers = kind.blocks(model)

    def count(params) -> int:
        return sum(p.numel() for p in params if p.requires_grad or not trainable)

    inside = {id(p) for layer in layers for p in layer.parameters()}
    outside = count(p for p in model.parameters() if id(p) not in inside)
    per_type = {name: count(layers[i].parameters()) for i, name in slot_names.items()
                if i > 0}
    if len(layers) == 1:
        per_type = {types[0]: count(layers[0].parameters())}
    # a first layer of a type no other measured layer has (every block of a UNet)
    per_type.setdefault(types[0], count(layers[0].parameters()))
    return outside + sum(per_type[t] for t in types)


class FitMissed(AssertionError):
    """A fitted term missed a measured check point."""


def fit_variant(config, variant: Variant, check: bool = False, one_only: bool = False,
                one: ClassFit | None = None, kind: ModelKind = CAUSAL_LM, unit: int = 0,
                checkpointing: str = "none") -> ClassFit:
    """Measure the class under FakeTensorMode at sampled sizes (b = 1, 2 and 3) and fit
    every term. `one_only`: at b = 1 only (ClassFit.one_only: a third of the steps);
    `one`, such a fit: b = 2 and 3 only, its b = 1 quadratics taken from `one` (the whole
    fit, the same as measuring all three batch sizes). `unit` (an image model's): the fit
    is in t = (side / unit)² (see the module's docstring); `checkpointing`: the kind's
    strategy switched on for the step ("every-layer": what a checkpointed block keeps)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    batches = (1,) if one_only else (2, 3) if one is not None else (1, 2, 3)
    types = kind.block_types(config)
    layout = kind.reduced(types)
    n = len(layout)
    breaks = kind.breaks(config)
    stretches = ([(1, breaks[0]), (breaks[0], None)] if breaks else [(1, None)])

    def samples(start: int, stop: int | None) -> list[int]:
        return picture_samples(unit) if unit else _samples(start, stop)

    with FakeTensorMode(allow_non_fake_inputs=True):
        model = kind.build(config, variant, fake=True)
        if checkpointing != "none":
            kind.checkpoint(model, checkpointing)
        runs: dict[tuple[int, int], dict[tuple, int]] = {}
        points = [(b, s) for start, stop in stretches for s in samples(start, stop)
                  for b in batches]
        if check and unit:
            points.append((1 if one_only else 4, 25))
        elif check:
            points += [(4, _samples(start, stop)[-1] + 7 if stop is None else
                        min(stop - 1, _samples(start, stop)[-1] + 1))
                       for start, stop in stretches]
        for b, s in points:
            step = kind.measure_step(model, b, side_of(s, unit) if unit else s, variant)
            runs[(b, s)] = step.gpu if variant.device == "cuda" else step.cpu
    # each layer type once: its first layer after layer 0 (and layer 0 as "first")
    slot_names = {-1: "outside", 0: "first"}
    for i in range(1, n):
        if layout[i] not in slot_names.values():
            slot_names[i] = layout[i]
    slots = {name: i for i, name in slot_names.items()}
    at_one = ({(slots[t.slot], t.name, t.kind, t.padded): t.polys for t in one.terms}
              if one is not None else {})
    keys = sorted({k for r in runs.values() for k in r if k[0] in slot_names} | set(at_one))
    zero = (Fraction(0),) * 3
    terms = []
    for key in keys:
        slot, module, saved_as, padded = key
        polys = []
        for index, (start, stop) in enumerate(stretches):
            xs = samples(start, stop)
            if one is None:
                first = _quadratic(xs, [runs[(1, s)].get(key, 0) for s in xs])
            else:
                first = at_one[key][index].one if key in at_one else zero
            if one_only:
                polys.append(Poly(zero, zero, first))  # type: ignore[arg-type]
                continue
            two, three = ([runs[(b, s)].get(key, 0) for s in xs] for b in (2, 3))
            per = [c - t for t, c in zip(two, three, strict=True)]
            g = _quadratic(xs, per)
            h = _quadratic(xs, [t - 2 * p for t, p in zip(two, per, strict=True)])
            polys.append(Poly(g, h, first))
        terms.append(Term(slot_names[slot], module, saved_as, tuple(polys), padded))
    fit = ClassFit(tuple(terms), breaks,
                   trainable=whole_model(model, types, slot_names, trainable=True, kind=kind),
                   one_only=one_only)
    if check:
        for (b, s), run in runs.items():
            for term, key in zip(terms, keys, strict=True):
                want = run.get(key, 0)
                polys = term.polys[fit.stretch(s)]
                if polys(b, s) != want:
                    raise FitMissed(f"{term.slot}/{term.name}: fit {polys(b, s)} != "
                                    f"measured {want} at b={b}, s={s}")
    return fit

