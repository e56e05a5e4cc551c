"""demos.report: the tables and strings the demo pages show, from plain records."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from demos.config import ModelConfig
from demos.report import (
    baseline_and_best,
    config_slug,
    fits_table,
    gradient_badge,
    korthikanti,
    loss_differences,
    loss_table,
    results_table,
    timing_note,
)

DEMOS = Path(__file__).resolve().parents[2] / "demos"


def _result(strategy: str, peak: int, seconds: float, diff: float | None, equal: bool | None,
            fits: bool = True) -> SimpleNamespace:
    return SimpleNamespace(strategy=strategy, label=strategy, fits=fits, peak_bytes=peak,
                           activation_bytes=peak // 2, predicted_activation_bytes=peak // 2,
                           step_seconds=seconds, step_seconds_runs=[seconds] * 3,
                           max_grad_diff=diff, bitwise_equal=equal, error="over the limit")


def test_results_table_reads_against_none() -> None:
    results = [_result("none", 100 * 2**20, 0.2, None, None),
               _result("every-layer", 40 * 2**20, 0.25, 0.0, True),
               _result("sqrt", 60 * 2**20, 0.24, 3e-7, False),
               _result("budget", 0, 0.0, None, None, fits=False)]
    table = results_table(results)
    assert list(table["time vs none"]) == ["1.00×", "1.25×", "1.20×", "–"]
    assert list(table["peak vs none"]) == ["100%", "40%", "60%", "–"]
    assert list(table["same gradients"]) == ["baseline", "✓ bitwise equal (max diff 0)",
                                             "✓ max diff 3.0e-07", "–"]
    assert table["peak memory"].iloc[3] == "does not fit"
    assert [gradient_badge(r) for r in results[1:3]] == ["✓ identical", "✓ 3e-07"]
    assert gradient_badge(_result("sqrt", 1, 0.1, 0.5, False)) == "✗ 5e-01"
    assert "median of 3 timed steps" in timing_note(results)
    two = [_result("none", 1, 0.2, None, None), _result("sqrt", 1, 0.3, 0.0, True)]
    for r in two:
        r.step_seconds_runs = [0.2, 0.2]
    assert "mean of 2 timed steps" in timing_note(two)
    assert "noise" not in timing_note(results)
    noisy = [results[0], _result("every-layer", 40 * 2**20, 0.15, 0.0, True)]
    assert "measured faster than none: that is timing noise" in timing_note(noisy)


def test_baseline_and_best_skip_what_did_not_fit() -> None:
    none = _result("none", 100, 0.2, None, None)
    sqrt = _result("sqrt", 60, 0.3, 0.0, True)
    refused = _result("budget", 10, 0.0, None, None, fits=False)
    assert baseline_and_best([none, sqrt, refused]) == (none, sqrt)
    assert baseline_and_best([sqrt]) == (None, sqrt)
    assert baseline_and_best([none]) == (none, None)


def test_loss_differences_compare_every_step_with_none() -> None:
    losses = pd.DataFrame({"step": [0, 1] * 3,
                           "strategy": ["none"] * 2 + ["every-layer"] * 2 + ["sqrt"] * 2,
                           "loss": [5.0, 4.0, 5.0, 4.0, 5.0, 4.0 + 2e-6]})
    differences = loss_differences(losses)
    assert list(differences["strategy"]) == ["every-layer", "sqrt"]
    assert list(differences["bitwise equal at every step"]) == [True, False]
    assert differences["largest loss difference"].iloc[1] == pytest.approx(2e-6)
    assert list(loss_table(differences)["bitwise equal at every step"]) == ["✓ yes", "✗ no"]


def test_fits_table_names_the_grown_dimension() -> None:
    frame = pd.DataFrame({"strategy": ["none", "every-layer"], "value_predicted": [4, 9],
                          "value_confirmed": [4, 8], "total_bytes": [3 * 2**20, 5 * 2**20],
                          "tokens_per_second": [1234.4, float("nan")]})
    table = fits_table(frame, "seq_len")
    assert list(table.columns) == ["strategy", "largest sequence length (predicted)",
                                   "largest sequence length (confirmed)",
                                   "measured total (with parameters)", "tokens / s"]
    assert list(table["tokens / s"]) == ["1,234", "–"]
    assert list(table["measured total (with parameters)"]) == ["3.0 MiB", "5.0 MiB"]
    assert "largest batch (confirmed)" in fits_table(frame, "batch")


def test_fits_table_marks_a_strategy_with_nothing_that_fits() -> None:
    frame = pd.DataFrame({"strategy": ["none", "every-layer"], "value_predicted": [None, 1200],
                          "value_confirmed": [None, 1100], "total_bytes": [None, 5 * 2**20],
                          "tokens_per_second": [None, 10.0]})
    table = fits_table(frame, "batch")
    assert list(table["largest batch (predicted)"]) == ["–", "1,200"]  # not blank, not 1200.0
    assert list(table["largest batch (confirmed)"]) == ["–", "1,100"]


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
