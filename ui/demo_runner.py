"""The one place the demo pages run the engine.

* One run at a time per device: a `DeviceQueue` held by `st.cache_resource`; a learner
  who has to wait sees "Waiting for the CPU (2 ahead)" instead of a frozen page.
* Results are cached per config with `st.cache_data(max_entries=...)`: a config seen
  before (by anyone) shows at once. Only plain records are cached, never tensors.
* A run that would take long on a CPU waits for a click (estimated_seconds,
  confirm_long_run).

A `ConfigError` (an invalid combination such as hidden 320 with 3 heads) is shown with
`st.error` and the page keeps serving; an out-of-memory error or a guard refusal comes
back from the engine as a result with `fits=False` and is explained on the page
(ui.demo_display). The widgets are in ui.demo_controls, the tables in demos.report.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import pandas as pd
import streamlit as st

from demos.config import ConfigError, ModelConfig
from demos.device import DeviceInfo, DeviceQueue, detect_device
from demos.measure import PAGE_REPEATS
from demos.results import Comparison, FitResult
from demos.theory import TRACKED_STEP_COST, cpu_seconds

CACHE_ENTRIES = 64
T = TypeVar("T")


# ---------------------------------------------------------------- device, queue


@st.cache_resource
def device() -> DeviceInfo:
    """The device the live demos run on, detected once per server process."""
    return detect_device()


def device_noun(kind: str | None = None) -> str:
    return "GPU" if (kind or device().kind) == "cuda" else "CPU"


@st.cache_resource
def device_queue() -> DeviceQueue:
    """The one queue every session shares: demos run one at a time per device."""
    return DeviceQueue()


@contextmanager
def device_turn(kind: str) -> Iterator[None]:
    """Hold the device; while others are ahead, say so on the page.

    Called inside the cached functions: the notice is created there too, and emptied at
    the end, so replaying a cached result leaves nothing behind."""
    noun = device_noun(kind)
    notice = st.empty()

    def on_wait(ahead: int) -> None:
        notice.info(f"Waiting for the {noun} ({ahead} ahead)…", icon=":material/hourglass:")

    try:
        with device_queue().turn(on_wait=on_wait):
            notice.empty()
            yield
    finally:
        notice.empty()


@contextmanager
def progress_bar(start: str, template: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar for the engine's progress(done, total) callback, `template` naming
    done and total; emptied at the end, so a replayed cached result leaves nothing."""
    bar = st.progress(0.0, text=start)

    def progress(done: int, total: int) -> None:
        bar.progress(min(done / max(total, 1), 1.0), text=template.format(done=done, total=total))

    try:
        yield progress
    finally:
        bar.empty()


def _config_key(config: ModelConfig) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(dataclasses.asdict(config).items()))


# ---------------------------------------------------------------- cached engine calls


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner=False)
def _compare(config_key: tuple, strategies: tuple[str, ...], kind: str, repeats: int,
             timeline: bool, time_steps: bool) -> Comparison:
    from demos.measure import compare

    config = ModelConfig(**dict(config_key))
    with device_turn(kind):
        return compare(config, list(strategies), device=kind, repeats=repeats,
                       timeline=timeline, time_steps=time_steps)


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner=False)
def _sweep(config_key: tuple, vary: str, values: tuple, strategies: tuple[str, ...],
           kind: str, repeats: int) -> pd.DataFrame:
    from demos.sweep import sweep

    base = ModelConfig(**dict(config_key))
    with progress_bar("Sweeping…", "Measured {done} of {total} points") as progress, \
            device_turn(kind):
        return sweep(base, vary, list(values), list(strategies), device=kind,
                     repeats=repeats, progress=progress)


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner=False)
def _fits(config_key: tuple, strategies: tuple[str, ...], vary: str, budget_bytes: int,
          kind: str) -> pd.DataFrame:
    from demos.fit import largest_fitting

    base = ModelConfig(**dict(config_key))
    bar = st.progress(0.0, text="Searching…")
    rows = []
    try:
        with device_turn(kind):
            for number, strategy in enumerate(strategies):
                bar.progress(number / len(strategies),
                             text=f"Finding the largest {vary} for {strategy}…")
                found = largest_fitting(base, strategy, vary, budget_bytes, device=kind,
                                        confirm=True)
                rows.append({"strategy": strategy, "vary": vary, "budget_bytes": budget_bytes,
                             **_record(found)})
    finally:
        bar.empty()
    return pd.DataFrame(rows)


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner=False)
def _train(config_key: tuple, strategies: tuple[str, ...], steps: int, kind: str
           ) -> pd.DataFrame:
    from demos.training import train_losses

    config = ModelConfig(**dict(config_key))
    with progress_bar("Training…", "Trained {done} of {total} steps") as progress, \
            device_turn(kind):
        return train_losses(config, list(strategies), steps, progress=progress)


def _record(result: FitResult) -> dict[str, Any]:
    return dataclasses.asdict(result)


def _guarded(run: Callable[[], T]) -> T | None:
    """Run an engine call; an invalid config is shown (not raised) and gives None."""
    try:
        return run()
    except ConfigError as error:
        st.error(f"This configuration cannot run: {error}", icon=":material/block:")
        return None


# ---------------------------------------------------------------- long runs on a CPU

SLOW_SECONDS = 20.0
MAX_SECONDS = 900.0  # above this no click runs it (the biggest compare on a CPU still can)


def estimated_seconds(runs: Sequence[tuple[ModelConfig, str, int]]) -> float:
    """Rough seconds for (config, strategy, steps) runs on this device: the CPU estimate
    of demos.theory, 0 on a GPU (fast enough not to ask)."""
    return 0.0 if device().kind == "cuda" else cpu_seconds(runs)


def duration_text(seconds: float) -> str:
    """'35 s', '12 min', '5.1 hours': a rough duration a learner can read at a glance."""
    if seconds < 100:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} hours"


def confirm_long_run(seconds: float, what: str) -> bool:
    """Below SLOW_SECONDS: go. Above: say how long it would take, while everyone else on
    this CPU waits, and run only after a click (remembered for this session). Above
    MAX_SECONDS: refuse; no click starts a run that would hold a shared CPU for hours."""
    if seconds <= SLOW_SECONDS:
        return True
    if seconds > MAX_SECONDS:
        st.error(f"This would take roughly {duration_text(seconds)} on this CPU, longer than "
                 f"a demo may hold a shared server (at most {duration_text(MAX_SECONDS)}). "
                 "Make the model or the batch smaller: the lesson is the same.",
                 icon=":material/block:")
        return False
    confirmed: list[str] = st.session_state.setdefault("_confirmed_long_runs", [])
    if what in confirmed:
        return True
    notice = st.empty()
    with notice.container():
        st.warning(f"This would take roughly {duration_text(seconds)} on this CPU, and other "
                   "learners' demos wait meanwhile. Smaller sliders give the same lesson "
                   "faster.", icon=":material/timer:")
        clicked = st.button(f"Run it anyway (~{duration_text(seconds)})",
                            key=f"confirm-{hash(what)}")
    if clicked:
        notice.empty()
        confirmed.append(what)
    return clicked


def run_compare(config: ModelConfig, strategies: Sequence[str], *, timeline: bool = False,
                time_steps: bool = True, repeats: int | None = None) -> Comparison | None:
    """Comparison of one training step per strategy (cached per config), or None."""
    kind = device().kind
    reps = repeats or PAGE_REPEATS.get(kind, 3)
    steps = TRACKED_STEP_COST + (reps if time_steps else 0)
    estimate = estimated_seconds([(config, s, steps) for s in strategies])
    if not confirm_long_run(estimate, f"compare {config} {strategies} {timeline}"):
        return None
    with st.spinner(f"Running one training step per strategy on the {device_noun(kind)}…",
                    show_time=True):
        return _guarded(lambda: _compare(_config_key(config), tuple(strategies), kind, reps,
                                         timeline, time_steps))


def run_sweep(base: ModelConfig, vary: str, values: Sequence[int], strategies: Sequence[str],
              *, repeats: int = 3) -> pd.DataFrame | None:
    kind = device().kind
    runs = []
    for value in values:
        config = base if vary == "k" else base.replace(**{vary: value})
        names = [f"every-k:{value}"] if vary == "k" else strategies
        runs += [(config, name, TRACKED_STEP_COST + repeats) for name in names]
    if not confirm_long_run(estimated_seconds(runs), f"sweep {base} {vary} {values}"):
        return None
    return _guarded(lambda: _sweep(_config_key(base), vary, tuple(values), tuple(strategies),
                                   kind, repeats))


def run_fits(base: ModelConfig, strategies: Sequence[str], vary: str, budget_bytes: int
             ) -> pd.DataFrame | None:
    kind = device().kind
    return _guarded(lambda: _fits(_config_key(base), tuple(strategies), vary, int(budget_bytes),
                                  kind))


def run_training(config: ModelConfig, strategies: Sequence[str], steps: int
                 ) -> pd.DataFrame | None:
    kind = device().kind
    estimate = estimated_seconds([(config, s, steps) for s in strategies])
    if not confirm_long_run(estimate, f"train {config} {strategies} {steps}"):
        return None
    return _guarded(lambda: _train(_config_key(config), tuple(strategies), steps, kind))
