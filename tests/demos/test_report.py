"""reports (report, timing, compare_table, peak_notes, fits_and_loss_tables): the
tables and strings the demo pages show, from plain records."""

from __future__ import annotations

import ast
import statistics
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from memory.config import ModelConfig
from memory.strategies import StrategySpec, parse_strategy
from reports.compare_table import cost_table, gradient_badge, results_table, timing_note
from reports.fits_and_loss_tables import fits_table, loss_differences, loss_table
from reports.peak_notes import peak_sentence, shared_peak_notes
from reports.report import baseline_and_best, config_slug, csv_frame, korthikanti
from reports.timing import (
    counter_misses,
    cpu_spread,
    overhead_note,
    time_spread,
    time_text,
    time_verdict,
    wall_cpu_note,
)

DEMOS = Path(__file__).resolve().parents[2] / "demos"
TIME = "Step time (vs baseline)"
THROUGHPUT = "Tokens / s · one step: wall, CPU · compute counted (predicted)"


def _result(strategy: str, peak: int, seconds: float, diff: float | None, equal: bool | None,
            fits: bool = True, runs: list[float] | None = None, cpu: list[float] | None = None,
            flops: tuple[int, float] | None = None) -> SimpleNamespace:
    return SimpleNamespace(strategy=strategy, spec=parse_strategy(strategy), label=strategy,
                           fits=fits, peak_bytes=peak,
                           activation_bytes=peak // 2, predicted_activation_bytes=peak // 2,
                           step_seconds=seconds,
                           step_seconds_runs=runs if runs is not None else [seconds] * 3,
                           cpu_seconds_runs=cpu or [], threads=1,
                           cpu_seconds=statistics.median(cpu) if cpu else None,
                           flops_counted=flops[0] if flops else None,
                           flops_predicted=flops[1] if flops else None,
                           max_grad_diff=diff, bitwise_equal=equal, error="over the limit")


def test_results_table_reads_against_none() -> None:
    results = [_result("none", 100 * 2**20, 0.2, None, None, cpu=[0.2] * 3),
               _result("every-layer", 40 * 2**20, 0.25, 0.0, True, cpu=[0.25] * 3),
               _result("sqrt", 60 * 2**20, 0.24, 3e-7, False, cpu=[0.24] * 3),
               _result("budget:dp:40%", 0, 0.0, None, None, fits=False)]
    table = results_table(results)
    assert list(table.columns) == ["Strategy", "Peak memory (vs baseline)",
                                   "Activations held (predicted)", TIME,
                                   "Same gradients"]  # five: a phone shows them all
    assert list(table[TIME]) == [
        "200 ms (200–200), CPU 200 ms (200–200)",
        "250 ms (250–250), CPU 250 ms (250–250), 1.25× slower by CPU time",
        "240 ms (240–240), CPU 240 ms (240–240), 1.20× slower by CPU time", "–"]
    assert list(table["Peak memory (vs baseline)"])[:3] == ["100.0 MiB", "40.0 MiB (40%)",
                                                        "60.0 MiB (60%)"]
    assert list(table["Same gradients"]) == ["baseline", "✓ bitwise equal (max diff 0)",
                                             "✓ max diff 3.0e-07", "–"]
    assert table["Peak memory (vs baseline)"].iloc[3] == "does not fit"
    assert table["Strategy"].iloc[3] == "budget (dp, 40%)"
    assert [gradient_badge(r) for r in results[1:3]] == ["✓ identical", "✓ 3e-07"]
    assert gradient_badge(_result("sqrt", 1, 0.1, 0.5, False)) == "✗ 5e-01"
    assert "median of 3 timed steps" in timing_note(results)
    assert "read from CPU time" in timing_note(results)
    assert "noise" not in timing_note(results)


def test_a_difference_within_the_spread_reads_within_noise_never_as_a_gain() -> None:
    """Every-layer once measured 16% faster than none (2 steps) was shown in green."""
    none = _result("none", 100, 0.20, None, None, cpu=[0.17, 0.19, 0.20, 0.22, 0.26])
    faster = _result("every-layer", 40, 0.17, 0.0, True, cpu=[0.15, 0.16, 0.17, 0.21, 0.22])
    # 0.17 lies outside none's range (0.19-0.22): faster, which is noise, never a gain
    assert time_verdict(faster, none).id == "faster-noise"
    assert results_table([none, faster])[TIME].iloc[1].endswith(
        ", CPU time measured lower: timing noise")
    assert "every layer: CPU time measured lower than without checkpointing" in timing_note(
        [none, faster])
    clear = _result("every-layer", 40, 0.30, 0.0, True, cpu=[0.28, 0.29, 0.30, 0.31, 0.32])
    verdict = time_verdict(clear, none)
    assert (verdict.id, verdict.measure) == ("slower", "cpu")
    assert verdict.ratio == pytest.approx(1.5)
    odd = _result("sqrt", 40, 0.10, 0.0, True, cpu=[0.09, 0.10, 0.10, 0.10, 0.11])
    assert time_verdict(odd, none).id == "faster-noise"  # worded as noise, not a gain
    assert results_table([none, odd])[TIME].iloc[1].endswith(
        ", CPU time measured lower: timing noise")
    spread = cpu_spread(none)
    assert (spread.median, spread.low, spread.high) == pytest.approx((0.20, 0.19, 0.22))
    walls = _result("none", 100, 0.20, None, None, runs=[0.17, 0.19, 0.20, 0.22, 0.26])
    assert time_text(walls) == "200 ms (190–220)"


def test_within_noise_only_when_each_median_lies_in_the_others_range() -> None:
    """The home page read "224 ms (207–258), within noise of none (170 ms)": the ranges
    touched, but 170 ms lies outside 207–258. Overlapping ranges are not enough."""
    none = _result("none", 100, 0.170, None, None, cpu=[0.150, 0.160, 0.170, 0.210, 0.230])
    every = _result("every-layer", 40, 0.224, 0.0, True,
                    cpu=[0.200, 0.207, 0.224, 0.258, 0.270])
    assert cpu_spread(none).high >= cpu_spread(every).low  # the ranges overlap
    verdict = time_verdict(every, none)
    assert verdict.id == "slower" and verdict.ratio == pytest.approx(0.224 / 0.170)
    assert "within noise" not in results_table([none, every])[TIME].iloc[1]
    assert "within noise" not in timing_note([none, every])
    # none's median inside every's range, but every's median outside none's: still slower
    wide = _result("every-layer", 40, 0.200, 0.0, True,
                   cpu=[0.100, 0.150, 0.200, 0.250, 0.300])
    narrow = _result("none", 100, 0.160, None, None, cpu=[0.150, 0.155, 0.160, 0.165, 0.170])
    assert time_verdict(wide, narrow).id == "slower"
    # each median inside the other's range: within noise
    close = _result("every-layer", 40, 0.180, 0.0, True,
                    cpu=[0.150, 0.160, 0.180, 0.200, 0.210])
    assert time_verdict(close, none).id == "noise"
    assert "every layer: within noise by CPU time" in timing_note([none, close])


def _busy(strategy: str, wall: list[float], cpu: list[float], flops: int) -> SimpleNamespace:
    return _result(strategy, 100, statistics.median(wall), 0.0, True, runs=wall, cpu=cpu,
                   flops=(flops, float(flops)))


def test_a_busy_server_inflates_wall_time_but_the_verdict_follows_cpu_time() -> None:
    """On a busy server (2 cores, load up to 11) the wall-time verdicts contradicted the
    CPU time and FLOPs beside them: every layer "within noise" at +36% CPU, "1.54× slower"
    at equal CPU time. Fed such runs, the verdict follows CPU time and says so."""
    # other learners' runs landed on none's and every-layer's steps: their wall times
    # scatter over 2-3× the compute, while CPU time (what this process computed) does not
    none = _busy("none", [0.31, 0.52, 0.44, 0.29, 0.61], [0.200, 0.202, 0.199, 0.201, 0.203],
                 50_000_000_000)
    every = _busy("every-layer", [0.38, 0.35, 0.72, 0.41, 0.50],
                  [0.272, 0.274, 0.270, 0.273, 0.275], 68_000_000_000)
    sqrt = _busy("sqrt", [0.80, 0.95, 0.77, 0.90, 1.10], [0.201, 0.199, 0.202, 0.200, 0.203],
                 50_000_000_000)
    # by wall time every-layer would read "within noise", sqrt "2× slower"
    assert time_spread(none).low <= time_spread(every).median <= time_spread(none).high
    assert time_spread(sqrt).median > 1.8 * time_spread(none).median
    verdict = time_verdict(every, none)
    assert (verdict.id, verdict.measure) == ("slower", "cpu")
    assert verdict.ratio == pytest.approx(0.273 / 0.201)
    assert time_verdict(sqrt, none).id == "noise"
    table = results_table([none, every, sqrt])
    assert table[TIME].iloc[1].endswith("1.36× slower by CPU time")
    assert table[TIME].iloc[2].endswith("within noise by CPU time")
    assert table[TIME].iloc[2].startswith("900 ms (800–950)")  # wall time stays, measured
    assert "1,36× langsamer nach CPU-Zeit" in results_table([none, every], "de").iloc[1, 3]
    # without CPU times (a GPU, whose host only launches and waits): the counted FLOPs
    gpu = time_verdict(every, none, "cuda")
    assert (gpu.id, gpu.measure) == ("more-compute", "flops")
    assert gpu.ratio == pytest.approx(1.36)
    assert time_verdict(sqrt, none, "cuda").id == "same-compute"
    assert "read from the FLOPs" in timing_note([none, every], device_kind="cuda")
    assert results_table([none, every], device_kind="cuda")[TIME].iloc[1].endswith(
        "1.36× the compute (counted FLOPs)")


def test_the_wall_cpu_share_is_of_the_medians_beside_it() -> None:
    """The note once summed every run, so its share did not match the medians shown."""
    none = _result("none", 0.2, 0.2, None, None, runs=[0.2, 0.2, 0.2, 2.0, 2.0],
                   cpu=[0.1, 0.1, 0.1, 0.1, 0.1])
    every = _result("every-layer", 40, 0.3, 0.0, True, runs=[0.3] * 5, cpu=[0.15] * 5)
    # medians: CPU 0.1 + 0.15 over wall 0.2 + 0.3 = 50% (all runs: 0.25 / 0.86 = 29%)
    assert "CPU is 50% of wall time × threads" in wall_cpu_note([none, every], busy=False)


def test_cpu_time_and_counted_compute_stand_beside_the_wall_time() -> None:
    none = _result("none", 100, 0.20, None, None, runs=[0.2] * 5, cpu=[0.1] * 5,
                   flops=(51_540_000_000, 51_540_000_000.0))
    every = _result("every-layer", 40, 0.30, 0.0, True, runs=[0.3] * 5, cpu=[0.15] * 5,
                    flops=(60_130_000_000, 60_130_000_000.0))
    table = results_table([none, every])
    assert table[TIME].iloc[0] == "200 ms (200–200), CPU 100 ms (100–100)"
    assert table[TIME].iloc[1] == ("300 ms (300–300), CPU 150 ms (150–150), "
                                   "1.50× slower by CPU time")
    note = overhead_note([none, every])
    assert "every layer +16.7% (predicted +16.7%)" in note
    assert "course: +33% (+50% with frozen weights)" in note
    assert "early stop" in note
    gap = wall_cpu_note([none, every], busy=True)
    assert "50%" in gap and "read from CPU time" in gap and "measured again" in gap
    assert "measured again" not in wall_cpu_note([none, every], busy=False)
    assert "16,7" in overhead_note([none, every], "de")


def test_selective_counted_as_nothing_says_why_in_its_verdict() -> None:
    """Selective read "+0.0% extra compute" beside lesson 4's +2.7%, explained only in
    small print."""
    none = _busy("none", [0.2] * 3, [0.2] * 3, 50_000_000_000)
    selective = _busy("selective:save-matmuls", [0.21] * 3, [0.21] * 3, 50_000_000_000)
    every = _busy("every-layer", [0.3] * 3, [0.3] * 3, 60_000_000_000)
    from demos.installed_torch import counter_counts_attention

    # on a CPU whose torch counts no fused attention (2.13; 2.15 does)
    assert counter_misses(selective, none) is not counter_counts_attention("cpu")
    assert not counter_misses(selective, none, "cuda")  # on a GPU the kernel is counted
    assert not counter_misses(every, none)
    table = cost_table([none, selective, every], uncounted="the counter skips it")
    why = ": the counter skips it" if counter_misses(selective, none) else ""
    assert list(table.iloc[:, 1]) == ["baseline", "+0.0% (predicted +0.0%)" + why,
                                      "+20.0% (predicted +20.0%)"]
    # the slowest by CPU time with no FLOPs counted: the note says where the time goes
    slowest = _busy("selective:save-matmuls", [0.4] * 3, [0.4] * 3, 50_000_000_000)
    note = timing_note([none, slowest, every])
    assert ("the slowest by CPU time, though torch counted no extra FLOPs" in note) is bool(why)
    assert "the slowest by CPU time" not in timing_note([none, selective, every])


def test_the_overhead_note_states_early_stop_as_torch_applies_it(monkeypatch) -> None:
    """Early stop ends after the last op that saves something (a dropout after the MLP
    makes its last linear rerun), and the CPU's attention count follows the installed
    counter's registry (torch 2.15 registers the CPU kernel, 2.13 does not)."""
    import torch
    from torch.utils import flop_counter

    none = _result("none", 100, 0.20, None, None, runs=[0.2] * 5, cpu=[0.1] * 5,
                   flops=(100, 100.0))
    every = _result("every-layer", 40, 0.30, 0.0, True, runs=[0.3] * 5, cpu=[0.15] * 5,
                    flops=(120, 120.0))
    for code in ("en", "de", "vi"):
        note = overhead_note([none, every], code)
        assert "never rerun" not in note and "nie neu" not in note
    note = overhead_note([none, every])
    assert "after the last op that saves a tensor for backward" in note
    assert "a dropout after the MLP saves its mask" in note
    aten = torch.ops.aten
    cpu = aten._scaled_dot_product_flash_attention_for_cpu
    registered = cpu in flop_counter.flop_registry
    assert ("has no formula for the CPU's fused attention kernel" in note) is not registered
    registry = flop_counter.flop_registry
    monkeypatch.setitem(registry, cpu, registry[aten._scaled_dot_product_flash_attention])
    monkeypatch.setitem(registry, aten._scaled_dot_product_flash_attention_for_cpu_backward,
                        registry[aten._scaled_dot_product_flash_attention_backward])
    assert "it counts the attention too" in overhead_note([none, every])


def test_peak_sentence_says_where_the_peak_is_and_what_sets_it() -> None:
    """Five strategies once showed the same 40.5 MiB peak and nothing said why."""
    ran = SimpleNamespace(strategy="every-layer", spec=StrategySpec("every-layer"),
                          label="every-layer", fits=True,
                          peak_bytes=40 * 2**20, peak_op="embedding_dense_backward.default",
                          peak_phase="backward", peak_layer=None,
                          breakdown={"parameters": 40 * 2**20, "gradients": 32 * 2**20,
                                     "activations": 0, "logits": 0,
                                     "temporaries": 8 * 2**20})
    text = peak_sentence(ran)
    assert text.startswith("**every layer**: peak 40.0 MiB at the end of backward")
    assert "`embedding_dense_backward`" in text
    assert "the parameters' gradients, 32.0 MiB (80%): checkpointing cannot lower them" in text
    same = SimpleNamespace(**{**vars(ran), "strategy": "sqrt", "spec": StrategySpec("sqrt"),
                              "label": "sqrt"})
    notes = shared_peak_notes([ran, same])
    assert len(notes) == 1
    assert notes[0].startswith("every layer, every √N layers reach the same peak")
    layer = SimpleNamespace(**{**vars(ran), "peak_phase": "backward", "peak_layer": 0,
                               "breakdown": {"gradients": 6, "activations": 9}})
    assert "in the backward pass of layer 0" in peak_sentence(layer)
    assert "checkpointing lowers exactly this part" in peak_sentence(layer)
    assert peak_sentence(SimpleNamespace(**{**vars(ran), "fits": False})) is None


def test_baseline_and_best_skip_what_did_not_fit() -> None:
    none = _result("none", 100, 0.2, None, None)
    sqrt = _result("sqrt", 60, 0.3, 0.0, True)
    refused = _result("budget:dp:40%", 10, 0.0, None, None, fits=False)
    assert baseline_and_best([none, sqrt, refused]) == (none, sqrt)
    assert baseline_and_best([sqrt]) == (None, sqrt)
    assert baseline_and_best([none]) == (none, None)


def test_loss_differences_compare_every_step_with_none() -> None:
    losses = pd.DataFrame({"step": [0, 1] * 3,
                           "strategy": ["none"] * 2 + ["every-layer"] * 2 + ["sqrt"] * 2,
                           "loss": [5.0, 4.0, 5.0, 4.0, 5.0, 4.0 + 2e-6]})
    differences = loss_differences(losses)
    assert list(differences["strategy"]) == ["every-layer", "sqrt"]
    assert list(differences["equal"]) == [True, False]
    assert differences["largest"].iloc[1] == pytest.approx(2e-6)
    assert list(loss_table(differences)["Bitwise equal at every step"]) == ["✓ yes", "✗ no"]


def test_fits_table_names_the_grown_dimension() -> None:
    frame = pd.DataFrame({"strategy": ["none", "every-layer"], "value_predicted": [4, 9],
                          "value_confirmed": [4, 8], "total_bytes": [3 * 2**20, 5 * 2**20],
                          "tokens_per_second": [1234.4, float("nan")]})
    table = fits_table(frame, "seq_len")
    assert list(table.columns) == ["Strategy", "Largest sequence length (confirmed)",
                                   "Measured total (with parameters)", THROUGHPUT]
    assert list(table["Largest sequence length (confirmed)"]) == ["4", "8 (predicted 9)"]
    assert list(table[THROUGHPUT]) == ["1,234", "–"]
    assert list(table["Measured total (with parameters)"]) == ["3.0 MiB", "5.0 MiB"]
    assert "Largest batch (confirmed)" in fits_table(frame, "batch")
    german = fits_table(frame, "seq_len", "de")
    assert list(german.iloc[:, 3]) == ["1.234", "–"]
    assert list(german.iloc[:, 2]) == ["3,0 MiB", "5,0 MiB"]


def test_fits_table_marks_a_strategy_with_nothing_that_fits() -> None:
    frame = pd.DataFrame({"strategy": ["none", "every-layer"], "value_predicted": [None, 1200],
                          "value_confirmed": [None, 1100], "total_bytes": [None, 5 * 2**20],
                          "tokens_per_second": [None, 10.0]})
    table = fits_table(frame, "batch")
    # not blank, not 1200.0; the prediction beside a confirmed size that stepped down
    assert list(table["Largest batch (confirmed)"]) == ["–", "1,100 (predicted 1,200)"]


def test_csv_headers_follow_the_language() -> None:
    frame = pd.DataFrame({"strategy": ["none"], "peak_bytes": [1], "custom": [2]})
    assert list(csv_frame(frame).columns) == ["strategy", "peak_bytes", "custom"]
    for lang in ("de", "vi"):
        assert list(csv_frame(frame, lang).columns)[:2] != ["strategy", "peak_bytes"]


def test_slug_and_reference_estimate() -> None:
    config = ModelConfig(layers=3, hidden=64, heads=2, seq_len=64, batch=1, vocab=512)
    assert config_slug(config) == "L3-h64-a2-s64-b1-V512-float32"
    assert korthikanti(config) == 3 * 34 * 64 * 1 * 64


def test_the_engine_never_imports_streamlit() -> None:
    for path in DEMOS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] == "streamlit" for n in names), path.name


def test_what_fits_compares_strategies_at_equal_work_by_cpu_time() -> None:
    """At 128 MiB: none 3,884 tokens/s at batch 6, every layer 1,228 at batch 28 from one
    step on a busy server, while the page said to spend the freed memory on a larger batch.
    The verdict compares CPU time per token, from the same number of timed steps."""
    from reports.fits_and_loss_tables import cpu_per_token, equal_work_verdict

    seq = 256
    frame = pd.DataFrame({
        "strategy": ["none", "every-layer"], "value_predicted": [6, 28],
        "value_confirmed": [6, 28],
        # none: 6 × 256 tokens in 0.40 s wall (CPU 0.60 s); every layer: 28 × 256 tokens in
        # 5.8 s wall, busy (CPU 4.20 s): 1.50× the CPU time per token
        "step_seconds": [0.40, 5.8], "tokens_per_second": [6 * seq / 0.40, 28 * seq / 5.8],
        "step_seconds_runs": [[0.39, 0.40, 0.41], [5.0, 5.8, 7.1]],
        "cpu_seconds_runs": [[0.59, 0.60, 0.61], [4.19, 4.20, 4.21]],
        # torch's FLOP counter: 1.19× the FLOPs per token with every layer rerun
        "flops_counted": [6 * seq * 1e6, 28 * seq * 1.19e6]})
    assert cpu_per_token(frame.iloc[0]) == pytest.approx(0.60 / (6 * seq))
    text = equal_work_verdict(frame, "batch")
    assert "every layer at batch 28: 1.50× the CPU time per token of no checkpointing at " \
           "batch 6" in text
    assert "did not win back the recomputation" in text
    # the measured 1.50× beside the counted 1.19×, and what a FLOP count leaves out
    assert "counts 1.19× the FLOPs per token of no checkpointing" in text
    assert "element-wise work" in text and "about the same work" not in text
    assert "element-wise work" in equal_work_verdict(frame.drop(columns="flops_counted"),
                                                     "batch")
    cheap = frame.assign(cpu_seconds_runs=[[0.59, 0.60, 0.61], [2.0, 2.0, 2.0]])
    assert "more than paid for the recomputation" in equal_work_verdict(cheap, "batch")
    assert equal_work_verdict(frame[frame["strategy"] != "none"], "batch") == ""
    assert "1,50×" in equal_work_verdict(frame, "batch", "de")
