"""The one place the demo pages run the engine.

* One run at a time per device: a `DeviceQueue` held by `st.cache_resource`; a learner
  who has to wait sees "Waiting for the CPU (2 ahead)" instead of a frozen page.
* Results are cached per config with `st.cache_data(max_entries=...)`: a config seen
  before (by anyone) shows at once. Only plain records are cached, never tensors.
* The shared widgets (model sliders bound to the URL, the strategy picker), the
  "measured on <device> by <method>" caption and the CSV download live here, so the
  pages stay thin.

A `ConfigError` (an invalid combination such as hidden 320 with 3 heads) is shown with
`st.error` and the page keeps serving; an out-of-memory error or a guard refusal comes
back from the engine as a result with `fits=False` and is explained on the page.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pandas as pd
import streamlit as st

from demos.config import DTYPES_FOR_DEVICE, ConfigError, ModelConfig, slider_ranges
from demos.device import DeviceInfo, DeviceQueue
from demos.figures import format_bytes, format_ms
from demos.strategies import CUDA_ONLY, SELECTIVE_POLICIES, STRATEGIES, parse_strategy
from ui import query
from ui.sidebar import server_device

# Small on a CPU so that a default compare (none + every-layer) takes well under 2 s.
CPU_DEFAULT = ModelConfig(layers=8, hidden=256, heads=4, seq_len=128, batch=2, vocab=8192)
CUDA_DEFAULT = ModelConfig(layers=16, hidden=1024, heads=16, seq_len=1024, batch=8,
                           vocab=32768, dtype="bfloat16")
# Timed steps per strategy: few on a CPU so a slider answers within 2 s (the spread is
# reported, and a checkpointed step "faster" than none is flagged as noise).
UI_REPEATS = {"cpu": 2, "cuda": 5}
CACHE_ENTRIES = 64

LABELS: dict[str, tuple[str, str]] = {
    # query name -> (slider label, help)
    "layers": ("Layers", "Transformer blocks: activation memory grows with each one."),
    "hidden": ("Hidden size", "Width of the residual stream (h)."),
    "heads": ("Attention heads", "Must divide the hidden size."),
    "seq": ("Sequence length", "Tokens per sample (s)."),
    "batch": ("Batch", "Samples per step (b)."),
    "vocab": ("Vocabulary", "Tokens the LM head scores: the logits are b·s·vocab numbers."),
}
MODEL_FIELDS = ("layers", "hidden", "heads", "seq", "batch", "vocab", "dtype")


# ---------------------------------------------------------------- device, queue


def device() -> DeviceInfo:
    return server_device()


def device_noun(info: DeviceInfo | None = None) -> str:
    return "GPU" if (info or device()).kind == "cuda" else "CPU"


def default_config(info: DeviceInfo | None = None) -> ModelConfig:
    return CUDA_DEFAULT if (info or device()).kind == "cuda" else CPU_DEFAULT


@st.cache_resource
def device_queue() -> DeviceQueue:
    """The one queue every session shares: demos run one at a time per device."""
    return DeviceQueue()


@contextmanager
def device_turn(kind: str) -> Iterator[None]:
    """Hold the device; while others are ahead, say so on the page.

    Called inside the cached functions: the notice is created there too, and emptied at
    the end, so replaying a cached result leaves nothing behind."""
    noun = "GPU" if kind == "cuda" else "CPU"
    notice = st.empty()

    def on_wait(ahead: int) -> None:
        notice.info(f"Waiting for the {noun} ({ahead} ahead)…", icon=":material/hourglass:")

    try:
        with device_queue().turn(on_wait=on_wait):
            notice.empty()
            yield
    finally:
        notice.empty()


def _config_key(config: ModelConfig) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(dataclasses.asdict(config).items()))


# ---------------------------------------------------------------- cached engine calls


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner=False)
def _compare(config_key: tuple, strategies: tuple[str, ...], kind: str, repeats: int,
             timeline: bool, time_steps: bool) -> Any:
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
    bar = st.progress(0.0, text="Sweeping…")

    def progress(done: int, total: int) -> None:
        bar.progress(min(done / max(total, 1), 1.0), text=f"Measured {done} of {total} points")

    try:
        with device_turn(kind):
            return sweep(base, vary, list(values), list(strategies), device=kind,
                         repeats=repeats, progress=progress)
    finally:
        bar.empty()


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
    bar = st.progress(0.0, text="Training…")

    def progress(done: int, total: int) -> None:
        bar.progress(min(done / max(total, 1), 1.0), text=f"Trained {done} of {total} steps")

    try:
        with device_turn(kind):
            return train_losses(config, list(strategies), steps, progress=progress)
    finally:
        bar.empty()


def _record(obj: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)
    return dict(vars(obj))


def _guarded(run: Callable[[], Any]) -> Any | None:
    """Run an engine call; an invalid config is shown (not raised) and gives None."""
    try:
        return run()
    except ConfigError as error:
        st.error(f"This configuration cannot run: {error}", icon=":material/block:")
        return None


# ---------------------------------------------------------------- long runs on a CPU

# An effective rate for this model's training step on a small CPU (measured
# 60-110 GFLOP/s on 2 cores; lower under load). Used only to warn before a long run.
CPU_FLOPS_PER_SECOND = 8e10
SLOW_SECONDS = 20.0
TRACKED_STEP_COST = 3  # a step under the live-bytes tracker costs about 2-3 plain steps


def estimated_seconds(runs: Sequence[tuple[ModelConfig, str, int]]) -> float:
    """Rough seconds for (config, strategy, steps) runs on this device; 0 on a GPU or when
    the config is invalid (the engine then explains why)."""
    if device().kind == "cuda":
        return 0.0
    from demos.theory import step_flops

    try:
        flops = sum(step_flops(config, strategy)["total"] * steps
                    for config, strategy, steps in runs)
    except (ConfigError, ValueError, ZeroDivisionError):
        return 0.0
    return flops / CPU_FLOPS_PER_SECOND


def confirm_long_run(seconds: float, what: str) -> bool:
    """Below SLOW_SECONDS: go. Above: say how long it would take, while everyone else on
    this CPU waits, and run only after a click (remembered for this session)."""
    if seconds <= SLOW_SECONDS:
        return True
    confirmed: list[str] = st.session_state.setdefault("_confirmed_long_runs", [])
    if what in confirmed:
        return True
    notice = st.empty()
    with notice.container():
        st.warning(f"This would take roughly {seconds:.0f} s on this CPU, and other learners' "
                   "demos wait meanwhile. Smaller sliders give the same lesson faster.",
                   icon=":material/timer:")
        clicked = st.button(f"Run it anyway (~{seconds:.0f} s)", key=f"confirm-{hash(what)}")
    if clicked:
        notice.empty()
        confirmed.append(what)
    return clicked


def run_compare(config: ModelConfig, strategies: Sequence[str], *, timeline: bool = False,
                time_steps: bool = True, repeats: int | None = None) -> Any | None:
    """Comparison of one training step per strategy (cached per config), or None."""
    kind = device().kind
    reps = repeats or UI_REPEATS.get(kind, 3)
    steps = TRACKED_STEP_COST + (reps if time_steps else 0)
    estimate = estimated_seconds([(config, s, steps) for s in strategies])
    if not confirm_long_run(estimate, f"compare {config} {strategies} {timeline}"):
        return None
    with st.spinner(f"Running one training step per strategy on the {device_noun()}…",
                    show_time=True):
        return _guarded(lambda: _compare(_config_key(config), tuple(strategies), kind, reps,
                                         timeline, time_steps))


def run_sweep(base: ModelConfig, vary: str, values: Sequence[Any], strategies: Sequence[str],
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


# ---------------------------------------------------------------- shared widgets


def model_controls(fields: Sequence[str] = MODEL_FIELDS, *, columns: int = 4,
                   defaults: ModelConfig | None = None, **overrides: Any) -> ModelConfig:
    """Sliders for the model and batch, bound to the URL query; `overrides` fix fields
    without a widget (e.g. dropout). Ranges follow the device (slider_ranges)."""
    info = device()
    base = (defaults or default_config(info)).replace(**overrides)
    ranges = slider_ranges(info.kind)
    where = f"on this {device_noun(info)}"
    values: dict[str, Any] = {}
    cells = st.columns(columns)
    for number, name in enumerate(fields):
        with cells[number % columns]:
            if name == "dtype":
                options = DTYPES_FOR_DEVICE[info.kind]
                values["dtype"] = query.choice("dtype", "Number format", options, base.dtype,
                                               where=where,
                                               help="Bytes per number: 4 for float32, 2 for "
                                                    "bfloat16/float16.")
                continue
            field = query.CONFIG_FIELDS[name]
            lo, hi, step = ranges[field]
            label, help_text = LABELS[name]
            values[field] = query.int_slider(name, label, int(lo), int(hi), int(step),
                                             int(getattr(base, field)), help=help_text,
                                             where=where)
    return base.replace(**values)


def strategy_options(kind: str | None = None, *, selective_policies: bool = True,
                     every_k: Sequence[int] = (2, 4)) -> list[str]:
    """The strategy strings a learner can pick on this device (`none` excluded)."""
    kind = kind or device().kind
    options: list[str] = []
    for name in STRATEGIES:
        if name in ("none", "budget") or (name in CUDA_ONLY and kind != "cuda"):
            continue
        if name == "every-k":
            options += [f"every-k:{k}" for k in every_k]
        elif name == "selective" and selective_policies:
            options += [f"selective:{policy}" for policy in SELECTIVE_POLICIES]
        else:
            options.append(name)
    return options


def strategy_picker(default: Sequence[str], *, name: str = "strategy",
                    label: str = "Strategies to compare with none",
                    options: Sequence[str] | None = None) -> tuple[str, ...]:
    """Multiselect bound to ?strategy=a,b; `none` is always measured as the baseline."""
    options = list(options or strategy_options())
    picked = query.multi_choice(name, label, options, default,
                                help="\n\n".join(f"**{o}**: {describe(o)}" for o in options))
    return ("none", *picked)


def describe(strategy: str) -> str:
    spec = parse_strategy(strategy)
    if spec.name == "selective":
        return SELECTIVE_POLICIES[spec.policy or ""]
    text = STRATEGIES[spec.name]
    return text.replace("k layers", f"{spec.k} layers") if spec.k else text


def measured_caption(device_label: str, methods: Sequence[str], extra: str = "") -> None:
    """'Measured on CPU (...) by <method>' under every demo."""
    unique = ", ".join(dict.fromkeys(m for m in methods if m)) or "the engine"
    st.caption(f":material/science: Measured on this run on **{device_label}** by {unique}."
               + (f" {extra}" if extra else ""))


def comparison_caption(comparison: Any) -> None:
    label = _device_label(getattr(comparison, "device", None))
    methods = [r.measured_by for r in comparison.results]
    measured_caption(label, methods, timing_note(comparison.results))


def timing_note(results: Sequence[Any]) -> str:
    """How the step times were taken, and a warning when noise shows."""
    runs = [r.step_seconds_runs for r in results if r.fits and r.step_seconds_runs]
    if not runs:
        return ""
    count = min(map(len, runs))
    how = {1: "one timed step", 2: "mean of 2 timed steps"}.get(count,
                                                                f"median of {count} timed steps")
    note = f"Step times: {how} per strategy, strategies interleaved."
    base, _ = _baseline_and_best(results)
    faster = [r.label for r in results if base is not None and r is not base and r.fits
              and r.step_seconds and base.step_seconds and r.step_seconds < base.step_seconds
              and r.strategy not in ("none",)]
    if faster:
        note += (f" {', '.join(faster)} measured faster than none: that is timing noise on a "
                 "shared machine, not a speed-up (checkpointing only adds work).")
    return note


def _device_label(value: Any) -> str:
    if value is None:
        return device().label()
    if hasattr(value, "label"):
        return value.label()
    if isinstance(value, dict):
        try:
            return DeviceInfo(**value).label()
        except TypeError:
            return str(value.get("name") or value)
    return str(value)


NUMBERS_FIRST_PAUSE_S = 0.3


def paint_numbers_first() -> None:
    """Call between a demo's numbers and its charts.

    The browser draws the elements of a script run that arrive together in one go, and
    on a session's first chart Plotly's library has to load (about a second on a small
    CPU), holding the whole batch back: the numbers would wait for the charts. A short
    pause, once per session, lets the numbers reach the screen first (measured on this
    2-core machine: first numbers of a page load ~3.3 s -> ~2.1 s, charts unchanged).
    Later runs draw the charts with the library already loaded, so they skip the pause."""
    if not st.session_state.get("_charts_drawn"):
        st.session_state["_charts_drawn"] = True
        time.sleep(NUMBERS_FIRST_PAUSE_S)


def download(frame: pd.DataFrame, name: str, label: str = "Download the results (CSV)") -> None:
    st.download_button(label, frame.to_csv(index=False).encode(), file_name=f"{name}.csv",
                       mime="text/csv", on_click="ignore", icon=":material/download:",
                       key=f"download-{name}")


def config_slug(config: ModelConfig) -> str:
    return (f"L{config.layers}-h{config.hidden}-a{config.heads}-s{config.seq_len}"
            f"-b{config.batch}-V{config.vocab}-{config.dtype}")


def show_refusals(results: Sequence[Any]) -> None:
    """Explain each strategy that did not fit (OOM or guard refusal)."""
    for result in results:
        if not result.fits:
            st.warning(f"**{result.label}** does not fit: {result.error}",
                       icon=":material/memory:")


# ---------------------------------------------------------------- the compare table


def results_table(results: Sequence[Any]) -> pd.DataFrame:
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


def gradient_badge(result: Any) -> str:
    """gradient_match, short enough for a metric: '✓ identical', '✓ 3e-07'."""
    if result.bitwise_equal:
        return "✓ identical"
    if result.max_grad_diff is None:
        return "–"
    mark = "✓" if result.max_grad_diff < GRADIENT_TOLERANCE else "✗"
    return f"{mark} {result.max_grad_diff:.0e}"


GRADIENT_TOLERANCE = 1e-3  # "tiny numerical differences"; in practice they are bitwise equal


def gradient_match(result: Any) -> str:
    if result.strategy == "none":
        return "baseline"
    if result.bitwise_equal:
        return "✓ bitwise equal (max diff 0)"
    if result.max_grad_diff is None:
        return "–"
    mark = "✓" if result.max_grad_diff < GRADIENT_TOLERANCE else "✗"
    return f"{mark} max diff {result.max_grad_diff:.1e}"


def _baseline_and_best(results: Sequence[Any]) -> tuple[Any | None, Any | None]:
    fitted = [r for r in results if r.fits and r.peak_bytes is not None]
    base = next((r for r in fitted if r.strategy == "none"), None)
    others = [r for r in fitted if r.strategy != "none"]
    best = min(others, key=lambda r: r.peak_bytes) if others else None
    return base, best


def headline(results: Sequence[Any]) -> None:
    """Three numbers: the most memory a strategy saved, what it cost in time, and whether
    its gradients match the baseline's."""
    base, best = _baseline_and_best(results)
    if base is None or best is None:
        return
    saved = 1 - best.peak_bytes / base.peak_bytes
    cells = st.columns(3)
    cells[0].metric(f"Peak memory with {best.label}", format_bytes(best.peak_bytes),
                    delta=f"{-saved:+.0%} vs none ({format_bytes(base.peak_bytes)})",
                    delta_color="inverse")
    if best.step_seconds and base.step_seconds:
        ratio = best.step_seconds / base.step_seconds
        cells[1].metric(f"Step time with {best.label}", format_ms(best.step_seconds),
                        delta=f"{ratio - 1:+.0%} vs none ({format_ms(base.step_seconds)})",
                        delta_color="inverse")
    cells[2].metric("Gradients vs none", gradient_badge(best), help=gradient_match(best))


def peak_summary(results: Sequence[Any]) -> None:
    """One line per strategy: its peak and where in the step it happened."""
    lines = []
    for r in results:
        if not r.fits or not r.timeline:
            continue
        top = max(r.timeline, key=lambda p: p.live_bytes)
        where = f"{top.phase}" + (f", layer {top.layer}" if top.layer is not None else "")
        lines.append(f"- **{r.label}**: peak {format_bytes(top.live_bytes)} at op {top.index} "
                     f"(`{top.op}`, {where})")
    if lines:
        st.markdown("\n".join(lines))


TRAINING_DEFAULT = ModelConfig(layers=4, hidden=64, heads=4, seq_len=32, batch=8, vocab=128)


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


FIT_DEFAULT = ModelConfig(layers=8, hidden=256, heads=4, seq_len=128, batch=1, vocab=4096)


def fit_default(info: DeviceInfo | None = None) -> ModelConfig:
    """The what-fits model: small on a CPU; on a GPU the GPU demo model, batch 1."""
    info = info or device()
    return CUDA_DEFAULT.replace(batch=1) if info.kind == "cuda" else FIT_DEFAULT
FIT_STRATEGIES = ("none", "every-layer", "selective:save-matmuls")


def budget_range(info: DeviceInfo | None = None) -> tuple[int, int, int, int]:
    """(low, high, step, default) in MiB. On a GPU the default is its real free memory."""
    info = info or device()
    if info.kind == "cuda" and info.total_bytes:
        total = info.total_bytes // 2**20
        free = (info.free_bytes or info.total_bytes) // 2**20
        step = 256
        return step, total - total % step, step, max(step, free - free % step)
    return 16, 512, 16, 128


def budget_help(info: DeviceInfo | None = None) -> str:
    info = info or device()
    if info.kind == "cuda":
        return "Defaults to the GPU's free memory right now."
    return ("The CPU has no fixed memory limit for this demo, so the budget plays the part of "
            "a GPU's memory: a run whose measured peak exceeds it does not fit.")


def fits_table(frame: pd.DataFrame, field: str) -> pd.DataFrame:
    name = "batch" if field == "batch" else "sequence length"
    return pd.DataFrame({
        "strategy": frame["strategy"],
        f"largest {name} (predicted)": frame["value_predicted"],
        f"largest {name} (confirmed)": frame["value_confirmed"],
        "measured total (with parameters)": [format_bytes(v) for v in frame["total_bytes"]],
        "tokens / s": [f"{v:,.0f}" if pd.notna(v) else "–" for v in frame["tokens_per_second"]],
    })


def home_teaser() -> None:
    """One real measurement at the default config (none against every-layer), cached after
    the first visit: the memory checkpointing saves and the time it costs, on this server."""
    config = default_config()
    comparison = run_compare(config, ("none", "every-layer"))
    if comparison is None:
        return
    base, best = _baseline_and_best(comparison.results)
    if base is None or best is None:
        show_refusals(comparison.results)
        return
    saved = base.peak_bytes - best.peak_bytes
    cells = st.columns(3)
    cells[0].metric("Peak memory saved by checkpointing every layer", format_bytes(saved),
                    delta=f"{-saved / base.peak_bytes:+.0%}", delta_color="inverse")
    if best.step_seconds and base.step_seconds:
        ratio = best.step_seconds / base.step_seconds
        cells[1].metric("Time it costs per step",
                        format_ms(best.step_seconds - base.step_seconds),
                        delta=f"{ratio - 1:+.0%}", delta_color="inverse")
    cells[2].metric("Gradients vs none", gradient_badge(best), help=gradient_match(best))
    comparison_caption(comparison)
    st.caption(f"Model: {config.layers} layers, hidden {config.hidden}, {config.heads} heads, "
               f"{config.seq_len} tokens × batch {config.batch}, vocabulary {config.vocab}, "
               f"{config.dtype}.")


def korthikanti(config: ModelConfig) -> float:
    """Korthikanti et al.'s estimate for all layers without checkpointing (16-bit, fused
    attention, 1-byte dropout masks), as published: a reference, not this model."""
    from demos.theory import korthikanti_layer_bytes

    return config.layers * korthikanti_layer_bytes(config.batch, config.seq_len, config.hidden,
                                                   config.heads)


def theory_notes(config: ModelConfig) -> None:
    """Why this model's measured bytes differ from the published formula."""
    from demos.theory import explain_differences

    with st.expander("Why the measurement differs from Korthikanti et al.'s 34·s·b·h"):
        st.markdown(explain_differences(config, device().kind))
