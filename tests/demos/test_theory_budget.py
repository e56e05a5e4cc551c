import pytest

from demos.measure import compare
from memory import theory, worked_examples
from memory.config import ModelConfig
from memory.placement import BudgetTooSmall, dp_plan, greedy_plan, plan_need
from memory.segments import Segment
from memory.strategies import parse_strategy
from tests.demos.test_placement import every_plan


def test_korthikanti_and_seed_figures():
    assert worked_examples.korthikanti_layer_bytes(2, 1024, 2048, 16) == 34 * 2 * 1024 * 2048
    full = worked_examples.korthikanti_layer_bytes(1, 10, 8, 2, full=True)
    assert full == 34 * 10 * 8 + 5 * 2 * 10 * 10
    seed = worked_examples.seed_example()
    assert seed["all_kept_bytes"] == pytest.approx(4.0e9, rel=0.01)
    assert seed["checkpoint_inputs_bytes"] == pytest.approx(0.235e9, rel=0.01)
    assert seed["one_layer_rebuilt_bytes"] == pytest.approx(0.143e9, rel=0.01)
    assert seed["logits_bytes"] == pytest.approx(2.03e9, rel=0.01)


def test_recompute_overhead_is_bounded_by_four_thirds():
    cfg = ModelConfig()
    assert theory.step_flops(cfg, parse_strategy("none"))["overhead"] == 1.0
    every = theory.step_flops(cfg, parse_strategy("every-layer"))["overhead"]
    assert 1.0 < every < 4 / 3  # forward + backward (2x forward) + one more forward
    assert theory.step_flops(cfg, parse_strategy("selective"))["overhead"] < every


def test_save_attention_reruns_every_matmul_backward_needs():
    """Saving only attention's output, backward needs q, k, v (QKV), the residual after
    attention (proj) and the GELU output (fc) again: 8h² of a block's 12h² matmul weights.
    Only the output projection's result is never needed, and attention itself is saved."""
    cfg = ModelConfig(layers=3, hidden=256, heads=4, seq_len=64, batch=2)
    b, s, h = cfg.batch, cfg.seq_len, cfg.hidden
    flops = theory.step_flops(cfg, parse_strategy("selective:save-attention"))
    assert flops["recompute"] == pytest.approx(cfg.layers * 2 * b * s * 8 * h * h)
    matmuls = theory.step_flops(cfg, parse_strategy("selective:save-matmuls"))["recompute"]
    assert matmuls == pytest.approx(cfg.layers * 2 * b * s * s * h)  # attention only
    assert flops["recompute"] > matmuls


def test_cpu_estimate_follows_the_step_flops():
    cfg = ModelConfig(layers=2, hidden=64, heads=4, seq_len=32, batch=2, vocab=128)
    one = theory.cpu_seconds([(cfg, parse_strategy("every-layer"), 1)])
    assert one == pytest.approx(theory.step_flops(cfg, parse_strategy("every-layer"))["total"]
                                / theory.CPU_FLOPS_PER_SECOND)
    assert theory.cpu_seconds([(cfg, parse_strategy("every-layer"), 3)]) == pytest.approx(3 * one)
    assert theory.cpu_seconds([(cfg.replace(heads=3), parse_strategy("none"), 1)]) >= 0


def test_explanation_names_dtype_dropout_and_attention():
    text = theory.explain_differences(ModelConfig())
    for word in ("float32", "dropout", "fused attention", "34"):
        assert word.lower() in text.lower()


def test_parameter_count_matches_the_model():
    from demos.model import build_model

    for cfg in (ModelConfig(layers=2, hidden=64, heads=4, seq_len=32, vocab=100),
                ModelConfig(layers=1, hidden=32, heads=1, seq_len=8, vocab=16)):
        assert build_model(cfg).param_bytes() == theory.parameter_bytes(cfg)


SIZES = [16, 16, 16, 16, 16, 16, 16, 16]
INPUTS = [1] * 8


@pytest.mark.parametrize("budget", [30, 40, 60, 90, 128])
def test_budget_plans_fit_and_dp_recomputes_no_more_than_greedy(budget):
    greedy = greedy_plan(SIZES, INPUTS, budget)
    dp = dp_plan(SIZES, INPUTS, budget)
    assert plan_need(greedy, SIZES, INPUTS) <= budget
    assert plan_need(dp, SIZES, INPUTS) <= budget
    for plan in (greedy, dp):  # the plans cover every layer once, in order
        assert [i for s in plan for i in range(s.start, s.stop)] == list(range(8))

    def rebuilt(plan):
        return sum(s.size for s in plan if s.mode == "checkpoint")

    assert rebuilt(dp) <= rebuilt(greedy)


def test_dp_is_optimal_against_brute_force_on_uneven_layers():
    import itertools

    from demos.model import Segment

    full, inputs, budget = [5, 9, 3, 12, 7], [1, 2, 1, 2, 1], 26
    best = None
    for cuts in itertools.product([0, 1], repeat=4):  # segment boundaries
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [5]
        segs = list(zip(bounds, bounds[1:], strict=False))
        for modes in itertools.product(["keep", "checkpoint"], repeat=len(segs)):
            plan = [Segment(a, b, m) for (a, b), m in zip(segs, modes, strict=True)]
            if plan_need(plan, full, inputs) <= budget:
                cost = sum(s.size for s in plan if s.mode == "checkpoint")
                best = cost if best is None else min(best, cost)
    dp = dp_plan(full, inputs, budget)
    assert sum(s.size for s in dp if s.mode == "checkpoint") == best


def test_budget_too_small_says_what_would_fit():
    with pytest.raises(BudgetTooSmall, match="needs"):
        greedy_plan(SIZES, INPUTS, 10)
    with pytest.raises(BudgetTooSmall):
        dp_plan(SIZES, INPUTS, 10)


def test_predicted_peak_is_close_to_the_measured_peak_on_cpu():
    for cfg in (ModelConfig(layers=6, hidden=64, heads=4, seq_len=64, batch=2, vocab=64),
                ModelConfig(layers=3, hidden=64, heads=4, seq_len=32, batch=2, vocab=2048,
                            dropout=0.1)):
        names = ["none", "every-layer", "every-k:2", "selective:save-matmuls",
                 "selective:save-attention", "budget:dp:1MiB"]
        specs = [parse_strategy(name) for name in names]
        for r in compare(cfg, specs, device="cpu", time_steps=False).results:
            assert r.peak_bytes == pytest.approx(r.predicted_peak_bytes, rel=0.01), r.strategy


def test_dp_scales_to_the_largest_model():
    import time

    full, inputs = [16] * 96, [1] * 96
    start = time.process_time()  # CPU time: the same on a busy machine (0.07 s here)
    plan = dp_plan(full, inputs, 700)
    assert time.process_time() - start < 5
    assert plan_need(plan, full, inputs) <= 700
    assert sum(s.size for s in plan if s.mode == "keep") > 0  # keeps what fits


def _recompute(plan, cost) -> int:
    return sum(cost[i] for s in plan if s.mode == "checkpoint" for i in range(s.start, s.stop))


@pytest.mark.parametrize("seed", range(12))
def test_dp_gives_the_least_recompute_of_every_plan_on_unequal_chains(seed):
    """Unequal layers (a wide first block, a large head at the end, uneven FLOPs): the
    plan the dynamic program returns fits and costs no more recompute than any of the
    3^n-odd plans of the chain, found by brute force."""
    import random

    rng = random.Random(seed)
    n = rng.randint(3, 7)
    full = [rng.randint(1, 40) for _ in range(n)]
    full[0] *= rng.choice([1, 4])  # sometimes a wide first block
    inputs = [rng.randint(1, max(1, f // 3)) for f in full]
    cost = [rng.randint(1, 50) * f for f in full]  # FLOPs roughly with the bytes, not equal
    least = plan_need([Segment(i, i + 1, "checkpoint") for i in range(n)], full, inputs)
    budget = rng.randint(least, sum(full))
    best = min(_recompute(plan, cost) for plan in every_plan(n)
               if plan_need(plan, full, inputs) <= budget)
    dp = dp_plan(full, inputs, budget, cost)
    assert plan_need(dp, full, inputs) <= budget
    assert [i for s in dp for i in range(s.start, s.stop)] == list(range(n))
    assert _recompute(dp, cost) == best


def test_dp_weighs_flops_not_layers():
    """A wide layer keeps the most and costs the most to rebuild: the fewest rebuilt layers
    is that one layer (100 units of recompute), the least recompute is two narrow layers
    (2 units), and the dynamic program given the FLOPs picks that."""
    full, inputs, cost, budget = [2, 6, 2, 2], [1, 1, 1, 1], [1, 100, 1, 1], 10
    by_layers = dp_plan(full, inputs, budget)
    by_flops = dp_plan(full, inputs, budget, cost)
    assert [(s.start, s.stop) for s in by_layers if s.mode == "checkpoint"] == [(1, 2)]
    assert _recompute(by_layers, cost) == 100
    assert [(s.start, s.stop) for s in by_flops if s.mode == "checkpoint"] == [(0, 1), (2, 3)]
    assert _recompute(by_flops, cost) == 2
    assert plan_need(by_flops, full, inputs) <= budget
