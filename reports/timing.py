"""Step times and compute, in words: the median and middle half of the timed runs, the
verdict against no checkpointing (time_verdict: by CPU time or counted FLOPs, never by
wall time), CPU against wall time, and the FLOPs counted by torch beside the prediction
and the course's rule. Pure functions, no
Streamlit; texts in the language `lang`."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from demos.installed_torch import counter_counts_attention
from demos.results import StrategyResult, step_range
from i18n import format_decimal, format_percent, gettext, pgettext
from i18n.units import MISSING, format_ms
from memory.theory import COURSE_OVERHEAD
from reports.report import babel, label, label_of

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
    """The wall-time spread of the timed runs (None before the first, or without a fit)."""
    return _spread(result.step_seconds_runs or [], result.fits)


def cpu_spread(result: StrategyResult) -> TimeSpread | None:
    """The same for the process's CPU time of the timed runs: what the step computed,
    whatever else the machine ran meanwhile."""
    return _spread(result.cpu_seconds_runs or [], result.fits)


def _spread(runs: Sequence[float], fits: bool) -> TimeSpread | None:
    spread = step_range(runs) if fits else None
    if spread is None:
        return None
    return TimeSpread(statistics.median(runs), spread[0], spread[1], len(runs))


# Counted FLOPs are exact: a difference under this share is the same work.
SAME_FLOPS = 0.001


@dataclass(frozen=True)
class Verdict:
    """A strategy's cost against none's, from a load-independent measure.

    id: 'baseline'; by CPU time (measure 'cpu') 'slower' when one median lies outside
    the other's range on the slow side, 'faster-noise' the same on the fast side
    (checkpointing only adds work: noise, never shown as a gain), 'noise' when each
    median lies inside the other's range; by counted FLOPs (measure 'flops') 'more-compute'
    or 'same-compute'; 'unknown' without either. ratio: against none's, by that measure.
    Wall time never decides: on a shared server it grows with other learners' load."""

    id: str
    ratio: float | None
    measure: str | None  # "cpu" | "flops"


def time_verdict(result: StrategyResult, base: StrategyResult | None,
                 device_kind: str = "cpu") -> Verdict:
    """The verdict by CPU time where it measures the step (on a CPU), else by the FLOPs
    torch counted (on a GPU the host's CPU time is only launching and waiting)."""
    if base is not None and result is base:
        return Verdict("baseline", 1.0, None)
    if base is None:
        return Verdict("unknown", None, None)
    mine, theirs = cpu_spread(result), cpu_spread(base)
    if device_kind == "cpu" and mine is not None and theirs is not None and theirs.median:
        ratio = mine.median / theirs.median
        if mine.median > theirs.high or theirs.median < mine.low:
            return Verdict("slower", ratio, "cpu")
        if mine.median < theirs.low or theirs.median > mine.high:
            return Verdict("faster-noise", ratio, "cpu")
        return Verdict("noise", ratio, "cpu")
    counted, _ = extra_compute(result, base)
    if counted is None:
        return Verdict("unknown", None, None)
    if counted > SAME_FLOPS:
        return Verdict("more-compute", 1 + counted, "flops")
    return Verdict("same-compute", 1 + counted, "flops")


def time_vs_none_text(result: StrategyResult, base: StrategyResult | None,
                      lang: str = "en", device_kind: str = "cpu") -> str:
    """The verdict in words, naming the measure it rests on."""
    verdict = time_verdict(result, base, device_kind)
    ratio = verdict.ratio or 1.0
    texts = {
        "baseline": lambda: pgettext(lang, "time vs none", "baseline"),
        "slower": lambda: gettext(lang, "{ratio:.2f}× slower by CPU time", ratio=ratio),
        "noise": lambda: gettext(lang, "within noise by CPU time"),
        "faster-noise": lambda: gettext(lang, "CPU time measured lower: timing noise"),
        "more-compute": lambda: gettext(lang, "{ratio:.2f}× the compute (counted FLOPs)",
                                        ratio=ratio),
        "same-compute": lambda: gettext(lang, "the same compute (counted FLOPs)"),
    }
    return texts[verdict.id]() if verdict.id in texts else MISSING


def time_text(result: StrategyResult, lang: str = "en") -> str:
    """'104 ms (101–106)': the median and the middle half of the timed runs."""
    spread = time_spread(result)
    if spread is None:
        return format_ms(result.step_seconds, locale=babel(lang))
    return _spread_text(spread, lang)


def _spread_text(spread: TimeSpread, lang: str) -> str:
    loc = babel(lang)
    return gettext(lang, "{median} ({low}–{high})", median=format_ms(spread.median, locale=loc),
                   low=format_ms(spread.low, locale=loc).removesuffix(" ms"),
                   high=format_ms(spread.high, locale=loc).removesuffix(" ms"))


def cpu_text(result: StrategyResult, lang: str = "en") -> str:
    """'CPU 110 ms (105–118)': the median CPU time (this process, all threads) of the timed
    runs and their middle half, the range the verdict reads."""
    spread = cpu_spread(result)
    if spread is None:
        return ""
    return gettext(lang, "CPU {time}", time=_spread_text(spread, lang))


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


def counter_misses(result: StrategyResult, base: StrategyResult | None,
                   device_kind: str = "cpu") -> bool:
    """A selective strategy whose recomputation torch's FLOP counter cannot see: on a CPU
    where it has no formula for the fused attention kernel (counter_counts_attention) it
    counts no op that selective reruns (element-wise ops are never counted), so +0.0%."""
    counted, _ = extra_compute(result, base)
    return (device_kind == "cpu" and not counter_counts_attention("cpu")
            and result.spec.name == "selective"
            and counted is not None and abs(counted) < SAME_FLOPS)


def wall_cpu_note(results: Sequence[StrategyResult], busy: bool, lang: str = "en") -> str:
    """Why wall time and CPU time differ, and whether these times are representative. The
    share is of the medians shown beside it (CPU over wall × threads)."""
    timed = [r for r in results if cpu_spread(r) is not None and time_spread(r) is not None]
    if not timed:
        return ""
    threads = max(r.threads or 1 for r in timed)
    cpu = sum(statistics.median(r.cpu_seconds_runs) for r in timed)
    wall = sum(statistics.median(r.step_seconds_runs) for r in timed)
    share = cpu / (threads * wall) if wall else 0.0
    note = gettext(lang, "Wall time is what the clock saw; CPU time is what this process "
                         "computed on its {threads} threads: the medians above, CPU is "
                         "{share} of wall time × threads. Other learners' runs on this "
                         "shared server take the cores: wall time grows, CPU time does not, "
                         "so the verdicts are read from CPU time and wall time is shown with "
                         "its spread. The counted FLOPs do not depend on load.",
                   threads=threads, share=format_percent(share, lang, 0))
    if busy:
        note += " " + gettext(lang, "These times were taken while the server was busy (CPU "
                                    "time far below wall time, or a wide spread): they are "
                                    "measured again when it is idle.")
    return note


def sweep_compute_note(frame: pd.DataFrame, x: str, lang: str = "en",
                       x_title: str | None = None) -> str:
    """The curves' caption: at the sweep's largest value, each strategy's step FLOPs
    counted by torch beside the prediction (against none's where it ran), the course's
    rule, and what the dotted CPU-time lines mean. `x_title`: the axis as the chart names
    it in `lang` (the frame's column name, such as seq_len, is no word for a reader)."""
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
                         "{parts}; {course}.", x=x_title or x, value=int(last[x].iloc[0]),
                   parts=", ".join(parts), course=course_rule_text(lang))
    if "cpu_seconds" in frame and frame["cpu_seconds"].notna().any():
        note += " " + gettext(lang, "Time panel: solid lines wall time (the median, bars the "
                                    "range of the timed runs), dotted lines this process's CPU "
                                    "time; the gap between them is other work on this shared "
                                    "server, not checkpointing.")
    return note
