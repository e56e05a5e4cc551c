"""What the demo pages say about measured results, as plain tables and strings.

Pure functions of the engine's records (and DataFrames), no Streamlit: the compare
table, the gradient verdicts, the step times with their spread, where each peak is and
what set it, the loss and what-fits tables, CSV headers, file-name slugs and the
published reference estimate. Every text goes through the catalog in the language `lang`
the page passes (i18n.gettext) and numbers through i18n.units in that language's style;
the ui/ modules put them on the page.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from demos.engine.results import StrategyResult
from i18n import N_, format_decimal, format_number, format_percent, gettext, language, pgettext
from i18n.units import MISSING, column_unit, format_bytes, format_bytes_in, format_ms
from memory.config import ModelConfig
from memory.strategies import title as strategy_title
from memory.theory import COURSE_OVERHEAD, PeakCause, peak_cause, shared_peaks
from memory.worked_examples import korthikanti_layer_bytes

GRADIENT_TOLERANCE = 1e-3  # "tiny numerical differences"; in practice they are bitwise equal


def babel(lang: str) -> str:
    """The Babel locale i18n.units writes numbers in for a language code."""
    return language(lang).babel_locale


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


def label(result: StrategyResult, lang: str = "en") -> str:
    """A result's display title in `lang` (memory.strategies.title)."""
    return label_of(result.strategy, lang, fallback=str(result.label or result.strategy))


def label_of(strategy: str, lang: str = "en", fallback: str | None = None) -> str:
    """A strategy text's display title in `lang`; the text itself (or `fallback`) when it
    names no strategy."""
    try:
        return strategy_title(strategy, lang)
    except ValueError:
        return fallback or str(strategy)


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
    runs = sorted(result.step_seconds_runs or [])
    if not result.fits or not runs:
        return None
    if len(runs) >= 4:
        low, _, high = statistics.quantiles(runs, n=4, method="inclusive")
    else:
        low, high = runs[0], runs[-1]
    return TimeSpread(statistics.median(runs), low, high, len(runs))


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
                                "non-reentrant checkpoint reruns less: it stops as soon as "
                                "every tensor backward needs is rebuilt (early stop), so the "
                                "MLP's last linear layer is never rerun; reentrant checkpoint "
                                "reruns the whole layer.")
    if device_kind == "cpu":
        note += " " + gettext(lang, "On a CPU torch's counter has no formula for the fused "
                                    "attention kernel: it counts the linear layers and the "
                                    "head, and so does the prediction.")
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
        note += " " + gettext(lang, "Time panel: solid lines wall time, dotted lines this "
                                    "process's CPU time; the gap between them is other work on "
                                    "this shared server, not checkpointing.")
    return note


# ---------------------------------------------------------------- the compare table

# column id -> header (a catalog message). Five columns, so a phone (390 px) shows them all:
# the counted compute of every strategy is in overhead_note, under the table.
COMPARE_COLUMNS: dict[str, str] = {
    "strategy": N_("Strategy"),
    "peak": N_("Peak memory (vs none)"),
    "held": N_("Activations held (predicted)"),
    "time": N_("Step time (vs none)"),
    "gradients": N_("Same gradients"),
}


def header(lang: str, msgid: str) -> str:
    """A table header in `lang` (a message marked with N_ where the table is described)."""
    return gettext(lang, msgid)


def results_table(results: Sequence[StrategyResult], lang: str = "en") -> pd.DataFrame:
    """One row per strategy, formatted for reading in `lang` (the CSV keeps raw numbers):
    the step time with its spread and the CPU time and, against none, "1.25× slower" or
    "within noise"; the step's FLOPs counted by torch beside the prediction."""
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
        step = time_text(r, lang)
        if r.cpu_seconds is not None:
            step += ", " + cpu_text(r, lang)
        if r is not base:
            step += ", " + time_vs_none_text(r, base, lang)
        rows.append([label(r, lang), peak, held, step, gradient_match(r, lang)])
    columns = [header(lang, text) for text in COMPARE_COLUMNS.values()]
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


def timing_note(results: Sequence[StrategyResult], lang: str = "en") -> str:
    """How the step times were taken, and what a difference within the spread means."""
    spreads = [s for s in (time_spread(r) for r in results) if s is not None]
    if not spreads:
        return ""
    count = min(s.runs for s in spreads)
    note = gettext(lang, "Step times: median of {count} timed steps per strategy, strategies "
                         "interleaved; the range is the middle half of the runs.", count=count)
    base, _ = baseline_and_best(results)
    noisy = [label(r, lang) for r in results
             if r is not base and time_verdict(r, base)[0] == "noise"]
    if noisy:
        note += " " + gettext(lang, "{names}: within noise, each median lies inside the other's "
                                    "range; on a shared machine that is no measurable "
                                    "difference.", names=", ".join(noisy))
    faster = [label(r, lang) for r in results
              if r is not base and time_verdict(r, base)[0] == "faster-noise"]
    if faster:
        note += " " + gettext(lang, "{names}: measured faster than none, which is timing noise "
                                    "(checkpointing only adds work).", names=", ".join(faster))
    return note


def korthikanti(config: ModelConfig) -> float:
    """Korthikanti et al.'s estimate for all layers without checkpointing (16-bit, fused
    attention, 1-byte dropout masks), as published: a reference, not this model."""
    return config.layers * korthikanti_layer_bytes(config.batch, config.seq_len, config.hidden,
                                                   config.heads)


# ---------------------------------------------------------------- where the peak is

PART_NAMES: dict[str, str] = {
    "activations": N_("the activations kept for backward (and rebuilt there)"),
    "logits": N_("the loss's logits-sized tensors"),
    "gradients": N_("the parameters' gradients"),
    "temporaries": N_("backward's temporary tensors"),
}
PART_ADVICE: dict[str, str] = {
    "activations": N_("checkpointing lowers exactly this part."),
    "logits": N_("checkpointing cannot lower it; lower the vocabulary (or batch × sequence) "
                 "to see the layers dominate."),
    "gradients": N_("checkpointing cannot lower them; raise the sequence length or the batch "
                    "to see the activations dominate."),
    "temporaries": N_("checkpointing does not lower them."),
}


def where_text(cause: PeakCause, lang: str = "en") -> str:
    """'in the backward pass of layer 0', 'at the loss', ..."""
    layer = cause.layer
    if cause.where == "forward":
        return gettext(lang, "in the forward pass, layer {layer}", layer=layer)
    if cause.where == "recompute":
        return gettext(lang, "in the recomputation of layer {layer}", layer=layer)
    if cause.where == "backward":
        return gettext(lang, "in the backward pass of layer {layer}", layer=layer)
    if cause.where == "loss":
        return gettext(lang, "at the loss")
    if cause.where == "loss-backward":
        return gettext(lang, "at the start of backward, the loss's gradient")
    return gettext(lang, "at the end of backward (embedding and LM head)")


def op_name(op: str | None) -> str:
    """'gelu_backward.default' -> 'gelu_backward'."""
    return (op or "").removesuffix(".default")


def peak_sentence(result: StrategyResult, lang: str = "en") -> str | None:
    """'**every-layer**: peak 11.3 MiB in the backward pass of layer 0 (`gelu_backward`).
    Largest part: the parameters' gradients, 6.0 MiB (53%): checkpointing cannot lower
    them.' From the run's own breakdown; None when it did not run."""
    cause = peak_cause(result)
    if cause is None:
        return None
    loc = babel(lang)
    text = gettext(lang, "**{strategy}**: peak {size} {where} (`{op}`).",
                   strategy=label(result, lang), size=format_bytes(cause.peak_bytes, locale=loc),
                   where=where_text(cause, lang), op=op_name(cause.op))
    text += " " + gettext(lang, "Largest part: {part}, {size} ({share:.0%}): {advice}",
                          part=gettext(lang, PART_NAMES[cause.part]),
                          size=format_bytes(cause.part_bytes, locale=loc), share=cause.share,
                          advice=gettext(lang, PART_ADVICE[cause.part]))
    return text


def shared_peak_notes(results: Sequence[StrategyResult], lang: str = "en") -> list[str]:
    """For strategies that reach exactly the same peak: what sets it, so the learner does
    not conclude that they do not differ."""
    notes = []
    by_name = {r.strategy: r for r in results}
    for names in shared_peaks(results):
        cause = peak_cause(by_name[names[0]])
        assert cause is not None
        notes.append(gettext(
            lang, "{names} reach the same peak, {size}: it is set by {part}, which these "
                  "strategies do not change, not by what they keep for backward.",
            names=", ".join(label(by_name[n], lang) for n in names),
            size=format_bytes(cause.peak_bytes, locale=babel(lang)),
            part=gettext(lang, PART_NAMES[cause.part])))
    return notes


# ---------------------------------------------------------------- CSV headers

CSV_HEADERS: dict[str, str] = {
    "strategy": N_("strategy"), "label": N_("label"), "fits": N_("fits"), "error": N_("error"),
    "peak_bytes": N_("peak_bytes"), "activation_bytes": N_("activation_bytes"),
    "predicted_activation_bytes": N_("predicted_activation_bytes"),
    "predicted_peak_bytes": N_("predicted_peak_bytes"), "step_seconds": N_("step_seconds"),
    "loss": N_("loss"), "step": N_("step"), "max_grad_diff": N_("max_grad_diff"),
    "bitwise_equal": N_("bitwise_equal"), "measured_by": N_("measured_by"),
    "flops_counted": N_("flops_counted"), "flops_predicted": N_("flops_predicted"),
    "cpu_seconds": N_("cpu_seconds"),
}


def csv_frame(frame: pd.DataFrame, lang: str = "en") -> pd.DataFrame:
    """A frame for download with its known column names in `lang` (others kept)."""
    return frame.rename(columns={c: gettext(lang, text)
                                 for c, text in CSV_HEADERS.items() if c in frame})


# ---------------------------------------------------------------- same result


def loss_differences(losses: pd.DataFrame) -> pd.DataFrame:
    """Per strategy, the largest |loss - loss of none| over all steps, and whether every
    step's loss is bitwise equal to none's (column ids: strategy, largest, equal)."""
    table = losses.pivot_table(index="step", columns="strategy", values="loss", aggfunc="first")
    rows = []
    if "none" in table:
        for strategy in table.columns:
            if strategy == "none":
                continue
            diff = (table[strategy] - table["none"]).abs()
            rows.append({"strategy": strategy, "largest": float(diff.max()),
                         "equal": bool((diff == 0).all())})
    return pd.DataFrame(rows, columns=["strategy", "largest", "equal"])


def loss_table(differences: pd.DataFrame, lang: str = "en") -> pd.DataFrame:
    """loss_differences, formatted for reading in `lang`."""
    return pd.DataFrame({
        header(lang, N_("Strategy")): [strategy_title(s, lang) for s in differences["strategy"]],
        header(lang, N_("Largest loss difference vs none")): [
            f"{v:.1e}" if v else "0" for v in differences["largest"]],
        header(lang, N_("Bitwise equal at every step")): [
            "✓ " + gettext(lang, "yes") if v else "✗ " + gettext(lang, "no")
            for v in differences["equal"]],
    })


# ---------------------------------------------------------------- what fits


def field_name(field: str, lang: str = "en") -> str:
    """'batch' or 'sequence length' in `lang`."""
    return (pgettext(lang, "dimension", "batch") if field == "batch"
            else pgettext(lang, "dimension", "sequence length"))


def _whole(value: object, lang: str) -> str:
    """A size for a table cell: "12", or "–" when there is none (nothing fits)."""
    if value is None or pd.isna(value):
        return MISSING
    return format_number(round(float(value)), lang)  # type: ignore[arg-type]


# the confirmed-size column's header per grown dimension
FIT_HEADERS: dict[str, str] = {
    "batch": N_("Largest batch (confirmed)"),
    "seq_len": N_("Largest sequence length (confirmed)"),
}


def _confirmed(confirmed: object, predicted: object, lang: str) -> str:
    """'11', or '11 (predicted 12)' when the real run had to step down from the theory's
    size, or '– (predicted 9)' when even that failed."""
    text = _whole(confirmed, lang)
    if pd.notna(predicted) and (pd.isna(confirmed) or int(predicted) != int(confirmed)):
        text += " " + gettext(lang, "(predicted {size})", size=_whole(predicted, lang))
    return text


def _runs(row: pd.Series, name: str) -> list[float]:
    value = row.get(name) if name in row else None
    return [float(v) for v in value] if isinstance(value, list | tuple) else []


def throughput_text(row: pd.Series, lang: str = "en") -> str:
    """'12,345 (11,900–12,800)': tokens per second from the median step time, and from the
    middle half of the timed runs (the slowest and fastest under four runs)."""
    tokens = row.get("tokens_per_second")
    runs = sorted(_runs(row, "step_seconds_runs"))
    if tokens is None or pd.isna(tokens):
        return MISSING
    text = _whole(tokens, lang)
    if len(runs) >= 2 and row.get("step_seconds"):  # as time_spread: quartiles from 4 runs
        low, high = runs[0], runs[-1]
        if len(runs) >= 4:
            low, _, high = statistics.quantiles(runs, n=4, method="inclusive")
        per_step = float(tokens) * float(row["step_seconds"])  # the tokens of one step
        text = gettext(lang, "{median} ({low}–{high})", median=text,
                       low=_whole(per_step / high, lang), high=_whole(per_step / low, lang))
    return text


def fit_step_text(row: pd.Series, lang: str = "en") -> str:
    """'410 ms, CPU 380 ms · 60.13 GFLOP (predicted 60.13)': one step at the confirmed size,
    wall and CPU time, and its FLOPs counted by torch beside the prediction."""
    seconds = row.get("step_seconds")
    if seconds is None or pd.isna(seconds):
        return MISSING
    loc = babel(lang)
    text = format_ms(float(seconds), locale=loc)
    cpu = _runs(row, "cpu_seconds_runs")
    if cpu:
        text += ", " + gettext(lang, "CPU {time}",
                               time=format_ms(statistics.median(cpu), locale=loc))
    counted, predicted = row.get("flops_counted"), row.get("flops_predicted")
    if counted is not None and pd.notna(counted):
        text += " · " + gettext(lang, "{counted} (predicted {predicted})",
                                counted=gflop_text(float(counted), lang),
                                predicted=gflop_text(float(predicted), lang)
                                if predicted is not None and pd.notna(predicted) else MISSING)
    return text


def fits_table(frame: pd.DataFrame, field: str, lang: str = "en") -> pd.DataFrame:
    """Four columns, so a phone shows them all: the confirmed size (with the prediction
    when they differ), the measured total, and the throughput with its spread beside one
    step's wall and CPU time and FLOPs (counted, predicted)."""
    confirmed = FIT_HEADERS["batch" if field == "batch" else "seq_len"]
    loc = babel(lang)
    total_unit = column_unit(frame["total_bytes"])
    return pd.DataFrame({
        header(lang, N_("Strategy")): [strategy_title(s, lang) for s in frame["strategy"]],
        header(lang, confirmed): [_confirmed(c, p, lang) for c, p in zip(
            frame["value_confirmed"], frame["value_predicted"], strict=True)],
        header(lang, N_("Measured total (with parameters)")): [
            format_bytes_in(v, total_unit, locale=loc) for v in frame["total_bytes"]],
        header(lang, N_("Tokens / s · one step: wall, CPU · compute counted (predicted)")): [
            _joined(throughput_text(row, lang), fit_step_text(row, lang))
            for _, row in frame.iterrows()],
    })


def _joined(*parts: str) -> str:
    return " · ".join(part for part in parts if part != MISSING) or MISSING


def fits_timing_note(frame: pd.DataFrame, lang: str = "en") -> str:
    """How What fits timed its throughput, wall against CPU time, and the course's rule
    beside the measured cost of checkpointing."""
    runs = [len(_runs(row, "step_seconds_runs")) for _, row in frame.iterrows()]
    runs = [n for n in runs if n]
    if not runs:
        return ""
    note = gettext(lang, "Tokens per second from the median of the timed steps at the "
                         "confirmed size ({low} to {high} per strategy here: more while they "
                         "take little time), in brackets the range of the runs; each strategy "
                         "at its own size, so on a busy server compare them with care: CPU "
                         "time beside wall time shows the load (the gap is other learners' "
                         "work).", low=min(runs), high=max(runs))
    return note + " " + gettext(lang, "The extra compute of checkpointing is set by the "
                                      "model, not the batch; {course}.",
                                course=course_rule_text(lang))
