import pytest
import torch

from demos.measure import compare
from memory import theory
from memory.config import ConfigError, ModelConfig
from memory.strategies import StrategySpec, parse_strategies, parse_strategy

TINY = ModelConfig(layers=4, hidden=64, heads=4, seq_len=32, batch=2, vocab=128)
ALL_CPU = ["none", "every-layer", "every-k:2", "sqrt", "selective:save-matmuls",
           "selective:save-attention", "selective:save-all-but-attention",
           "budget:greedy:700KiB", "budget:dp:700KiB"]


def _specs(texts: list[str]) -> list[StrategySpec]:
    return [parse_strategy(text) for text in texts]


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_every_strategy_gives_the_loss_and_gradients_of_none(dropout):
    comp = compare(TINY.replace(dropout=dropout), _specs(ALL_CPU), device="cpu",
                   time_steps=False)
    none = comp.result("none")
    for r in comp.results:
        assert r.fits, r.error
        assert r.loss == pytest.approx(none.loss, abs=1e-6), r.strategy
        assert r.max_grad_diff is not None and r.max_grad_diff <= 1e-6, r.strategy
    # same ops on the same data in the same order: bitwise equal on the CPU
    assert comp.result("every-layer").bitwise_equal


def test_reference_gradients_exist_without_none_in_the_list():
    comp = compare(TINY, parse_strategies("every-layer"), device="cpu", time_steps=False)
    assert comp.results[0].max_grad_diff is not None
    assert comp.results[0].max_grad_diff <= 1e-6


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_shown_as_it_comes_the_memory_comes_before_the_reference_step(dropout, monkeypatch):
    """A page sees the memory after the tracked steps alone; the plain reference step runs
    after it, and every strategy's gradients are checked on its first timed step: the
    same agreement as a compare that checks them on the tracked step."""
    from demos import measure

    events: list[str] = []
    reference = measure._reference
    monkeypatch.setattr(measure, "_reference",
                        lambda step: events.append("reference") or reference(step))
    config = TINY.replace(dropout=dropout)
    strategies = parse_strategies("every-layer,sqrt,selective:save-matmuls")
    shown = []
    comp = compare(config, strategies, device="cpu", repeats=2,
                   on_partial=lambda c: shown.append([r.max_grad_diff for r in c.results])
                   or events.append("shown"))
    assert events[:2] == ["shown", "reference"]
    assert shown[0] == [None] * 3 and None not in shown[-1]
    at_once = compare(config, strategies, device="cpu", time_steps=False)
    for progressive, direct in zip(comp.results, at_once.results, strict=True):
        assert progressive.bitwise_equal == direct.bitwise_equal
        assert progressive.max_grad_diff == pytest.approx(direct.max_grad_diff, abs=1e-9)
    assert comp.result("every-layer").bitwise_equal


SHAPES = [
    ModelConfig(layers=3, hidden=64, heads=4, seq_len=32, batch=2, vocab=128),
    ModelConfig(layers=2, hidden=96, heads=3, seq_len=24, batch=3, vocab=200),
    ModelConfig(layers=5, hidden=32, heads=2, seq_len=64, batch=1, vocab=64, dropout=0.1),
    ModelConfig(layers=2, hidden=64, heads=2, seq_len=16, batch=2, vocab=96, dtype="bfloat16"),
]


@pytest.mark.parametrize("cfg", SHAPES, ids=lambda c: f"L{c.layers}h{c.hidden}s{c.seq_len}"
                                                      f"b{c.batch}{c.dtype[0]}{c.dropout}")
def test_measured_activation_bytes_match_the_prediction_within_1_percent(cfg):
    names = ["none", "every-layer", "every-k:2", "sqrt", "selective:save-matmuls",
             "selective:save-attention", "selective:save-all-but-attention"]
    comp = compare(cfg, _specs(names), device="cpu", time_steps=False)
    for r in comp.results:
        assert r.fits, r.error
        assert r.activation_bytes == pytest.approx(r.predicted_activation_bytes, rel=0.01), \
            r.strategy
        assert r.loss_held_bytes == theory.loss_held_bytes(cfg)


def test_plain_block_holds_the_measured_formula():
    cfg = ModelConfig(layers=1, hidden=64, heads=4, seq_len=32, batch=2, vocab=128)
    s, b, h, a = cfg.seq_len, cfg.batch, cfg.hidden, cfg.heads
    assert theory.predicted_block_bytes(cfg) == 64 * s * b * h + 4 * (4 * b * s + a * b * s)
    one = compare(cfg, parse_strategies("none,every-layer"), device="cpu", time_steps=False)
    diff = one.result("none").activation_bytes - one.result("every-layer").activation_bytes
    # the block's internals: everything it keeps but its input
    assert diff == theory.predicted_block_bytes(cfg) - s * b * h * 4


def test_strategies_order_in_memory_as_theory_says():
    cfg = ModelConfig(layers=8, hidden=64, heads=4, seq_len=64, batch=2, vocab=64)
    names = ["none", "every-layer", "sqrt", "selective:save-matmuls",
             "selective:save-attention", "selective:save-all-but-attention"]
    comp = compare(cfg, _specs(names), device="cpu", time_steps=False)
    act = {r.strategy: r.activation_bytes for r in comp.results}
    pred = {r.strategy: r.predicted_activation_bytes for r in comp.results}
    assert sorted(act, key=act.get) == sorted(pred, key=pred.get)
    assert act["every-layer"] < act["selective:save-attention"] < act[
        "selective:save-matmuls"] < act["none"] < act["selective:save-all-but-attention"]
    peak = {r.strategy: r.peak_bytes for r in comp.results}
    # small vocabulary: the layers, not the loss, set the peak; every-layer rebuilds one
    # layer at a time, sqrt rebuilds a segment of 3 (Chen's sqrt(N) is not optimal here)
    assert peak["every-layer"] < peak["sqrt"] < peak["none"]
    ppeak = {r.strategy: r.predicted_peak_bytes for r in comp.results}
    assert ppeak["every-layer"] < ppeak["sqrt"] < ppeak["none"]


def test_breakdown_and_timeline_mark_layers_recompute_and_loss():
    comp = compare(TINY, parse_strategies("none,every-layer"), device="cpu", time_steps=False,
                   timeline=True)
    none, ckpt = comp.results
    for r in comp.results:
        assert set(r.breakdown) == {"parameters", "gradients", "activations", "logits",
                                    "temporaries"}
        assert sum(v for k, v in r.breakdown.items() if k != "parameters") == r.peak_bytes
        assert r.breakdown["parameters"] == theory.parameter_bytes(TINY)
        assert max(p.live_bytes for p in r.timeline) == r.peak_bytes
    phases = {p.phase for p in ckpt.timeline}
    assert {"forward", "recompute", "backward", "loss"} <= phases
    assert "recompute" not in {p.phase for p in none.timeline}
    assert {p.layer for p in ckpt.timeline if p.phase == "recompute"} == set(range(4))
    back = [p.layer for p in ckpt.timeline if p.phase == "backward" and p.layer is not None]
    assert back[0] == 3 and back[-1] == 0  # backward runs last layer first


def test_guard_refuses_an_oversize_config_with_a_clear_message():
    huge = ModelConfig(layers=96, hidden=8192, heads=64, seq_len=8192, batch=512, vocab=262144)
    comp = compare(huge, parse_strategies("none,every-layer"), device="cpu", time_steps=False)
    for r in comp.results:
        assert not r.fits and r.peak_bytes is None
        assert "over the limit of" in r.error and "available CPU memory" in r.error
    small = compare(TINY, parse_strategies("none"), device="cpu", time_steps=False,
                    limit_bytes=10_000)
    assert not small.results[0].fits
    error = small.results[0].error
    assert "9.8 KiB" in error and "limit set for this run" in error


def test_when_none_is_over_the_limit_the_others_still_run_without_a_reference():
    cfg = ModelConfig(layers=4, hidden=64, heads=4, seq_len=64, batch=2, vocab=64)
    every = parse_strategy("every-layer")
    limit = theory.parameter_bytes(cfg) + theory.predicted_peak_bytes(cfg, every) + 1
    assert theory.predicted_peak_bytes(cfg, parse_strategy("none")) > limit
    comp = compare(cfg, parse_strategies("none,every-layer"), device="cpu", time_steps=False,
                   limit_bytes=limit)
    none, every = comp.results
    assert not none.fits and "over the limit" in none.error
    assert every.fits and every.max_grad_diff is None
    assert every.peak_bytes <= limit - theory.parameter_bytes(cfg)


def test_budget_too_small_and_cuda_only_do_not_fit_but_do_not_raise():
    comp = compare(TINY, parse_strategies("budget:dp:1KiB,offload"), device="cpu", time_steps=False)
    assert "too small" in comp.results[0].error
    if not torch.cuda.is_available():
        assert "needs a CUDA GPU" in comp.results[1].error


def test_invalid_config_raises_config_error():
    with pytest.raises(ConfigError, match="heads"):
        compare(TINY.replace(heads=5), parse_strategies("none"), device="cpu")


def test_times_are_medians_of_interleaved_untracked_runs():
    comp = compare(TINY.replace(layers=2), parse_strategies("none,every-layer"), device="cpu",
                   repeats=3)
    for r in comp.results:
        assert len(r.step_seconds_runs) == 3
        assert r.step_seconds == sorted(r.step_seconds_runs)[1]
    frame = comp.to_frame()
    assert list(frame["strategy"]) == ["none", "every-layer"]
    assert frame.loc[0, "time_vs_none"] == 1.0
    assert frame.loc[0, "cpu_vs_none"] == 1.0
    assert frame.loc[1, "cpu_vs_none"] == pytest.approx(
        comp.results[1].cpu_seconds / comp.results[0].cpu_seconds)


# ---------------------------------------------------------------- the demos' defaults


def test_at_the_cpu_default_the_strategies_visibly_differ():
    """At the old default (vocabulary 8,192) every checkpointing strategy peaked at the same
    40.5 MiB, set by what checkpointing does not touch: the demos showed no difference."""
    from memory.config import demo_default
    from memory.theory import peak_cause

    comp = compare(demo_default("cpu"), parse_strategies("none,every-layer,every-k:2,sqrt"),
                   device="cpu", time_steps=False)
    peaks = [r.peak_bytes for r in comp.results]
    assert len(set(peaks)) == len(peaks), peaks
    none, every = comp.result("none"), comp.result("every-layer")
    assert every.peak_bytes < 0.5 * none.peak_bytes  # checkpointing halves the peak or more
    assert peak_cause(none).part == "activations"  # the part checkpointing lowers
    assert sorted(peaks[1:]) == peaks[1:]  # longer segments, higher peak


def test_gpu_default_lets_activations_outweigh_the_logits():
    """On a GPU the default's layers (b·s·h per layer) outweigh the loss's logits (b·s·V):
    one layer rebuilt holds more than the logits, so the strategies' peaks differ."""
    from memory.config import demo_default

    cfg = demo_default("cuda")
    assert theory.predicted_block_bytes(cfg, "cuda") > theory.logits_bytes(cfg) * 1.5
    peaks = {s: theory.predicted_peak_bytes(cfg, s, "cuda")
             for s in parse_strategies("none,every-layer,every-k:2,sqrt")}
    assert len(set(peaks.values())) == len(peaks), peaks


def test_the_result_records_where_its_peak_was():
    comp = compare(TINY, parse_strategies("none,every-layer"), device="cpu", time_steps=False)
    for r in comp.results:
        assert r.peak_phase in ("forward", "loss", "recompute", "backward") and r.peak_op


def test_page_timing_has_enough_interleaved_runs_for_a_spread():
    from demos.measure import MAX_REPEATS_FACTOR, PAGE_REPEATS

    comp = compare(TINY, parse_strategies("none,every-layer"), device="cpu",
                   repeats=PAGE_REPEATS["cpu"])
    runs = {len(r.step_seconds_runs) for r in comp.results}
    assert len(runs) == 1  # interleaved: every strategy the same number of runs
    assert PAGE_REPEATS["cpu"] <= runs.pop() <= PAGE_REPEATS["cpu"] * MAX_REPEATS_FACTOR
    assert all(len(r.cpu_seconds_runs) == len(r.step_seconds_runs) for r in comp.results)


def test_the_run_estimates_know_the_timing_rules():
    from demos import fit
    from serving import jobs

    assert jobs.FIT_REPEATS == fit.FIT_REPEATS


def test_timing_goes_on_while_the_spread_is_wide_until_the_cap(monkeypatch):
    """Runs that alternate 1 s and 2 s never narrow: timing stops at 2x the asked runs;
    steady runs stop at the asked number; a time cap of 0 stops at once after them."""
    from demos import measure

    clock = iter(range(10**6))
    monkeypatch.setattr(measure.Step, "timed_with_cpu",
                        lambda self, spec, plan: (1.0 + next(clock) % 2, 1.0))
    comp = compare(TINY, parse_strategies("none"), device="cpu", repeats=5)
    assert len(comp.results[0].step_seconds_runs) == 10
    assert comp.busy()  # a wide spread is not representative
    comp = compare(TINY, parse_strategies("none"), device="cpu", repeats=5, time_cap_s=0)
    assert len(comp.results[0].step_seconds_runs) == 5
    monkeypatch.setattr(measure.Step, "timed_with_cpu", lambda self, spec, plan: (1.0, 0.9))
    comp = compare(TINY, parse_strategies("none"), device="cpu", repeats=5)
    assert len(comp.results[0].step_seconds_runs) == 5 and not comp.busy()


def test_what_fits_times_its_confirmed_size_with_repeats(monkeypatch):
    """Fast steps: three timed runs at the confirmed size, wall and CPU time, and the
    step's FLOPs counted; a size over the budget is not timed."""
    from demos import measure
    from demos.fit import FIT_REPEATS, largest_fitting

    monkeypatch.setattr(measure.Step, "timed_with_cpu", lambda self, spec, plan: (0.01, 0.01))
    found = largest_fitting(TINY, parse_strategy("none"), "batch", 4 * 2**20, device="cpu")
    assert found.value_confirmed
    assert len(found.step_seconds_runs) == len(found.cpu_seconds_runs) == FIT_REPEATS
    assert found.tokens_per_second == pytest.approx(
        found.value_confirmed * TINY.seq_len / 0.01)
    assert found.flops_counted == pytest.approx(found.flops_predicted, rel=0.01)


def test_a_search_can_skip_the_plain_reference_step(monkeypatch) -> None:
    """What fits shows no gradient agreement: its confirmation runs no plain step (at a
    batch that fits only checkpointed, that step held several budgets)."""
    import demos.measure as measure

    plain_steps = []
    original = measure._reference
    monkeypatch.setattr(measure, "_reference",
                        lambda step: plain_steps.append(step) or original(step))
    checked = compare(TINY, parse_strategies("every-layer"), repeats=1)
    assert len(plain_steps) == 1 and checked.results[0].max_grad_diff is not None
    skipped = compare(TINY, parse_strategies("every-layer"), repeats=1, check_gradients=False)
    assert len(plain_steps) == 1 and skipped.results[0].max_grad_diff is None
    assert skipped.results[0].peak_bytes == checked.results[0].peak_bytes
    from demos.fit import largest_fitting

    largest_fitting(TINY, parse_strategy("every-layer"), "batch", 4 * 2**20, device="cpu",
                    repeats=1)
    assert len(plain_steps) == 1  # the fit's confirmation ran none


def test_the_timing_part_warms_with_one_untimed_step_on_a_gpu_only(monkeypatch):
    """Measured apart from its memory (a model of its own), the timing warms a GPU with one
    step, not a round (every strategy runs the same operators on the same shapes); on a
    CPU the memory part in the same process ran those shapes, and no step is untimed."""
    from demos import measure

    steps = []
    original = measure.Step.timed_with_cpu

    def counted(self, spec, plan):
        steps.append(spec.name)
        return original(self, spec, plan)

    monkeypatch.setattr(measure.Step, "timed_with_cpu", counted)
    specs = parse_strategies("none,every-layer,sqrt")
    comp = compare(TINY, specs, device="cpu", repeats=3, memory=False)
    assert all(len(r.step_seconds_runs) == 3 for r in comp.results)
    assert len(steps) == 3 * 3
    steps.clear()
    model = measure.build_model(TINY, "cpu")
    step = measure.Step(TINY, model, *measure.make_batch(TINY, 0, "cpu"), torch.device("cpu"))
    prepared = [measure._prepare(TINY, spec, comp.device, None, None,
                                 theory.parameter_bytes(TINY)) for spec in specs]
    results = [result for result, _ in prepared]
    plans = {i: plan for i, (_, plan) in enumerate(prepared)}
    measure._time(step, specs, plans, results, 3, warm=True)
    assert len(steps) == 1 + 3 * 3 and steps[0] == "none"
    assert all(len(r.step_seconds_runs) == 3 for r in results)
