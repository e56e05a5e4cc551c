"""The step's peak on tiny real transformers models against the planner's band
(memory.footprint.step_peak_range): the live bytes above the parameters at the step's
peak (demos.tracker.LiveTracker, gradients included) lie between the largest moment
every step passes through and the planner's pieces plus its allowance for backward's
temporaries, for every preset family, strategy, precision and LoRA."""

from __future__ import annotations

import functools
import itertools

import pytest

from demos.real_models import Setup, measure, planner_peak_range
from memory import footprint as F
from model_classes.quantized import QLORA_SKIP, qlora_available
from model_classes.tiny import tiny_architecture

FAMILIES = {"gpt2": "gpt2", "llama": "llama-3.1-8b", "qwen2": "qwen2.5-7b"}
CASES = list(itertools.product(FAMILIES, ["none", "every-layer", "first-k"],
                               ["fp32", "bf16", "mixed"], [0, 16]))


def setup_of(family: str, strategy: str, dtype: str, lora: int,
             attention: str = "sdpa", qlora: bool = False) -> Setup:
    return Setup(tiny_architecture(FAMILIES[family]), dtype=dtype, attention=attention,
                 strategy=strategy, k=2, lora_rank=lora, qlora=qlora)


@functools.cache
def peak(setup: Setup) -> int:
    m = measure(setup, peak=True)
    assert m.peak
    return m.peak


@pytest.mark.parametrize("family,strategy,dtype,lora", CASES,
                         ids=["-".join(map(str, c)) for c in CASES])
def test_the_measured_peak_lies_in_the_planners_band(family, strategy, dtype, lora) -> None:
    setup = setup_of(family, strategy, dtype, lora)
    band = planner_peak_range(setup)
    assert band is not None
    assert band.lower <= peak(setup) <= band.upper


@pytest.mark.parametrize("family", list(FAMILIES))
def test_eager_attention_too(family) -> None:
    for strategy, lora in (("none", 0), ("every-layer", 16)):
        setup = setup_of(family, strategy, "bf16", lora, attention="eager")
        band = planner_peak_range(setup)
        assert band.lower <= peak(setup) <= band.upper


@pytest.mark.parametrize("family,strategy,dtype", [
    (f, st, d) for f in FAMILIES for st in ("none", "every-layer", "first-k")
    for d in ("fp32", "bf16")])
def test_qlora_too(family, strategy, dtype) -> None:
    if not qlora_available():
        pytest.skip(QLORA_SKIP)
    setup = setup_of(family, strategy, dtype, 16, qlora=True)
    band = planner_peak_range(setup)
    assert band.lower <= peak(setup) <= band.upper


def test_the_pieces_alone_are_no_bound_either_way() -> None:
    """Why a band: the pieces added at once overstate a full fine-tune's peak (gradients
    and kept activations are never all alive together) and understate LoRA's with every
    layer checkpointed (backward's temporaries, the outside of the layers)."""
    full = setup_of("llama", "none", "fp32", 0)
    lora = setup_of("qwen2", "every-layer", "fp32", 16)
    assert peak(full) < 0.8 * planner_peak_range(full).pieces
    assert peak(lora) > 1.03 * planner_peak_range(lora).pieces


def test_the_band_is_the_planners_breakdown() -> None:
    """The band's middle is the breakdown without the GPU's allowances, its top one plain
    layer more."""
    setup = setup_of("llama", "every-layer", "bf16", 16)
    band = planner_peak_range(setup)
    from demos.real_models import planner_inputs, planner_peak_pieces

    p = planner_inputs(setup)
    assert band.pieces == planner_peak_pieces(setup)
    assert band.upper - band.pieces == F.BACKWARD_ALLOWANCE_LAYERS * F.layer_bytes(p.tensors())
    assert band.lower < band.pieces < band.upper
