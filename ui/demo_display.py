"""The Streamlit pieces that show a demo's results.

The headline metrics, where each peak is and what set it, the refusals explained, the
"measured on <device> by <method>" caption, the CSV download, the theory notes, the
charts (built once per config and language, shared by every session) and the pause that
lets the numbers reach the screen before the charts. The tables, sentences and figures come
from the reports modules in the session's language.
"""

from __future__ import annotations

import hashlib
import time
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from demos.results import Comparison, StrategyResult
from i18n import N_, format_percent, gettext
from i18n.units import format_bytes, format_ms
from memory.config import ModelConfig
from reports import fits_and_loss_tables, peak_notes, report, timing
from reports.compare_table import gradient_badge, gradient_match, timing_note
from reports.report import baseline_and_best
from ui.demo_runner import device, view_phase
from ui.device_words import device_text
from ui.i18n import babel_locale, current_language, t

NUMBERS_FIRST_PAUSE_S = 1.0
FIGURE_CACHE_ENTRIES = 256
T = TypeVar("T")


# ---------------------------------------------------------------- charts, cached


@st.cache_resource(max_entries=FIGURE_CACHE_ENTRIES, show_spinner=False)
def _shared(name: str, key: Hashable, lang: str, _build: Callable[[], Any]) -> Any:
    """One built object per (name, config key, language), shared by every session: built
    once, however many learners look at it. Nobody may change what it returns."""
    return _build()


def shared(name: str, key: Hashable, build: Callable[[str], T]) -> T:
    """What `build(lang)` makes for `key` (a hashable description of the run: config,
    strategies, options, the result's fingerprint), built once per key and language: a
    figure, or a frame a chart and a download both use."""
    lang = current_language()
    return _shared(name, key, lang, lambda: build(lang))


class _SharedFigure(go.Figure):
    """A finished figure that every session draws as it is. st.plotly_chart asks for the
    figure's dict on every draw (a deep copy, then a pass over every array); this one
    makes it once. Nothing may change the figure or the dict afterwards."""

    def to_dict(self) -> dict:
        made = getattr(self, "_made_dict", None)
        if made is None:
            made = self._made_dict = super().to_dict()
        return made


def chart(name: str, key: Hashable, build: Callable[[str], go.Figure],
          where: DeltaGenerator | None = None) -> None:
    """Draw the figure `build(lang)` makes for `key`, built once per key and language."""
    figure = shared(name, key, lambda lang: _SharedFigure(build(lang)))
    phase = view_phase()  # a stand-in view: drawn again in the same script run
    (where or st).plotly_chart(figure, config={"displaylogo": False},
                               key=f"{phase}-{name}" if phase else None)


# ---------------------------------------------------------------- headline numbers


def headline(results: Sequence[StrategyResult]) -> None:
    """Three numbers: the most memory a strategy saved, what it cost in time (or "within
    noise"), and whether its gradients match the baseline's."""
    lang, loc = current_language(), babel_locale()
    base, best = baseline_and_best(results)
    if base is not None and len(results) == 1:  # the learner cleared every strategy
        st.info(t("Only the baseline (no checkpointing) was measured: pick a strategy above "
                  "to compare with it."), icon=":material/arrow_upward:")
    if base is None or best is None:
        return
    name = report.label(best, lang)
    saved = 1 - best.peak_bytes / base.peak_bytes
    cells = st.columns(4)
    peak_label = t("Peak memory: {strategy}", strategy=name)
    if round(saved, 2) == 0:  # a tiny model: no saving worth a signed percentage
        cells[0].metric(peak_label, format_bytes(best.peak_bytes, locale=loc),
                        delta=t("same as without checkpointing ({size})",
                                size=format_bytes(base.peak_bytes, locale=loc)),
                        delta_color="off", delta_arrow="off", help=t(PEAK_HELP))
    else:
        cells[0].metric(peak_label, format_bytes(best.peak_bytes, locale=loc),
                        delta=t("{change:.0%} vs no checkpointing ({size})", change=-saved,
                                size=format_bytes(base.peak_bytes, locale=loc)),
                        delta_color="inverse", help=t(PEAK_HELP))
    time_metric(cells[1], best, base)
    compute_metric(cells[2], best, base)
    gradient_metric(cells[3], best)


PEAK_HELP = N_("The highest point of the step, counted above the parameters, which every "
               "strategy holds alike (the stacked chart 'What memory holds at the peak' adds "
               "them back).")


def time_metric(cell: DeltaGenerator, result: StrategyResult, base: StrategyResult) -> None:
    """The cost in time of `result` against none's, by a measure the server's load does not
    move (timing.time_verdict): on a CPU the CPU time, its median in bold, a red delta only
    when it is slower beyond the spread of the runs, "within noise" (grey, no arrow)
    otherwise, never green; on a GPU the counted FLOPs. The wall time stands under it, as
    measured, with its spread."""
    loc, lang = babel_locale(), current_language()
    kind = device().kind
    verdict = timing.time_verdict(result, base, kind)
    if verdict.id == "unknown":
        return
    name = report.label(result, lang)
    if verdict.measure == "cpu":
        label = t("CPU time per step: {strategy}", strategy=name)
        value = format_ms(result.cpu_seconds, locale=loc)
        against = format_ms(base.cpu_seconds, locale=loc)
        if verdict.id == "slower" and verdict.ratio is not None:
            delta = t("{change:.0%} CPU time vs no checkpointing ({time})",
                      change=verdict.ratio - 1, time=against)
        elif verdict.id == "faster-noise":
            delta = t("measured lower than without checkpointing ({time}): timing noise",
                      time=against)
        else:
            delta = t("within noise of no checkpointing ({time})", time=against)
        color = "inverse" if verdict.id == "slower" else "off"
        cell.metric(label, value, delta=delta, delta_color=color,
                    delta_arrow="auto" if verdict.id == "slower" else "off",
                    help=t(CPU_TIME_HELP))
    else:
        label = t("Step time: {strategy}", strategy=name)
        delta = timing.time_vs_none_text(result, base, lang, kind)
        cell.metric(label, timing.time_text(result, lang), delta=delta,
                    delta_color="inverse" if verdict.id == "more-compute" else "off",
                    delta_arrow="auto" if verdict.id == "more-compute" else "off",
                    help=t(FLOPS_VERDICT_HELP))
    cell.caption(t("Wall time {time} (no checkpointing {base}), as measured: it grows with "
                   "the server's load; {course}",
                   time=timing.time_text(result, lang), base=timing.time_text(base, lang),
                   course=timing.course_rule_text(lang)))


def uncounted_text(lang: str) -> str:
    """Why torch's counter shows +0.0% for selective on a CPU, with the published figure
    that lesson 4 teaches (timing.counter_misses says when)."""
    from lessons.catalog import lesson
    from lessons.facts import KORTHIKANTI_SELECTIVE_EXTRA_FLOPS

    return gettext(lang, "not its real cost: on a CPU torch's FLOP counter skips the fused "
                         "attention kernel and the element-wise ops, which are all that "
                         "selective reruns here; Korthikanti et al. count {share} more FLOPs "
                         "on GPT-3 (lesson 4, \"{lesson}\")",
                   share=format_percent(KORTHIKANTI_SELECTIVE_EXTRA_FLOPS, lang, 1),
                   lesson=lesson("language-models").title_in(lang))


def compute_metric(cell: DeltaGenerator, result: StrategyResult, base: StrategyResult) -> None:
    """The extra compute of `result`'s whole step against none's, counted by torch's FLOP
    counter on this run, with the prediction and the course's rule beside it; for a
    selective strategy the counter cannot see, why (uncounted_text)."""
    lang = current_language()
    counted, predicted = timing.extra_compute(result, base)
    if counted is None:
        return
    if timing.counter_misses(result, base, device().kind):
        delta = t("counted {counted}: {why}", counted=timing.signed_percent(counted, lang),
                  why=uncounted_text(lang))
    else:
        delta = t("predicted {predicted}; {course}",
                  predicted=timing.signed_percent(predicted, lang)
                  if predicted is not None else "–",
                  course=timing.course_rule_text(lang))
    cell.metric(t("Extra compute: {strategy}", strategy=report.label(result, lang)),
                timing.signed_percent(counted, lang), delta=delta,
                delta_color="off", delta_arrow="off", help=t(COMPUTE_HELP))


COMPUTE_HELP = N_("FLOPs of the whole step (forward, loss, backward and the recomputation), "
                  "counted by torch.utils.flop_counter.FlopCounterMode on this run, against "
                  "the step without checkpointing. The same on any machine, however busy.")


CPU_TIME_HELP = N_("The CPU time this process spent on the step (all its threads), median of "
                   "the timed steps. Unlike wall time it does not grow when other learners' "
                   "runs take the cores, so the verdict is read from it: slower only when "
                   "each median lies outside the other's range (the middle half of the runs).")
FLOPS_VERDICT_HELP = N_("Median wall time of the timed steps, in brackets the middle half of "
                        "the runs. The verdict beside it is read from the FLOPs torch counted, "
                        "which no load moves.")


def parameters_note(comparison: Comparison) -> None:
    """Say what "peak memory" leaves out, so it squares with the stacked chart."""
    if comparison.parameter_bytes:
        st.caption(t("Peak memory and activations are counted above the parameters ({size} "
                     "here, the same for every strategy); the stacked chart below adds them "
                     "back.", size=format_bytes(comparison.parameter_bytes,
                                                locale=babel_locale())))


def gradient_metric(cell: DeltaGenerator, result: StrategyResult) -> None:
    """The 'Gradients vs no checkpointing' metric: the short badge, the full verdict on hover."""
    lang = current_language()
    cell.metric(t("Gradients vs no checkpointing"), gradient_badge(result, lang),
                help=gradient_match(result, lang))


def peak_explanations(results: Sequence[StrategyResult]) -> None:
    """Per strategy: where its peak is and which part of memory set it (from the run), and
    a note when several strategies reach the very same peak."""
    lang = current_language()
    lines = [line for line in (peak_notes.peak_sentence(r, lang) for r in results) if line]
    if not lines:
        return
    st.markdown("**" + t("Where the peak is, and what sets it") + "**")
    st.markdown("\n".join(f"- {line}" for line in lines))
    for note in peak_notes.shared_peak_notes(results, lang):
        st.info(note, icon=":material/info:")


# ---------------------------------------------------------------- refusals and notes

REFUSALS: dict[str, str] = {
    "budget": N_("the byte budget is too small for {layers} layers: even checkpointing every "
                 "layer needs more."),
    "device": N_("{strategy} needs a CUDA GPU; this device is {device}."),
    "limit": N_("refused before running: predicted {need} (parameters {params} + step peak "
                "{peak}) is over the limit of {limit}."),
    "oom": N_("out of memory on {device}."),
    "oom-timing": N_("out of memory while timing."),
    "model-oom": N_("the model itself ran out of memory on {device}."),
}


def refusal_text(result: StrategyResult) -> str:
    """The engine's refusal of a strategy, worded in the session's language from its id
    and numbers (demos.measure.refusal_of); the engine's own text when it has none."""
    from demos.measure import refusal_of

    found = refusal_of(result)
    if found is None:
        return str(result.error or "")
    kind, numbers = found
    loc = babel_locale()
    params = {k: format_bytes(v, locale=loc) if k in ("need", "params", "peak", "limit") else v
              for k, v in numbers.items()}
    return t(REFUSALS[kind], **params)


def show_refusals(results: Sequence[StrategyResult]) -> None:
    """Explain each strategy that did not fit (OOM or guard refusal)."""
    lang = current_language()
    for result in results:
        if not result.fits:
            st.warning(t("**{strategy}** does not fit: {reason}",
                         strategy=report.label(result, lang), reason=refusal_text(result)),
                       icon=":material/memory:")


def show_fit_notes(frame: pd.DataFrame, field: str) -> None:
    """Say why a strategy has no confirmed size (nothing fits, or the real run was over
    the budget), and when a size reached the search's upper limit, instead of leaving
    its row and bars blank or a cap unexplained."""
    from memory.config import LIMITS

    lang = current_language()
    name = fits_and_loss_tables.field_name(field, lang)
    cap = int(LIMITS[field][1])
    capped = [report.label_of(s, lang) for s, v in zip(frame["strategy"],
                                                        frame["value_predicted"], strict=True)
              if pd.notna(v) and int(v) >= cap]
    if capped:
        st.info(t("{strategies}: the search stops at the largest {name} the engine allows, "
                  "{cap:,}; the budget would allow more.", strategies=", ".join(capped),
                  name=name, cap=cap), icon=":material/vertical_align_top:")
    missing = frame[frame["value_confirmed"].isna()]
    if missing.empty:
        return
    if len(missing) == len(frame):
        st.warning(t("Nothing fits: not even the smallest {name} trains within this budget "
                     "with any strategy. Raise the budget or make the model smaller.",
                     name=name), icon=":material/block:")
    loc = babel_locale()
    smallest = int(LIMITS[field][0])
    for row in missing.itertuples():
        if pd.isna(row.value_predicted):
            reason = t("even {name} {smallest} needs {need}, over the budget of {budget}",
                       name=name, smallest=smallest,
                       need=format_bytes(row.predicted_total_bytes, locale=loc),
                       budget=format_bytes(row.budget_bytes, locale=loc))
        else:
            reason = t("the real run at {name} {value:,} measured over the budget",
                       name=name, value=int(row.value_predicted))
        st.caption(f":material/block: **{report.label_of(row.strategy, lang)}**: {reason}.")


def measured_caption(device_label: str, methods: Sequence[str], extra: str = "") -> None:
    """'Measured on CPU (...) by <method>' under every demo."""
    # A strategy that did not run has no method (None, or NaN in a frame): skip it.
    unique = ", ".join(t(m) for m in dict.fromkeys(m for m in methods
                                                    if isinstance(m, str) and m))
    st.caption(":material/science: " + t("Measured on this run on **{device}** by {methods}.",
                                         device=device_label,
                                         methods=unique or t("the engine"))
               + (f" {extra}" if extra else ""))


def comparison_caption(comparison: Comparison) -> None:
    """How the results were measured: the timing, wall against CPU time, and the counted
    compute beside the prediction and the course's rule."""
    lang = current_language()
    methods = [r.measured_by for r in comparison.results]
    measured_caption(device_text(comparison.device), methods,
                     timing_note(comparison.results, lang, comparison.device.kind))
    for text in (timing.wall_cpu_note(comparison.results, comparison.busy(), lang),
                 timing.overhead_note(comparison.results, lang, comparison.device.kind)):
        note(text)


def paint_numbers_first() -> None:
    """Call between a demo's numbers and its charts.

    The browser draws the elements of a script run that arrive together in one go, and
    on a session's first chart Plotly's library has to load (about a second on a small
    CPU), holding the whole batch back: the numbers would wait for the charts. A short
    pause, once per session, lets the numbers reach the screen first. Measured on this
    2-core machine (a new session opening Compare on a warm server, the browser on the same
    machine), first numbers at a median of 3.2 s with a 0.3 s pause (the batch of charts
    caught up with them), 2.2 s with 0.6 s and 1.8 s with 1.0 s.
    Later runs draw the charts with the library already loaded, so they skip the pause,
    and so does a stand-in view (the previous result, the run's result so far), and a run
    with no browser behind it (no request headers: AppTest, the server drawing its common
    views once before it listens, where the pause took a second per view)."""
    if (view_phase() is None and not st.session_state.get("_charts_drawn")
            and st.context.headers):
        st.session_state["_charts_drawn"] = True
        time.sleep(NUMBERS_FIRST_PAUSE_S)


def _csv(data: Comparison | pd.DataFrame, lang: str) -> bytes:
    frame = data.to_frame() if isinstance(data, Comparison) else data
    return report.csv_frame(frame, lang).to_csv(index=False).encode()


def download(data: Comparison | pd.DataFrame, name: str) -> None:
    """The results as CSV, column names in the session's language (made once per result
    and language). None for a stand-in view: only a finished result is offered."""
    if view_phase() is not None:
        return
    csv = shared("csv", (name, fingerprint(data)), lambda lang: _csv(data, lang))
    st.download_button(t("Download the results (CSV)"), csv,
                       file_name=f"{name}.csv", mime="text/csv", on_click="ignore",
                       icon=":material/download:", key=f"download-{name}")


def downloads(frame: pd.DataFrame, name: str,
              snapshot: tuple[list[tuple[str, list[list] | None]], int], what: str) -> None:
    """A results table as CSV and, for its runs that kept the tracker's event log
    (`snapshot`: the runs and the parameter bytes, from reports.memory_snapshot), as
    torch's memory snapshot; `what` says which runs the snapshot holds."""
    download(frame, name)
    snapshot_button(*snapshot, name, fingerprint(frame), what)


def download_snapshot(comparison: Comparison, name: str) -> None:
    """This comparison as torch's memory snapshot, one step per strategy."""
    from reports.memory_snapshot import comparison_runs

    snapshot_button(comparison_runs(comparison), comparison.parameter_bytes or 0, name,
                    fingerprint(comparison))


def snapshot_button(runs: list[tuple[str, list[list] | None]], parameter_bytes: int,
                    name: str, key: Hashable, what: str | None = None) -> None:
    """Measured runs as torch's memory snapshot (reports.memory_snapshot), for
    PyTorch's memory viewer; only finished runs with the tracker's event log are offered.
    `what`: a caption that says which of the page's runs the snapshot holds."""
    from reports.memory_snapshot import snapshot_pickle

    if view_phase() is not None or not any(events for _, events in runs):
        return
    data = shared("snapshot", (name, key), lambda lang: snapshot_pickle(runs, parameter_bytes))
    st.download_button(t("Download the memory snapshot (PyTorch's format)"), data,
                       file_name=f"{name}-snapshot.pickle", mime="application/octet-stream",
                       on_click="ignore", icon=":material/memory:", key=f"snapshot-{name}")
    if what:
        st.caption(what)
    st.caption(t("Built from the tensors the lab tracked in these steps, one after another. "
                 "Drop it on PyTorch's memory viewer (pytorch.org/memory_viz) beside a snapshot of "
                 "your own run on a GPU: torch.cuda.memory._record_memory_history(), your "
                 "step, then torch.cuda.memory._dump_snapshot(\"my_snapshot.pickle\")."))


def theory_notes(config: ModelConfig) -> None:
    """Why this model's measured bytes differ from the published formula."""
    from memory.theory import explain_differences

    with st.expander(t("Why the measurement differs from Korthikanti et al.'s 34·s·b·h")):
        st.markdown(explain_differences(config, device().kind, current_language()))


def table(frame: pd.DataFrame) -> None:
    """A table that fits a phone: the columns wrap, and a wide one scrolls sideways."""
    st.table(frame, hide_index=True, border="horizontal")


def note(text: str) -> None:
    """A caption that says what a chart shows (empty text: nothing)."""
    if text:
        st.caption(text)



# id(result) -> (a weak reference to it, its fingerprint): the runner hands every session
# the same result object, so its fingerprint is worked out once.
_fingerprints: dict[int, tuple[weakref.ref, str]] = {}


def fingerprint(data: Comparison | pd.DataFrame) -> str:
    """What identifies a measured result for the figure cache: the numbers themselves, so
    a re-measured config (other step times) never shows an old figure."""
    known = _fingerprints.get(id(data))
    if known is not None and known[0]() is data:
        return known[1]
    if isinstance(data, Comparison):
        text = repr([(r.strategy, r.fits, r.peak_bytes, r.activation_bytes,
                      r.step_seconds_runs, len(r.timeline or ())) for r in data.results])
    else:
        text = data.to_csv(index=False)
    found = hashlib.sha1(text.encode()).hexdigest()
    key = id(data)
    _fingerprints[key] = (weakref.ref(data, lambda _: _fingerprints.pop(key, None)), found)
    return found
