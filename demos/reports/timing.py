"""Step times and compute, in words: the median and middle half of the timed runs, when
two step times read "within noise" (time_verdict), CPU against wall time, and the FLOPs
counted by torch beside the prediction and the course's rule. Pure functions, no
Streamlit; texts in the language `lang`."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from demos.engine.installed_torch import counter_counts_attention
from demos.engine.results import StrategyResult, step_range
from demos.reports.report import babel, label, label_of
from i18n import format_decimal, format_percent, gettext, pgettext
from i18n.units import MISSING, format_ms
from memory.theory import COURSE_OVERHEAD

# ---------------------------------------------------------------- step times


@dataclass(frozen=True)
class TimeSpread:
    """The timed steps of one strategy: median, and the middle half of the runs
    (quartiles; with fewer than 4 runs, the lowest and highest)."""

    median: float
    low: float
    high: float
    runs: int


def time_spread(result: StrategyResult) -> TimeSpread | None:
    runs = result.step_seconds_runs or []
    spread = step_range(runs) if result.fits else None
    if spread is None:
        return None
    return TimeSpread(statistics.median(runs), spread[0], spread[1], len(runs))


def time_verdict(result: StrategyResult, base: StrategyResult | None
                 ) -> tuple[str, float | None]:
    """(id, ratio to none): 'baseline'; 'slower' when one median lies outside the other's
    range on the slow side (its median above none's range, or none's median below its
    range); 'faster-noise' the same on the fast side (checkpointing only adds work: noise,
    never shown as a gain); 'noise' only when each median lies inside the other's range
    (the ranges then overlap); 'unknown' without times."""
    if base is not None and result is base:
        return "baseline", 1.0
    mine, theirs = time_spread(result), time_spread(base) if base is not None else None
    if mine is None or theirs is None or not theirs.median:
        return "unknown", None
    ratio = mine.median / theirs.median
    if mine.median > theirs.high or theirs.median < mine.low:
        return "slower", ratio
    if mine.median < theirs.low or theirs.median > mine.high:
        return "faster-noise", ratio
    return "noise", ratio


def time_vs_none_text(result: StrategyResult, base: StrategyResult | None,
                      lang: str = "en") -> str:
    verdict, ratio = time_verdict(result, base)
    if verdict == "baseline":
        return pgettext(lang, "time vs none", "baseline")
    if verdict == "slower" and ratio is not None:
        return gettext(lang, "{ratio:.2f}× slower", ratio=ratio)
    if verdict == "noise":
        return gettext(lang, "within noise")
    if verdict == "faster-noise":
        return gettext(lang, "measured faster: timing noise")
    return MISSING


def time_text(result: StrategyResult, lang: str = "en") -> str:
    """'104 ms (101–106)': the median and the middle half of the timed runs."""
    spread = time_spread(result)
    if spread is None:
        return format_ms(result.step_seconds, locale=babel(lang))
    loc = babel(lang)
    return gettext(lang, "{median} ({low}–{high})", median=format_ms(spread.median, locale=loc),
                   low=format_ms(spread.low, locale=loc).removesuffix(" ms"),
                   high=format_ms(spread.high, locale=loc).removesuffix(" ms"))


def cpu_text(result: StrategyResult, lang: str = "en") -> str:
    """'CPU 110 ms': the median CPU time (this process, all threads) of the timed runs."""
    if result.cpu_seconds is None:
        return ""
    return gettext(lang, "CPU {time}", time=format_ms(result.cpu_seconds, locale=babel(lang)))


def signed_percent(share: float, lang: str = "en", digits: int = 1) -> str:
    """+16.7% in the language's style (a change: the sign always shown)."""
    text = format_percent(abs(share), lang, digits)
    return ("+" if share >= 0 else "−") + text


def gflop_text(flops: float | None, lang: str = "en") -> str:
    if flops is None:
        return MISSING
    return gettext(lang, "{gflop} GFLOP", gflop=format_decimal(flops / 1e9, lang, 2))


def extra_compute(result: StrategyResult, base: StrategyResult | None
                  ) -> tuple[float | None, float | None]:
    """(counted, predicted) extra compute of a step against none's: 0.167 for +16.7%."""
    if base is None or not result.fits:
        return None, None
    counted = (result.flops_counted / base.flops_counted - 1
               if result.flops_counted and base.flops_counted else None)
    predicted = (result.flops_predicted / base.flops_predicted - 1
                 if result.flops_predicted and base.flops_predicted else None)
    return counted, predicted


def course_rule_text(lang: str = "en") -> str:
    """The course's rule of thumb, said beside every measured overhead."""
    return gettext(lang, "course: {full} ({frozen} with frozen weights)",
                   full=signed_percent(COURSE_OVERHEAD["full"], lang, 0),
                   frozen=signed_percent(COURSE_OVERHEAD["frozen"], lang, 0))


def overhead_note(results: Sequence[StrategyResult], lang: str = "en",
                  device_kind: str = "cpu") -> str:
    """What the counted compute means, with the course's rule beside it."""
    base = next((r for r in results if r.strategy == "none" and r.fits), None)
    parts = []
    for r in results:
        counted, predicted = extra_compute(r, base)
        if r is base or counted is None:
            continue
        parts.append(gettext(lang, "{name} {counted} (predicted {predicted})", name=label(r, lang),
                             counted=signed_percent(counted, lang),
                             predicted=signed_percent(predicted, lang)
                             if predicted is not None else MISSING))
    if not parts:
        return ""
    note = gettext(lang, "Extra compute of the whole step, counted by torch's FLOP counter "
                         "(torch.utils.flop_counter) on this very run: {parts}; {course}.",
                   parts=", ".join(parts), course=course_rule_text(lang))
    note += " " + gettext(lang, "The course's rule counts one more forward pass. torch's "
                                "non-reentrant checkpoint reruns less: it stops after the "
                                "last op that saves a tensor for backward (early stop). "
                                "Without dropout that leaves out the MLP's last linear "
                                "layer; a dropout after the MLP saves its mask after that "
                                "layer has run, so then it reruns too. Reentrant checkpoint "
                                "reruns the whole layer.")
    if device_kind == "cpu" and counter_counts_attention("cpu"):
        note += " " + gettext(lang, "This torch's counter has a formula for the CPU's fused "
                                    "attention kernel (torch 2.13's has none): it counts "
                                    "the attention too, and so does the prediction.")
    elif device_kind == "cpu":
        note += " " + gettext(lang, "This torch's counter has no formula for the CPU's fused "
                                    "attention kernel (torch 2.15's has one): it counts the "
                                    "linear layers and the head, and so does the "
                                    "prediction.")
    return note


def wall_cpu_note(results: Sequence[StrategyResult], busy: bool, lang: str = "en") -> str:
    """Why wall time and CPU time differ, and whether these times are representative."""
    timed = [r for r in results if r.fits and r.cpu_seconds is not None and r.step_seconds]
    if not timed:
        return ""
    threads = max(r.threads or 1 for r in timed)
    share = (sum(sum(r.cpu_seconds_runs) for r in timed)
             / (threads * sum(sum(r.step_seconds_runs) for r in timed)))
    note = gettext(lang, "Wall time is what the clock saw; CPU time is what this process "
                         "computed on its {threads} threads, {share:.0%} of wall time × "
                         "threads here. Other learners' runs on this shared server take the "
                         "cores: wall time grows, CPU time does not, so the gap between them is "
                         "their load, not checkpointing. The counted FLOPs do not depend on "
                         "load.", threads=threads, share=share)
    if busy:
        note += " " + gettext(lang, "These times were taken while the server was busy (CPU "
                                    "time far below wall time, or a wide spread): they are "
                                    "measured again when it is idle.")
    return note


def sweep_compute_note(frame: pd.DataFrame, x: str, lang: str = "en") -> str:
    """The curves' caption: at the sweep's largest value, each strategy's step FLOPs
    counted by torch beside the prediction (against none's where it ran), the course's
    rule, and what the dotted CPU-time lines mean."""
    if frame.empty or "flops_counted" not in frame or x not in frame:
        return ""
    data = frame[frame["flops_counted"].notna()]
    if "fits" in data:
        data = data[data["fits"].fillna(False).astype(bool)]
    if data.empty:
        return ""
    last = data[data[x] == data[x].max()]
    base = last[last["strategy"] == "none"]
    parts = []
    for row in last.itertuples():
        name = label_of(row.strategy, lang)
        if not base.empty and row.strategy != "none":
            counted = row.flops_counted / base["flops_counted"].iloc[0] - 1
            predicted = row.flops_predicted / base["flops_predicted"].iloc[0] - 1
            parts.append(gettext(lang, "{name} {counted} (predicted {predicted})", name=name,
                                 counted=signed_percent(counted, lang),
                                 predicted=signed_percent(predicted, lang)))
        elif base.empty:
            parts.append(gettext(lang, "{name} {counted} (predicted {predicted})", name=name,
                                 counted=gflop_text(row.flops_counted, lang),
                                 predicted=gflop_text(row.flops_predicted, lang)))
    if not parts:
        return ""
    note = gettext(lang, "Compute of one step at {x} = {value}, counted by torch's FLOP counter: "
                         "{parts}; {course}.", x=x, value=int(last[x].iloc[0]),
                   parts=", ".join(parts), course=course_rule_text(lang))
    if "cpu_seconds" in frame and frame["cpu_seconds"].notna().any():
        note += " " + gettext(lang, "Time panel: solid lines wall time (the median, bars the "
                                    "range of the timed runs), dotted lines this process's CPU "
                                    "time; the gap between them is other work on this shared "
                                    "server, not checkpointing.")
    return note
