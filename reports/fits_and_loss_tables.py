"""The same-result and what-fits pages' tables: loss differences against none, the largest
size that fits per strategy with its throughput, one step's time and compute. Pure
functions, no Streamlit; texts in the language `lang`."""

from __future__ import annotations

import statistics

import pandas as pd

from i18n import N_, format_number, gettext, pgettext
from i18n.numbers import format_decimal
from i18n.units import MISSING, column_unit, format_bytes_in, format_ms
from reports.report import babel, header, label_of
from reports.timing import (
    course_rule_text,
    gflop_text,
)

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
        header(lang, N_("Strategy")): [label_of(s, lang) for s in differences["strategy"]],
        header(lang, N_("Largest loss difference vs no checkpointing")): [
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
        header(lang, N_("Strategy")): [label_of(s, lang) for s in frame["strategy"]],
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
    note = gettext(lang, "Tokens per second from the median of {count} timed steps at the "
                         "confirmed size, as many at a large size as at a small one, in "
                         "brackets the range of the runs. Wall time grows with other learners' "
                         "load (the gap to CPU time is their work): the verdict compares CPU "
                         "time per token.", count=min(runs))
    return note + " " + gettext(lang, "The extra compute of checkpointing is set by the "
                                      "model, not the batch; {course}.",
                                course=course_rule_text(lang))


def cpu_per_token(row: pd.Series) -> float | None:
    """CPU seconds per token at the confirmed size: the median CPU time of its timed steps
    over the tokens of one step. Work, not waiting: other learners' load hardly moves it."""
    cpu = _runs(row, "cpu_seconds_runs")
    tokens, seconds = row.get("tokens_per_second"), row.get("step_seconds")
    if not cpu or tokens is None or seconds is None or pd.isna(tokens) or pd.isna(seconds):
        return None
    per_step = float(tokens) * float(seconds)
    return statistics.median(cpu) / per_step if per_step else None


def flops_per_token(row: pd.Series) -> float | None:
    """The step's counted FLOPs (torch's FLOP counter) over its tokens, at the confirmed
    size; None where they were not counted."""
    flops, tokens = row.get("flops_counted"), row.get("tokens_per_second")
    seconds = row.get("step_seconds")
    if any(v is None or pd.isna(v) for v in (flops, tokens, seconds)):
        return None
    per_step = float(tokens) * float(seconds)
    return float(flops) / per_step if per_step else None


def equal_work_verdict(frame: pd.DataFrame, field: str, lang: str = "en") -> str:
    """Each strategy at its largest size against no checkpointing at its own, at equal
    work: CPU time per token (cpu_per_token), so a busy server does not decide it. Then
    what that means for the advice to spend the freed memory on a larger batch."""
    rows = {row["strategy"]: row for _, row in frame.iterrows()}
    base = rows.get("none")
    base_cost = cpu_per_token(base) if base is not None else None
    if base is None or not base_cost:
        return ""
    name = field_name(field, lang)
    parts, ratios = [], []
    for strategy, row in rows.items():
        cost = cpu_per_token(row)
        if strategy == "none" or cost is None:
            continue
        ratios.append(cost / base_cost)
        parts.append(gettext(lang, "{strategy} at {name} {value}: {ratio:.2f}× the CPU time per "
                                   "token of no checkpointing at {name} {base}",
                             strategy=label_of(strategy, lang), name=name,
                             value=_whole(row["value_confirmed"], lang), ratio=cost / base_cost,
                             base=_whole(base["value_confirmed"], lang)))
    if not parts:
        return ""
    text = gettext(lang, "At equal work (CPU time per token, which other learners' load "
                         "does not move): {parts}.", parts="; ".join(parts))
    if min(ratios) >= 1:
        counted = [flops_per_token(row) for strategy, row in rows.items()
                   if strategy != "none" and cpu_per_token(row) is not None]
        base_flops = flops_per_token(base)
        why = gettext(lang, "The rerun repeats each layer's element-wise work too (norms, "
                            "activation functions, dropout masks, copies), which a FLOP count "
                            "leaves out and a CPU runs at the speed of its memory rather than "
                            "its arithmetic; a larger {name} makes neither cheaper per token.",
                      name=name)
        if base_flops and counted and all(counted):
            return text + " " + gettext(
                lang, "On this CPU the larger {name} did not win back the recomputation. "
                      "torch's FLOP counter (matrix products and attention) counts {flops} "
                      "the FLOPs per token of no checkpointing: that is the rerun forward; "
                      "the CPU time per token grew more.", name=name,
                flops=" / ".join(f"{format_decimal(value / base_flops, lang, 2)}×"
                                 for value in counted)
            ) + " " + why
        return text + " " + gettext(lang, "On this CPU the larger {name} did not win back "
                                          "the recomputation.", name=name) + " " + why
    return text + " " + gettext(lang, "Here the larger {name} more than paid for the "
                                      "recomputation.", name=name)
