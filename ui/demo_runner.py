"""The one place the demo pages run the engine: the Streamlit side of `serving.service`.

* The queue, the result store and the worker process belong to the server process
  (`serving.service.get_service()`), not to a Streamlit cache: a client's "clear cache"
  message cannot empty or replace them.
* A result anyone measured before (this server, another one on the same database, or
  before a restart) shows at once; the same request from several learners waits for one
  run.
* Before a run: its estimated time; above SLOW_SECONDS a click, above MAX_SECONDS a
  refusal. While waiting: the place in the queue and an estimate; while running: progress,
  the time left and a Cancel button. Leaving the page (or a new slider value) gives the
  run up; when nobody waits for it any more it is cancelled.
* A page that hands its drawing over (`show=`) never goes blank: while a new result is
  waited for (or waits for "Run it anyway") the previous one stays, dimmed and labelled
  with the settings it was measured for; what the run measured so far replaces it as
  soon as it comes (a comparison's memory first, then its times round by round, the
  ranges narrowing), and the finished result replaces that. A comparison asked with
  `predict=` shows the memory model's peaks at once, marked predicted, until its memory
  is measured (ui.demo_standins).

A `ConfigError` (an invalid combination such as hidden 320 with 3 heads) is shown with
`st.error` and the page keeps serving; an out-of-memory error or a guard refusal comes
back from the engine as a result with `fits=False` and is explained on the page
(ui.demo_display). The widgets are in ui.demo_controls, the tables in reports
(report, timing, compare_table, peak_notes, fits_and_loss_tables).
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from demos.device import DeviceInfo
from demos.measure import PAGE_REPEATS
from demos.results import Comparison
from i18n import N_
from i18n.numbers import format_decimal, format_number
from i18n.units import format_bytes
from memory.config import ConfigError, ModelConfig
from memory.strategies import StrategySpec
from memory.strategies import title as strategy_title
from serving.budget_example import BudgetExample, stored_example
from serving.jobs import Job
from serving.service import DemoService, get_service, note_learner
from serving.tickets import RunRefused, Ticket
from ui import demo_standins as standins
from ui.demo_status import duration_text, show_status
from ui.i18n import babel_locale, current_language, t

POLL_SECONDS = 0.25
# A run whose first result comes within this long is drawn at once: no dimmed previous
# result in between (the browser would draw every chart twice for a blink of it).
QUICK_SECONDS = 0.6
# The times of a comparison come round by round: redrawn at most this often (each drawing
# takes CPU from the timed steps; at the default they draw once, all measured).
REDRAW_SECONDS = 2.5
_CANCELLED = "_cancelled_demo_runs"
# Set (by ui.server's warm-up) to list the jobs a page would run instead of running them.
COLLECT_ENV = "DEMO_RUNNER_COLLECT"
# Set (by ui.server while it draws the common views once) to draw a run's result, or what
# it measured so far, without waiting for the rest or joining the run.
DRAW_ONCE_ENV = "DEMO_RUNNER_DRAW_ONCE"
collected: list[Job] = []


# ---------------------------------------------------------------- device

def service() -> DemoService:
    """This server process's demo service (started on first use)."""
    return get_service()


def learner_arrives() -> None:
    """A page run for a learner begins (the router calls this first): the background
    runs on the device give way before the page draws. The server's own drawing and the
    warm-up's listing of the views' runs are no learner."""
    if not (os.environ.get(DRAW_ONCE_ENV) or os.environ.get(COLLECT_ENV)):
        note_learner()


def device() -> DeviceInfo:
    """The device the live demos run on, detected once per server process."""
    if os.environ.get(COLLECT_ENV):
        return _collect_device()
    return service().device


@functools.cache
def _collect_device() -> DeviceInfo:
    from demos.device import detect_device

    return detect_device()


def device_noun(kind: str | None = None) -> str:
    return "GPU" if (kind or device().kind) == "cuda" else "CPU"


# ---------------------------------------------------------------- long runs

# Above this estimate a run asks for a click first (DEMO_ASK_SECONDS sets it for a server).
SLOW_SECONDS = float(os.environ.get("DEMO_ASK_SECONDS", "20"))
MAX_SECONDS = 900.0  # above this no click runs it (the biggest compare on a CPU still can)


def estimated_seconds(job: Job) -> float:
    """Seconds the run will hold this device: the theory's CPU estimate scaled by what
    this device measured before."""
    return service().estimate(job)


def confirm_long_run(seconds: float, what: str) -> bool:
    """Below SLOW_SECONDS: go. Above: say how long it would take, while everyone else on
    this device waits, and run only after a click (remembered for this session). Above
    MAX_SECONDS: refuse; no click starts a run that would hold a shared server for hours."""
    if seconds <= SLOW_SECONDS:
        return True
    noun = device_noun()
    if seconds > MAX_SECONDS:
        st.error(t("This would take roughly {duration} on this {device}, longer than a demo "
                   "may hold a shared server (at most {limit}). Make the model or the batch "
                   "smaller: the lesson is the same.", duration=duration_text(seconds),
                   device=noun, limit=duration_text(MAX_SECONDS)), icon=":material/block:")
        return False
    confirmed: list[str] = st.session_state.setdefault("_confirmed_long_runs", [])
    if what in confirmed:
        return True
    notice = st.empty()
    with notice.container():
        st.warning(t("This would take roughly {duration} on this {device}, and other "
                     "learners' demos take turns with it meanwhile. Smaller sliders give the "
                     "same lesson faster.", duration=duration_text(seconds), device=noun),
                   icon=":material/timer:")
        clicked = st.button(t("Run it anyway (~{duration})", duration=duration_text(seconds)),
                            key=f"confirm-{what}")
    if clicked:
        notice.empty()
        confirmed.append(what)
    return clicked


# ---------------------------------------------------------------- what stays on the page

Show = Callable[[Any], None]
_PREVIOUS = "_demo_previous_results"
_phase: ContextVar[str | None] = ContextVar("demo_view_phase", default=None)
# The settings a previous result is labelled with (the slider labels, translated where
# shown); `seed` and `kv_heads` have no control.
SETTING_LABELS: dict[str, str] = {
    "layers": N_("Layers"), "hidden": N_("Hidden size"), "heads": N_("Attention heads"),
    "seq_len": N_("Sequence length"), "batch": N_("Batch"), "vocab": N_("Vocabulary"),
    "dtype": N_("Number format"), "arch": N_("Layer architecture"), "dropout": N_("Dropout"),
}
OPTION_LABELS: dict[str, str] = {"steps": N_("Training steps"), "vary": N_("Grow"),
                                 "shape": N_("Layer widths"),
                                 "budget_percent": N_("Budget (percent of the plain peak)")}
# an option's values that are words, as the label shows them
OPTION_VALUES: dict[str, dict[str, str]] = {
    "shape": {"equal": N_("equal"), "unequal": N_("unequal")}}


@dataclass(frozen=True)
class _Shown:
    """The last result a page drew in this session: what to draw it with, for which job."""

    show: Show
    job: Job
    result: Any


def view_phase() -> str | None:
    """None while a page draws its finished result; else "previous" (the dimmed last
    result) or "partial-<n>" (what is measured so far): ui.demo_display then skips the
    downloads and the pause, and keys its charts by the phase (one script run may draw a
    page's view several times)."""
    return _phase.get()


@contextlib.contextmanager
def _drawing(phase: str | None) -> Iterator[None]:
    token = _phase.set(phase)
    try:
        yield
    finally:
        _phase.reset(token)


def _page_of(show: Show) -> str:
    return f"{show.__module__}.{show.__qualname__}"


def _remember_shown(show: Show, job: Job, result: Any) -> None:
    st.session_state.setdefault(_PREVIOUS, {})[_page_of(show)] = _Shown(show, job, result)


def _value_text(value: Any, lang: str) -> str:
    if isinstance(value, bool | str):
        return str(value)
    if isinstance(value, int):
        return format_number(value, lang)
    if isinstance(value, float):
        return format_decimal(value, lang)
    return str(value)


def settings_text(old: Job, new: Job, lang: str) -> str:
    """The settings `old` was run with that differ from `new`'s: "Vocabulary 8,192,
    Layers 12" (its strategies when they differ); every model setting when none does."""
    old_config, new_config = old.config.as_dict(), new.config.as_dict()
    changed = [name for name in SETTING_LABELS if old_config[name] != new_config[name]]
    parts = [f"{t(SETTING_LABELS[name])} {_value_text(old_config[name], lang)}"
             for name in changed]
    for name, label in OPTION_LABELS.items():
        if old.option(name) != new.option(name) and old.option(name) is not None:
            value = OPTION_VALUES.get(name, {}).get(old.option(name))
            parts.append(f"{t(label)} "
                         f"{t(value) if value else _value_text(old.option(name), lang)}")
    if old.option("budget_bytes") != new.option("budget_bytes") and old.option("budget_bytes"):
        parts.append(t("budget {size}", size=format_bytes(int(old.option("budget_bytes")),
                                                          locale=babel_locale())))
    if old.strategies != new.strategies:
        parts.append(", ".join(strategy_title(s, lang) for s in old.strategies))
    if not parts:
        parts = [f"{t(SETTING_LABELS[name])} {_value_text(old_config[name], lang)}"
                 for name in ("layers", "hidden", "heads", "seq_len", "batch", "vocab")]
    return "; ".join(parts)


DIM_CSS = """<style>
[class*="st-key-demo-previous"] { opacity: 0.45; filter: grayscale(0.7); }
</style>"""


def _show_previous(show: Show | None, job: Job) -> bool:
    """Draw the page's last result dimmed, labelled with its settings; False if none."""
    if show is None:
        return False
    shown: _Shown | None = st.session_state.get(_PREVIOUS, {}).get(_page_of(show))
    if shown is None or shown.job == job:
        return False
    st.caption(":material/history: " + t(
        "Previous result ({settings}), shown dimmed until the new one is ready.",
        settings=settings_text(shown.job, job, current_language())))
    st.html(DIM_CSS)
    with st.container(key="demo-previous"), _drawing("previous"):
        shown.show(shown.result)
    return True


# ---------------------------------------------------------------- running and waiting

def _requester() -> str:
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "script"


def _mark_cancelled(key: str) -> None:
    st.session_state.setdefault(_CANCELLED, set()).add(key)


def _unmark_cancelled(key: str) -> None:
    st.session_state.setdefault(_CANCELLED, set()).discard(key)


def _show_failure(ticket: Ticket) -> None:
    error = ticket.error
    assert error is not None
    if error.reason == "config":
        st.error(t("This configuration cannot run: {error}", error=error.detail),
                 icon=":material/block:")
    elif error.reason == "time-limit":
        st.error(t("The run was stopped after {limit}, the time limit of a demo on this "
                   "server. Make the model or the batch smaller: the lesson is the same.",
                   limit=duration_text(error.numbers.get("cap", MAX_SECONDS))),
                 icon=":material/timer_off:")
    elif error.reason == "memory-limit":
        locale = babel_locale()
        st.error(t("The run was stopped: it took {used} of memory, more than the {bound} "
                   "its prediction allows.",
                   used=format_bytes(int(error.numbers.get("used", 0)), locale=locale),
                   bound=format_bytes(int(error.numbers.get("bound", 0)), locale=locale)),
                 icon=":material/memory:")
    elif error.reason == "cancelled":
        st.info(t("The run was cancelled."), icon=":material/cancel:")
    else:
        st.error(t("The run failed: {error}", error=error.detail or error.reason),
                 icon=":material/error:")


def _run(job: Job, what: str | None = None, show: Show | None = None,
         predict: bool = False) -> Any:
    """The job's result (shown at once when known), or None with the reason on the page.
    `what` names the run in this session's state and widget keys (default: the job).
    `show(result)` draws a result: given, the runner draws it (the finished result, and
    meanwhile the previous one dimmed and the run's result so far); `predict`: a
    comparison's predicted peaks show at once above the previous one until it lands."""
    collecting = bool(os.environ.get(COLLECT_ENV))
    kind = _collect_device().kind if collecting else service().device.kind
    try:
        job.config.validated(kind)  # the job's strategies are records, checked when made
    except ConfigError as error:
        st.error(t("This configuration cannot run: {error}",
                   error=error.text(current_language())),
                 icon=":material/block:")
        return None
    if collecting:  # listed for the warm-up: an invalid combination is not (nothing runs)
        collected.append(job)
        return None
    svc = service()
    if os.environ.get(DRAW_ONCE_ENV):  # the server's own drawing: no learner is waiting
        return _draw_once(svc, job, show)
    svc.touch()  # a learner is here (the router says so first; AppTest runs a page alone)
    result = svc.cached(job)
    if result is not None:
        return _finished(job, result, show)
    what = what or repr(job)
    # A run already under way (the warm-up's, another learner's) is joined without the
    # long run's click: it adds no work, and its numbers so far show at once.
    if not svc.in_progress(job) and not confirm_long_run(estimated_seconds(job), what):
        _show_previous(show, job)
        return None
    if what in st.session_state.get(_CANCELLED, set()):
        st.info(t("The run was cancelled."), icon=":material/cancel:")
        st.button(t("Run it again"), key=f"again-{what}", on_click=_unmark_cancelled,
                  args=(what,))
        _show_previous(show, job)
        return None
    try:
        ticket = svc.submit(job, _requester())
    except RunRefused as refused:
        locale = babel_locale()
        st.error(t("Refused before running: this run needs about {need} of memory, more than "
                   "a demo may take on this server ({limit}). Make the model, the batch or "
                   "the budget smaller.",
                   need=format_bytes(int(refused.numbers["need_bytes"]), locale=locale),
                   limit=format_bytes(int(refused.numbers["limit_bytes"]), locale=locale)),
                 icon=":material/block:")
        return None
    view = None
    if not ticket.done:
        view = _wait(ticket, what, show, job, predict)
    if ticket.error is not None:
        if view is not None:
            view.empty()
        _show_failure(ticket)
        return None
    return _finished(job, ticket.result, show, view)


def _draw_once(svc: DemoService, job: Job, show: Show | None) -> Any:
    """The result when it is known, else the numbers measured so far drawn (the charts'
    and tables' first drawing in this process) and None; nothing is run or joined."""
    result = svc.cached(job)
    if result is not None:
        return _finished(job, result, show)
    partial = svc.partial_of(job)
    if show is not None and partial is not None:
        with _drawing("partial-1"):
            show(partial)
    return None


def _finished(job: Job, result: Any, show: Show | None, view: _Turns | None = None) -> Any:
    """Draw the finished result (in place of what stood in for it) and remember it as the
    page's previous result."""
    if view is not None:
        view.empty()
    if show is not None:
        _remember_shown(show, job, result)
        show(result)
    return result


class _Turns:
    """Two placeholders drawn in turn, the one drawn before emptied. One placeholder emptied
    and drawn again at once would reach the browser as a block over a block (Streamlit
    composes the two messages), and the browser keeps the old block's extra elements under
    the new ones: the previous result's charts beside the new run's numbers."""

    def __init__(self) -> None:
        self._places = (st.empty(), st.empty())
        self._turn = 1

    def next(self) -> Any:
        """A container in place of the last one drawn."""
        self._places[self._turn].empty()
        self._turn ^= 1
        return self._places[self._turn].container()

    def empty(self) -> None:
        for place in self._places:
            place.empty()


def _wait(ticket: Ticket, what: str, show: Show | None = None, job: Job | None = None,
          predict: bool = False) -> _Turns:
    """Show the place, the estimate and progress until the run ends, with the previous
    result dimmed below, replaced by the run's result so far as it comes. Leaving the
    page stops this script at its next element update: the ticket is released, and a run
    nobody waits for any more is cancelled. Returns the placeholders of the view."""
    box = st.empty()
    view = _Turns()
    shown_version, drawn_at, status = 0, 0.0, None
    try:
        with box.container():
            notice = st.empty()
            st.button(t("Cancel"), key=f"cancel-{what}", icon=":material/cancel:",
                      on_click=_mark_cancelled, args=(what,))
        # The prediction draws at once (`predict`); numbers so far (a run under way,
        # joined) too; else the result or the first numbers within QUICK_SECONDS replace
        # the previous result directly.
        predict = (predict and show is not None and job is not None
                   and job.kind == "compare" and not ticket.has_numbers)
        if predict:
            with view.next():
                standins.show_prediction(job, device().kind, 1)
        quick = ticket.wait_numbers(QUICK_SECONDS)
        if show is not None and job is not None and not quick:
            with view.next():
                if predict:
                    standins.show_prediction(job, device().kind, 2)
                _show_previous(show, job)
        while not ticket.done:
            version, partial = ticket.partial
            now = time.monotonic()
            if (show is not None and job is not None and partial is not None
                    and version != shown_version
                    and (shown_version == 0 or now - drawn_at >= REDRAW_SECONDS)):
                shown_version, drawn_at = version, now
                with view.next(), _drawing(f"partial-{version}"):
                    st.caption(":material/pending: " + standins.partial_caption(job, partial))
                    show(partial)
            # The first numbers draw as soon as they come; later ones at most every
            # REDRAW_SECONDS (polled).
            if shown_version == 0 and partial is None:
                ticket.wait_numbers(POLL_SECONDS)
            else:
                ticket.wait(POLL_SECONDS)
            if ticket.done:
                break
            status = show_status(ticket, notice, device_noun(), status)
    finally:
        ticket.release()
        box.empty()
    return view


# ---------------------------------------------------------------- the pages' calls

def compare_job(config: ModelConfig, strategies: Sequence[StrategySpec], *,
                timeline: bool = False, time_steps: bool = True, repeats: int | None = None,
                device_kind: str | None = None) -> Job:
    """The compare run a page makes (repeats: this device's page default)."""
    reps = repeats or PAGE_REPEATS.get(device_kind or device().kind, 3)
    return Job.make("compare", config, strategies, repeats=reps, timeline=timeline,
                    time_steps=time_steps)


def run_compare(config: ModelConfig, strategies: Sequence[StrategySpec], *,
                timeline: bool = False, time_steps: bool = True, repeats: int | None = None,
                show: Show | None = None, predict: bool = False) -> Comparison | None:
    """Comparison of one training step per strategy, or None; `predict`: while a new one
    is measured, the memory model's peaks show at once, marked predicted."""
    job = compare_job(config, strategies, timeline=timeline, time_steps=time_steps,
                      repeats=repeats)
    return _run(job, show=show, predict=predict)


def run_sweep(base: ModelConfig, vary: str, values: Sequence[int],
              strategies: Sequence[StrategySpec], *, repeats: int = 3,
              show: Show | None = None) -> pd.DataFrame | None:
    job = Job.make("sweep", base, strategies, vary=vary, values=tuple(values), repeats=repeats)
    return _run(job, show=show)


def run_fits(base: ModelConfig, strategies: Sequence[StrategySpec], vary: str,
             budget_bytes: int, *, show: Show | None = None) -> pd.DataFrame | None:
    job = Job.make("fits", base, strategies, vary=vary, budget_bytes=int(budget_bytes))
    return _run(job, show=show)


def run_training(config: ModelConfig, strategies: Sequence[StrategySpec], steps: int, *,
                 show: Show | None = None) -> pd.DataFrame | None:
    job = Job.make("train", config, strategies, steps=steps)
    return _run(job, show=show)


def collecting() -> bool:
    """True while the start-up warm-up lists the runs pages would make (nothing runs)."""
    return bool(os.environ.get(COLLECT_ENV))


def budget_result(job: Job) -> pd.DataFrame | None:
    """A compiler-budget sweep's result when this server or the store has it, else None
    (nothing is started). Never collected for the start-up warm-up: every point compiles
    the model (tens of seconds each), which would hold the device while learners arrive."""
    if os.environ.get(COLLECT_ENV):
        return None
    return service().cached(job)


def budget_example(job: Job) -> BudgetExample | None:
    """The stored example of a compiler-budget sweep (the benchmark's own figures) when
    `job` asks what the benchmark measured, else None: shown, marked, until this server
    measured it (serving.budget_example)."""
    return stored_example(job)


def run_budget(job: Job) -> pd.DataFrame | None:
    """Measure a compiler-budget sweep now (the learner asked for it with a click that
    showed its estimate): wait for it with progress and a Cancel button."""
    confirmed: list[str] = st.session_state.setdefault("_confirmed_long_runs", [])
    if repr(job) not in confirmed:
        confirmed.append(repr(job))
    return _run(job)


def run_mistake(case_id: str) -> Any:
    """One case of the lab of mistakes (demos.mistakes): its CaseResult, or None. Each
    case is a short CPU run of its own small models, stored for everyone once measured."""
    from demos.mistakes import CASE_CONFIG

    job = Job.make("mistakes", CASE_CONFIG, (), cases=(case_id,))
    result = _run(job, what=f"mistake-{case_id}")
    return result[0] if result else None


def run_pictures(job: Job) -> pd.DataFrame | None:
    """One part of the /pictures page's measurement (a "pictures" job: serving
    .picture_jobs), as its table, or None with the reason on the page. Each is a short run
    of a tiny image model in the device's worker, stored for everyone once measured."""
    what = "pictures-" + "-".join(f"{name}={value}" for name, value in job.options)
    return _run(job, what=what)


def run_toolbox(job: Job) -> pd.DataFrame | None:
    """One of lesson 10's measurements (a "toolbox" job: serving.toolbox_jobs), asked for
    with a click: its table, or None with the reason on the page. A short CPU run of tiny
    models in the device's worker, stored for everyone once measured."""
    what = "toolbox-" + "-".join(f"{name}={value}" for name, value in job.options)
    return _run(job, what=what)


def run_placement(job: Job, show: Show | None = None) -> Any:
    """Every checkpoint placement method for a budget, run for real (a "placement" job:
    serving.placement_jobs): its demos.placement_lab.PlacementRun, or None with the reason
    on the page. `show` draws it (and the previous result, dimmed, while a new one runs)."""
    what = "placement-" + "-".join(f"{name}={value}" for name, value in job.options)
    return _run(job, what=f"{what}-layers={job.config.layers}", show=show)


def cached(job: Job) -> Any:
    """A job's result when this server or the store has it, else None (nothing is
    started; None while the start-up warm-up lists the pages' runs)."""
    if os.environ.get(COLLECT_ENV):
        return None
    return service().cached(job)
