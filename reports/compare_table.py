"""The compare page's table and its notes: one row per strategy (peak, activations held,
step time against none, gradient verdict) and how the step times were taken; the memory
model's predicted peaks, shown while a new config is measured. Pure functions, no
Streamlit; texts in the language `lang`."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from demos.results import StrategyResult
from i18n import N_, gettext, pgettext
from i18n.units import MISSING, column_unit, format_bytes_in
from memory import theory
from memory.config import ModelConfig
from memory.placement import BudgetTooSmall
from memory.strategies import StrategySpec
from reports.report import babel, baseline_and_best, header, label
from reports.timing import (
    counter_misses,
    cpu_spread,
    cpu_text,
    extra_compute,
    signed_percent,
    time_spread,
    time_text,
    time_verdict,
    time_vs_none_text,
)

GRADIENT_TOLERANCE = 1e-3  # "tiny numerical differences"; in practice they are bitwise equal

# ---------------------------------------------------------------- the compare table

# column id -> header (a catalog message). Five columns, so a phone (390 px) shows them all:
# the counted compute of every strategy is in overhead_note, under the table.
COMPARE_COLUMNS: dict[str, str] = {
    "strategy": N_("Strategy"),
    "peak": N_("Peak memory (vs baseline)"),
    "held": N_("Activations held (predicted)"),
    "time": N_("Step time (vs baseline)"),
    "gradients": N_("Same gradients"),
}


def results_table(results: Sequence[StrategyResult], lang: str = "en",
                  device_kind: str = "cpu") -> pd.DataFrame:
    """One row per strategy, formatted for reading in `lang` (the CSV keeps raw numbers):
    the step time with its spread and the CPU time and, against none, "1.25× slower by
    CPU time" or "within noise by CPU time" (time_verdict)."""
    base = next((r for r in results if r.strategy == "none" and r.fits), None)
    loc = babel(lang)
    # One unit per column (the largest value's), so sizes compare at a glance.
    peak_unit = column_unit(r.peak_bytes for r in results if r.fits)
    held_unit = column_unit(v for r in results if r.fits
                            for v in (r.activation_bytes, r.predicted_activation_bytes))
    rows = []
    for r in results:
        if not r.fits:
            rows.append([label(r, lang), gettext(lang, "does not fit"), MISSING, MISSING,
                         MISSING])
            continue
        peak = format_bytes_in(r.peak_bytes, peak_unit, locale=loc)
        if base is not None and base.peak_bytes and r is not base and r.peak_bytes is not None:
            peak = gettext(lang, "{size} ({share:.0%})", size=peak,
                           share=r.peak_bytes / base.peak_bytes)
        held = gettext(lang, "{measured} ({predicted})",
                       measured=format_bytes_in(r.activation_bytes, held_unit, locale=loc),
                       predicted=format_bytes_in(r.predicted_activation_bytes, held_unit,
                                                 locale=loc))
        rows.append([label(r, lang), peak, held, step_time_text(r, base, lang, device_kind),
                     gradient_match(r, lang)])
    columns = [header(lang, text) for text in COMPARE_COLUMNS.values()]
    return pd.DataFrame(rows, columns=columns)


def predicted_peaks(config: ModelConfig, strategies: Sequence[StrategySpec],
                    device_kind: str = "cpu") -> list[tuple[StrategySpec, int | None]]:
    """Per strategy, the memory model's peak above the parameters (the prediction the
    engine stores beside each measured peak, memory.theory.predicted_peak_bytes), None
    where the strategy's plan cannot hold the model (a budget too small)."""
    peaks: list[tuple[StrategySpec, int | None]] = []
    for spec in strategies:
        try:
            peaks.append((spec, theory.predicted_peak_bytes(config, spec, device_kind)))
        except BudgetTooSmall:
            peaks.append((spec, None))
    return peaks


def step_time_text(result: StrategyResult, base: StrategyResult | None,
                   lang: str = "en", device_kind: str = "cpu") -> str:
    """'104 ms (101–106), CPU 98 ms (97–99), 1.25× slower by CPU time': the wall time's
    median and middle half, the CPU time's beside it and, against none, the verdict
    (time_verdict, which names its measure); "–" before the first timed run."""
    if time_spread(result) is None:
        return MISSING
    step = time_text(result, lang)
    cpu = cpu_text(result, lang)
    if cpu:
        step += ", " + cpu
    if result is not base:
        step += ", " + time_vs_none_text(result, base, lang, device_kind)
    return step


# column id -> header: the timeline page's cost of each strategy, beside its memory chart
COST_COLUMNS: dict[str, str] = {
    "strategy": N_("Strategy"),
    "compute": N_("Extra compute: counted (predicted)"),
    "time": N_("Step time: wall (range), CPU, vs no checkpointing"),
}


def cost_table(results: Sequence[StrategyResult], lang: str = "en",
               device_kind: str = "cpu", uncounted: str = "") -> pd.DataFrame:
    """One row per strategy that ran: what checkpointing costs. The step's extra FLOPs
    against none's, counted by torch beside the prediction (with `uncounted`, why,
    where the counter cannot see a selective strategy's recomputation: counter_misses),
    and the step time, wall with its spread beside CPU time (step_time_text)."""
    base = next((r for r in results if r.strategy == "none" and r.fits), None)
    rows = []
    for r in results:
        if not r.fits:
            continue
        counted, predicted = extra_compute(r, base)
        if r is base:
            compute = pgettext(lang, "time vs none", "baseline")
        elif counted is None:
            compute = MISSING
        else:
            compute = gettext(lang, "{counted} (predicted {predicted})",
                              counted=signed_percent(counted, lang),
                              predicted=signed_percent(predicted, lang)
                              if predicted is not None else MISSING)
            if uncounted and counter_misses(r, base, device_kind):
                compute += ": " + uncounted
        rows.append([label(r, lang), compute, step_time_text(r, base, lang, device_kind)])
    columns = [header(lang, text) for text in COST_COLUMNS.values()]
    return pd.DataFrame(rows, columns=columns)


def gradient_badge(result: StrategyResult, lang: str = "en") -> str:
    """gradient_match, short enough for a metric: '✓ identical', '✓ 3e-07'."""
    return _gradient_verdict(result, "✓ " + gettext(lang, "identical"), "{mark} {diff:.0e}")


def gradient_match(result: StrategyResult, lang: str = "en") -> str:
    if result.strategy == "none":
        return pgettext(lang, "gradients", "baseline")
    return _gradient_verdict(result, "✓ " + gettext(lang, "bitwise equal (max diff 0)"),
                             "{mark} " + gettext(lang, "max diff {diff}", diff="{diff:.1e}"))


def _gradient_verdict(result: StrategyResult, identical: str, template: str) -> str:
    """`identical` when bitwise equal, else the largest gradient difference in `template`,
    marked ✓ below GRADIENT_TOLERANCE and ✗ above."""
    if result.bitwise_equal:
        return identical
    if result.max_grad_diff is None:
        return MISSING
    mark = "✓" if result.max_grad_diff < GRADIENT_TOLERANCE else "✗"
    return template.format(mark=mark, diff=result.max_grad_diff)


def timing_note(results: Sequence[StrategyResult], lang: str = "en",
                device_kind: str = "cpu") -> str:
    """How the step times were taken, what the verdicts rest on, and what a difference
    within the spread means."""
    spreads = [s for s in (time_spread(r) for r in results) if s is not None]
    if not spreads:
        return ""
    count = min(s.runs for s in spreads)
    note = gettext(lang, "Step times: median of {count} timed steps per strategy, strategies "
                         "interleaved; the range is the middle half of the runs.", count=count)
    base, _ = baseline_and_best(results)
    verdicts = {id(r): time_verdict(r, base, device_kind) for r in results if r is not base}
    measures = {v.measure for v in verdicts.values()}
    if "cpu" in measures:
        note += " " + gettext(lang, "The verdicts against no checkpointing are read from CPU "
                                    "time, which other learners' load hardly moves; wall "
                                    "time is shown with its spread, as measured.")
    elif "flops" in measures:
        note += " " + gettext(lang, "The verdicts against no checkpointing are read from the "
                                    "FLOPs torch counted, which no load moves; wall time is "
                                    "shown with its spread, as measured.")

    def named(verdict: str) -> str:
        return ", ".join(label(r, lang) for r in results
                         if r is not base and verdicts[id(r)].id == verdict)

    if noisy := named("noise"):
        note += " " + gettext(lang, "{names}: within noise by CPU time, each median lies "
                                    "inside the other's range; that is no measurable "
                                    "difference.", names=noisy)
    if faster := named("faster-noise"):
        note += " " + gettext(lang, "{names}: CPU time measured lower than without "
                                    "checkpointing, which is timing noise (checkpointing only "
                                    "adds work).", names=faster)
    if (slowest := _slowest_by_cpu(results)) and counter_misses(slowest, base, device_kind):
        note += " " + gettext(lang, "{name}: the slowest by CPU time, though torch counted "
                                    "no extra FLOPs: every op of its forward and of its rerun "
                                    "goes through torch's selective-checkpoint dispatch, "
                                    "Python code that asks the policy and saves or looks up "
                                    "each output, and what it reruns (attention and the "
                                    "element-wise ops) takes time the counter does not "
                                    "count.", name=label(slowest, lang))
    return note


def _slowest_by_cpu(results: Sequence[StrategyResult]) -> StrategyResult | None:
    """The strategy with the highest median CPU time per step, when two or more were timed."""
    timed = [(spread.median, r) for r in results if (spread := cpu_spread(r)) is not None]
    return max(timed, key=lambda pair: pair[0])[1] if len(timed) > 1 else None
