"""The image planner's arithmetic (planner.picture_plan) on a made-up measurement, no
torch: which blocks each strategy checkpoints, what a plan keeps and rebuilds, the
trained model's state by precision and tuning, and the recommendation: the least
recompute that fits (the optimal placement against brute force on unequal blocks), or
the fewest blocks checkpointed without FLOP counts."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

from memory.class_layers import ClassFit, Poly, Term
from memory.hardware import FRAGMENTATION, WORKSPACE_BYTES
from planner import picture_plan as P
from planner.class_json import fit_to_json

ZERO = (Fraction(0),) * 3


def _term(slot: str, per_t: int) -> Term:
    """per_t bytes per unit of t, at one image."""
    return Term(slot, "x", "other", (Poly(ZERO, ZERO, (Fraction(0), Fraction(per_t),  # type: ignore[arg-type]
                                                       Fraction(0))),))


def _measured(blocks: int = 4) -> dict:
    plain = ClassFit((_term("first", 100), _term("a", 100), _term("outside", 10)))
    ckpt = ClassFit((_term("first", 10), _term("a", 10), _term("outside", 20)))
    return {"unit": 16, "block_types": ["a"] * blocks,
            "block_names": [f"blocks.{i}" for i in range(blocks)], "params": 1000,
            "trainable": 10, "fits": {"none": fit_to_json(plain),
                                      "every-layer": fit_to_json(ckpt)}}


VISION = {"model_type": "vit", "num_channels": 3}


def test_each_strategy_checkpoints_the_blocks_the_libraries_pick() -> None:
    assert P.chosen("none", 5) == ()
    assert P.chosen("every-layer", 5) == (0, 1, 2, 3, 4)
    assert P.chosen("every-n", 5, n=2) == (0, 2, 4)
    assert P.chosen("first-k", 5, k=2) == (0, 1)


def test_kept_and_rebuilt_follow_the_checkpointed_blocks() -> None:
    b = P.blocks(_measured(), 1, 32)  # t = 4
    assert b.plain == (400,) * 4 and b.checkpointed == (40,) * 4
    per, outside, rebuilt = P.kept(b, P.chosen("every-n", 4, n=2))
    assert per == [40, 400, 40, 400] and outside == 80 and rebuilt == 400
    assert P.kept(b, ()) == ([400] * 4, 40, 0)


def test_the_trained_models_state_by_precision_and_tuning() -> None:
    lora = P.PictureInputs(VISION, tuning="lora", precision="mixed")
    assert P.model_state(lora, 1000, 10) == {"weights": 990 * 2 + 10 * 4,
                                             "gradients": 40, "optimizer": 80}
    eight = lora.with_(optimizer="adamw-8bit", precision="bf16")
    assert P.model_state(eight, 1000, 10) == {"weights": 990 * 2 + 10 * 2,
                                              "gradients": 20, "optimizer": 20}
    full = P.PictureInputs(VISION, tuning="full", precision="mixed")
    assert P.model_state(full, 1000, 1000) == {"weights": 6000, "gradients": 4000,
                                               "optimizer": 8000}
    sgd = full.with_(optimizer="sgd-momentum")  # one fp32 momentum buffer a parameter
    assert P.model_state(sgd, 1000, 1000)["optimizer"] == 4000
    # QLoRA: 800 linear weights in NF4 (4.127 bits), the 190 others fp32, fp32 adapters,
    # in any precision (prepare_model_for_kbit_training leaves no 16-bit parameter)
    for precision in ("mixed", "bf16"):
        qlora = lora.with_(tuning="qlora", precision=precision)
        assert P.model_state(qlora, 1000, 10, 800) == {
            "weights": 800 * 4.127 / 8 + 190 * 4 + 10 * 4, "gradients": 40,
            "optimizer": 80}
        assert qlora.measure_key()[0] == "4bit-mixed"
    assert lora.with_(tuning="qlora", precision="fp32").measure_key()[0] == "4bit-fp32"


def test_the_peak_adds_every_piece_and_the_allowances() -> None:
    p = P.PictureInputs(VISION, resolution=32, tuning="full", precision="fp32")
    m = _measured()
    r = P.row(p, m, P.blocks(m, 1, 32), "every-layer")
    pieces = 4000 + 4000 + 8000 + 3 * 32 * 32 * 4 + (160 + 80) + 400
    assert r.kept == 240 and r.rebuilt == 400
    assert r.peak == pieces + WORKSPACE_BYTES + FRAGMENTATION * pieces


def test_the_recommendation_checkpoints_the_fewest_blocks_that_fit() -> None:
    m = _measured(blocks=8)
    base = P.PictureInputs(VISION, resolution=32, tuning="full", precision="fp32",
                           headroom=0.0)
    b = P.blocks(m, 1, 32)
    everything = P.row(base, m, b, "every-layer").peak
    nothing = P.row(base, m, b, "none").peak
    assert P.recommend(P.candidates(base.with_(gpu_bytes=int(nothing) + 1), m, b)
                       ).strategy == "none"
    # checkpointing a block saves 360 bytes, its rebuild costs 400 once, outside 40 more
    tight = base.with_(gpu_bytes=int(nothing) - 700)
    rows = P.candidates(tight, m, b)
    best = P.recommend(rows)
    assert best.fits and 0 < best.checkpointed < 8
    assert not any(r.fits for r in rows if r.checkpointed < best.checkpointed)
    short = base.with_(gpu_bytes=int(everything) - 1)
    best = P.recommend(P.candidates(short, m, b))
    assert best.strategy == "every-layer" and not best.fits
    assert [r.strategy for r in P.table(P.candidates(short, m, b), best)] == [
        "none", "first-k", "every-n", "every-layer"]


def _unequal() -> dict:
    """Six blocks of three types whose bytes and FLOPs differ, not in proportion; FLOPs
    counted per block slot as planner.picture_measure.count_flops writes them."""
    types = ["wide", "a", "b", "a", "b", "wide"]
    per = {"first": (300, 30), "a": (100, 10), "b": (60, 25), "wide": (250, 20)}
    plain = ClassFit(tuple(_term(s, per[s][0]) for s in per) + (_term("outside", 10),))
    ckpt = ClassFit(tuple(_term(s, per[s][0] // 10) for s in per) + (_term("outside", 20),))
    flops = {"first": 7, "a": 9, "b": 2, "wide": 5}  # per unit of t

    def poly(c: int) -> list[str]:
        return ["0", str(c), "0"]

    return {"unit": 16, "block_types": types, "block_names": [f"b.{i}" for i in range(6)],
            "params": 1000, "trainable": 10,
            "fits": {"none": fit_to_json(plain), "every-layer": fit_to_json(ckpt)},
            "flops": {"forward": {s: poly(c) for s, c in flops.items()},
                      "outside_forward": poly(3), "reduced_forward": poly(1),
                      "reduced_backward": poly(2)}}


def test_the_optimal_placement_is_the_least_recompute_of_any_blocks_that_fit() -> None:
    m = _unequal()
    base = P.PictureInputs(VISION, resolution=32, tuning="full", precision="fp32",
                           headroom=0.0)
    b = P.blocks(m, 1, 32)  # t = 4
    assert b.flops == (28.0, 36.0, 8.0, 36.0, 8.0, 20.0)
    assert b.step_flops == (12 + sum(b.flops)) * 3  # backward: twice the forward
    low, high = P.row(base, m, b, "every-layer").peak, P.row(base, m, b, "none").peak
    subsets = [c for k in range(7) for c in combinations(range(6), k)]
    beaten = 0
    for gpu in range(int(low) + 1, int(high), 40):
        p = base.with_(gpu_bytes=gpu)
        rows = P.candidates(p, m, b)
        best = P.recommend(rows)
        brute = min(sum(b.flops[i] for i in c) for c in subsets
                    if P.row(p, m, b, "optimal", picked=c).fits)
        assert best.fits and best.recompute <= brute + 0.01 * b.step_flops
        assert best.recompute == brute  # exact: the dynamic program over the chain
        first = P.recommend(rows, "first-k")
        assert first.strategy in ("none", "first-k") or first.strategy == "every-layer"
        assert first.recompute >= best.recompute
        beaten += first.recompute > best.recompute
    assert beaten > 10  # unequal blocks: the first ones are rarely the ones to rebuild
    assert P.recommend(P.candidates(base.with_(gpu_bytes=int(low) - 1), m, b),
                       "every").strategy == "every-layer"
