"""What the demo pages say about measured results, as plain tables and strings.

Pure functions of the engine's records (and DataFrames), no Streamlit: the compare
table, the gradient verdicts, the timing note, the loss and what-fits tables, file-name
slugs and the published reference estimate. The ui/ modules put them on the page.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from demos.config import ModelConfig
from demos.results import StrategyResult
from demos.theory import korthikanti_layer_bytes
from demos.units import format_bytes, format_ms

GRADIENT_TOLERANCE = 1e-3  # "tiny numerical differences"; in practice they are bitwise equal


def config_slug(config: ModelConfig) -> str:
    return (f"L{config.layers}-h{config.hidden}-a{config.heads}-s{config.seq_len}"
            f"-b{config.batch}-V{config.vocab}-{config.dtype}")


def baseline_and_best(results: Sequence[StrategyResult]
                      ) -> tuple[StrategyResult | None, StrategyResult | None]:
    """The measured `none` result and the fitting strategy with the lowest peak."""
    fitted = [r for r in results if r.fits and r.peak_bytes is not None]
    base = next((r for r in fitted if r.strategy == "none"), None)
    others = [r for r in fitted if r.strategy != "none"]
    best = min(others, key=lambda r: r.peak_bytes) if others else None
    return base, best


# ---------------------------------------------------------------- the compare table


def results_table(results: Sequence[StrategyResult]) -> pd.DataFrame:
    """One row per strategy, formatted for reading (the CSV keeps raw numbers)."""
    base = next((r for r in results if r.strategy == "none" and r.fits), None)
    rows = []
    for r in results:
        if not r.fits:
            rows.append({"strategy": r.label, "peak memory": "does not fit",
                         "activations held": "–", "predicted": "–", "step time": "–",
                         "time vs none": "–", "peak vs none": "–", "same gradients": "–"})
            continue
        time_ratio = (r.step_seconds / base.step_seconds
                      if base and base.step_seconds and r.step_seconds else math.nan)
        peak_ratio = r.peak_bytes / base.peak_bytes if base and base.peak_bytes else math.nan
        rows.append({
            "strategy": r.label,
            "peak memory": format_bytes(r.peak_bytes),
            "activations held": format_bytes(r.activation_bytes),
            "predicted": format_bytes(r.predicted_activation_bytes),
            "step time": format_ms(r.step_seconds),
            "time vs none": "–" if math.isnan(time_ratio) else f"{time_ratio:.2f}×",
            "peak vs none": "–" if math.isnan(peak_ratio) else f"{peak_ratio:.0%}",
            "same gradients": gradient_match(r),
        })
    return pd.DataFrame(rows)


def gradient_badge(result: StrategyResult) -> str:
    """gradient_match, short enough for a metric: '✓ identical', '✓ 3e-07'."""
    return _gradient_verdict(result, "✓ identical", "{mark} {diff:.0e}")


def gradient_match(result: StrategyResult) -> str:
    if result.strategy == "none":
        return "baseline"
    return _gradient_verdict(result, "✓ bitwise equal (max diff 0)", "{mark} max diff {diff:.1e}")


def _gradient_verdict(result: StrategyResult, identical: str, template: str) -> str:
    """`identical` when bitwise equal, else the largest gradient difference in `template`,
    marked ✓ below GRADIENT_TOLERANCE and ✗ above."""
    if result.bitwise_equal:
        return identical
    if result.max_grad_diff is None:
        return "–"
    mark = "✓" if result.max_grad_diff < GRADIENT_TOLERANCE else "✗"
    return template.format(mark=mark, diff=result.max_grad_diff)


def timing_note(results: Sequence[StrategyResult]) -> str:
    """How the step times were taken, and a warning when noise shows."""
    runs = [r.step_seconds_runs for r in results if r.fits and r.step_seconds_runs]
    if not runs:
        return ""
    count = min(map(len, runs))
    how = {1: "one timed step", 2: "mean of 2 timed steps"}.get(count,
                                                                f"median of {count} timed steps")
    note = f"Step times: {how} per strategy, strategies interleaved."
    base, _ = baseline_and_best(results)
    faster = [r.label for r in results if base is not None and r is not base and r.fits
              and r.step_seconds and base.step_seconds and r.step_seconds < base.step_seconds
              and r.strategy not in ("none",)]
    if faster:
        note += (f" {', '.join(faster)} measured faster than none: that is timing noise on a "
                 "shared machine, not a speed-up (checkpointing only adds work).")
    return note


def korthikanti(config: ModelConfig) -> float:
    """Korthikanti et al.'s estimate for all layers without checkpointing (16-bit, fused
    attention, 1-byte dropout masks), as published: a reference, not this model."""
    return config.layers * korthikanti_layer_bytes(config.batch, config.seq_len, config.hidden,
                                                   config.heads)


# ---------------------------------------------------------------- same result


def loss_differences(losses: pd.DataFrame) -> pd.DataFrame:
    """Per strategy, the largest |loss - loss of none| over all steps, and whether every
    step's loss is bitwise equal to none's."""
    table = losses.pivot_table(index="step", columns="strategy", values="loss", aggfunc="first")
    rows = []
    if "none" in table:
        for strategy in table.columns:
            if strategy == "none":
                continue
            diff = (table[strategy] - table["none"]).abs()
            rows.append({"strategy": strategy,
                         "largest loss difference": float(diff.max()),
                         "bitwise equal at every step": bool((diff == 0).all())})
    return pd.DataFrame(rows, columns=["strategy", "largest loss difference",
                                       "bitwise equal at every step"])


def loss_table(differences: pd.DataFrame) -> pd.DataFrame:
    """loss_differences, formatted for reading."""
    return pd.DataFrame({
        "strategy": differences["strategy"],
        "largest loss difference vs none": [f"{v:.1e}" if v else "0"
                                            for v in differences["largest loss difference"]],
        "bitwise equal at every step": ["✓ yes" if v else "✗ no"
                                        for v in differences["bitwise equal at every step"]],
    })


# ---------------------------------------------------------------- what fits


def _whole(value: object) -> str:
    """A size for a table cell: "12", or "–" when there is none (nothing fits)."""
    return "–" if value is None or pd.isna(value) else f"{int(value):,}"


def fits_table(frame: pd.DataFrame, field: str) -> pd.DataFrame:
    name = "batch" if field == "batch" else "sequence length"
    return pd.DataFrame({
        "strategy": frame["strategy"],
        f"largest {name} (predicted)": [_whole(v) for v in frame["value_predicted"]],
        f"largest {name} (confirmed)": [_whole(v) for v in frame["value_confirmed"]],
        "measured total (with parameters)": [format_bytes(v) for v in frame["total_bytes"]],
        "tokens / s": [f"{v:,.0f}" if pd.notna(v) else "–" for v in frame["tokens_per_second"]],
    })
