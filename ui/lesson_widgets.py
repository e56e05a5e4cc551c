"""The interactive parts of the lessons, registered by the name the Markdown uses.

Each widget is a function of no arguments that draws itself with Streamlit; the numbers
and figures come from the pure helpers in lessons/. Widget keys are prefixed with the
widget's name so that two widgets never share state. The learner's settings survive a
reload and a new tab (`ui.progress.keep`, which also gives the widgets their defaults).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
import streamlit as st

from i18n import N_, format_number, gettext
from lessons import figures
from lessons.checkpoint_math import (
    best_budget,
    best_segment_length,
    budget_placement,
    format_gb,
    layer_activation_parts,
    layer_input_bytes,
    logits_bytes,
    minimum_memory,
    optimal_segment_length,
    transformer_activations,
    uniform_segments_memory,
)
from lessons.decision import OVERS, PEAKS, recommend
from lessons.memory_calculator import (
    DEFAULT_PRESET,
    PRESETS,
    TrainingSetup,
    breakdown,
    bytes_per_parameter,
    describe_setup,
    transformer_params,
)
from lessons.stepper import (
    STRATEGIES,
    SUMMARY_COLUMNS,
    simulate,
    strategy_label,
    summary_rows,
)
from lessons.values import SEED
from memory.precisions import OPTIMIZERS, PRECISIONS
from ui.i18n import babel_locale, current_language, fmt_decimal, fmt_number, t
from ui.progress import between, flag, keep, one_of

_CHART = {"config": {"displayModeBar": False}}


def _words(code: str, labels: Mapping[Any, str]) -> Callable[[Any], str]:
    """A widget's format_func: an option id -> its label in language `code`. The language
    is fixed when the widget is drawn (Streamlit may call format_func outside the run)."""
    return lambda key: gettext(code, labels[key])


def _gb(size: float) -> str:
    """Decimal GB in the session's number style: 4.0 GB / 4,0 GB."""
    return format_gb(size, locale=babel_locale())


def _units(value: float) -> str:
    return t("{value} units", value=fmt_decimal(value))


def _bounded_number(label: str, key: str, low: float, high: float, step: float = 1,
                    integer: bool = True, on_change: Callable[[], None] | None = None,
                    **kwargs: object) -> None:
    """A number input that takes any value, then clamps it into [low, high] itself and says
    so: the box then shows the value actually used (Streamlit's own bounds would leave a
    rejected entry on screen while the last valid one is used)."""
    def clamp() -> None:
        raw = st.session_state[key]
        if raw is None:
            raw = low
        value = min(max(raw, low), high)
        value = int(round(value)) if integer else float(value)
        if value != raw:
            shown = fmt_number(int(raw)) if integer and float(raw).is_integer() else \
                fmt_decimal(float(raw))
            st.session_state[f"{key}_notice"] = t(
                "{label}: {entered} is outside {low}–{high}; using {used}.", label=label,
                entered=shown, low=fmt_decimal(low), high=fmt_decimal(high),
                used=fmt_decimal(value))
        else:
            st.session_state.pop(f"{key}_notice", None)
        st.session_state[key] = value
        if on_change is not None:
            on_change()

    st.number_input(label, step=step if not integer else int(step), key=key,
                    on_change=clamp, **kwargs)


def _notices(keys: list[str]) -> None:
    """The clamping notices of these inputs, each shown on the run after the entry."""
    for key in keys:
        notice = st.session_state.pop(f"{key}_notice", None)
        if notice:
            st.warning(notice, icon=":material/edit_note:")


def _saving_delta(before: float, after: float) -> tuple[str | None, str]:
    """A metric delta for a memory change: "-0.3 GB" (less, green, arrow down) or
    "+128 bytes" (more, red, arrow up); None when nothing changes. Memory is a cost, so the
    colours are inverted. The sign is an ASCII "-": Streamlit reads the arrow from it."""
    change = after - before
    if change == 0:
        return None, "off"
    sign = "-" if change < 0 else "+"
    return f"{sign}{_gb(abs(change))}", "inverse"


# --------------------------------------------------------------------------------------
# Lesson 1: the memory calculator
# --------------------------------------------------------------------------------------

_MEM_FIELDS = ("batch", "tokens", "hidden", "layers", "vocab")
_MEM_LIMITS = {"batch": (1, 1_024), "tokens": (1, 131_072), "hidden": (64, 32_768),
               "layers": (1, 256), "vocab": (2, 1_000_000)}
_MEM_LABELS = {"batch": N_("Batch (examples)"), "tokens": N_("Tokens per example"),
               "hidden": N_("Hidden size"), "layers": N_("Layers"), "vocab": N_("Vocabulary")}
_PARAMS_LIMITS = (0.001, 2_000.0)


def _preset_values(preset: str) -> dict[str, tuple[object, Callable[[object], object]]]:
    """The calculator's inputs for a preset: widget key -> (value, what the widget takes)."""
    setup = PRESETS[preset].setup
    return {"mem_params": (round(setup.params / 1e9, 3), between(*_PARAMS_LIMITS, False)),
            "mem_precision": (setup.precision, one_of(PRECISIONS)),
            "mem_optimizer": (setup.optimizer, one_of(OPTIMIZERS)),
            **{f"mem_{name}": (getattr(setup, name), between(*_MEM_LIMITS[name]))
               for name in _MEM_FIELDS}}


def _apply_preset() -> None:
    for key, (value, _) in _preset_values(st.session_state["mem_preset"]).items():
        st.session_state[key] = value
        st.session_state.pop(f"{key}_notice", None)


def _shape_changed() -> None:
    """Hidden size, layers or vocabulary changed: the parameter count follows them (about
    12·h²·L + V·h), so weights, gradients and optimizer state change too."""
    estimate = transformer_params(int(st.session_state["mem_hidden"]),
                                  int(st.session_state["mem_layers"]),
                                  int(st.session_state["mem_vocab"]))
    low, high = _PARAMS_LIMITS
    st.session_state["mem_params"] = round(min(max(estimate / 1e9, low), high), 3)


def _matching_preset(setup: TrainingSetup) -> str | None:
    for key, preset in PRESETS.items():
        if abs(preset.setup.params - setup.params) < 5e5 and all(
                getattr(preset.setup, name) == getattr(setup, name)
                for name in ("precision", "optimizer", *_MEM_FIELDS)):
            return key
    return None


def memory_calculator() -> None:
    code = current_language()
    keep({"mem_preset": (DEFAULT_PRESET, one_of(PRESETS))})
    keep(_preset_values(st.session_state["mem_preset"]))
    st.markdown(t("**Calculator: training memory of a transformer**"))
    st.selectbox(t("Preset"), list(PRESETS), key="mem_preset", on_change=_apply_preset,
                 format_func=_words(code, {k: p.label for k, p in PRESETS.items()}))
    caption = st.empty()  # filled below, from the values actually used
    first = st.columns(3)
    with first[0]:
        low, high = _PARAMS_LIMITS
        _bounded_number(t("Parameters (billions)"), "mem_params", low, high, step=0.1,
                        integer=False, format="%.3f")
    first[1].selectbox(t("Precision"), list(PRECISIONS), key="mem_precision",
                       format_func=_words(code, {k: p.label for k, p in PRECISIONS.items()}))
    first[2].selectbox(t("Optimizer"), list(OPTIMIZERS), key="mem_optimizer",
                       format_func=_words(code, {k: o.label for k, o in OPTIMIZERS.items()}))
    second = st.columns(5)
    for column, name in zip(second, _MEM_FIELDS, strict=True):
        low, high = _MEM_LIMITS[name]
        with column:
            _bounded_number(t(_MEM_LABELS[name]), f"mem_{name}", low, high,
                            on_change=_shape_changed if name in ("hidden", "layers", "vocab")
                            else None)
    _notices(["mem_params", *(f"mem_{name}" for name in _MEM_FIELDS)])
    setup = TrainingSetup(
        params=float(st.session_state["mem_params"]) * 1e9,
        precision=st.session_state["mem_precision"],
        optimizer=st.session_state["mem_optimizer"],
        **{name: int(st.session_state[f"mem_{name}"]) for name in _MEM_FIELDS},
    )
    preset = _matching_preset(setup)
    if preset is not None:
        caption.caption(PRESETS[preset].describe(code))
    else:
        caption.caption(t("Your setup: {shape}", shape=describe_setup(setup, code)))
    plain, checkpointed = breakdown(setup), breakdown(setup, checkpointing=True)
    metrics = st.columns(4)
    metrics[0].metric(t("Total, everything kept"), _gb(plain.total))
    metrics[1].metric(t("Activations, everything kept"), _gb(plain.activations))
    delta, colour = _saving_delta(plain.total, checkpointed.total)
    metrics[2].metric(t("Total, checkpoint every layer"), _gb(checkpointed.total),
                      delta=delta, delta_color=colour)
    metrics[3].metric(t("Bytes per parameter"),
                      fmt_number(bytes_per_parameter(setup.precision, setup.optimizer)),
                      help=t("Weights + gradients + optimizer state, per parameter."))
    st.plotly_chart(
        figures.memory_breakdown_figure({t("everything kept"): plain,
                                         t("checkpoint every layer"): checkpointed}, code),
        key="mem_chart", **_CHART,
    )
    st.caption(t("Activations: 34·b·s·h bytes per layer in 16-bit (Korthikanti et al.), "
                 "scaled for 32-bit; with checkpointing, each layer's input plus one layer "
                 "rebuilt. Logits: b·s·V in 32-bit, before their gradient."))


# --------------------------------------------------------------------------------------
# Lesson 2: the stepper
# --------------------------------------------------------------------------------------

_RATIOS = {0: N_("nothing (a chain of single tensors)"), 1: N_("1× its input"),
           4: N_("4× its input"), 16: N_("16× its input (a transformer layer)")}
_PHASES = {"forward": N_("Forward"), "recompute": N_("Recompute"),
           "backward": N_("Backward")}


def _reset_step() -> None:
    st.session_state["step_index"] = 1


def _move_step(delta: int, total: int) -> None:
    current = int(st.session_state.get("step_index", 1))
    st.session_state["step_index"] = min(max(current + delta, 1), total)


@st.fragment
def stepper() -> None:
    """The strategy controls on top; then the figure with the step buttons right under it
    (on a phone the buttons and what they move stay on one screen), the step's text, and
    the numbers."""
    code = current_language()
    st.markdown(t("**Step through one training step**"))
    controls = st.columns([3, 2, 2])
    keep({"step_strategy": (STRATEGIES[0], one_of(STRATEGIES)),
          "step_layers": (8, between(2, 16)), "step_ratio": (1, one_of(_RATIOS))})
    strategy = controls[0].radio(t("Strategy"), STRATEGIES, key="step_strategy",
                                 format_func=lambda key: strategy_label(key, code),
                                 on_change=_reset_step)
    layers = controls[1].slider(t("Layers N"), 2, 16, key="step_layers",
                                on_change=_reset_step)
    ratio = controls[2].selectbox(t("A layer's internals are"), list(_RATIOS),
                                  key="step_ratio", format_func=_words(code, _RATIOS),
                                  on_change=_reset_step)
    sim = simulate(strategy, layers, float(ratio))
    total = len(sim.steps)
    keep({"step_index": (1, between(1, total))})
    if int(st.session_state.get("step_index", 1)) > total:
        st.session_state["step_index"] = total
    number = int(st.session_state.get("step_index", 1))
    step = sim.steps[number - 1]
    with st.container(key="stepper_stage"):
        st.plotly_chart(figures.stepper_figure(sim, number - 1, code), key="step_chart",
                        **_CHART)
        with st.container(horizontal=True, key="stepper_buttons", gap="small"):
            st.button(t("◀ Previous step"), key="step_prev", on_click=_move_step,
                      args=(-1, total))
            st.button(t("Next step ▶"), key="step_next", on_click=_move_step,
                      args=(1, total), type="primary")
            st.button(t("Restart"), key="step_restart", on_click=_reset_step)
        st.info(t("**Step {number} of {total} · {phase}.** {text}", number=number,
                  total=total, phase=t(_PHASES[step.phase]), text=step.describe(code)),
                icon=":material/footprint:")
    if total > 1:
        st.slider(t("Step"), 1, total, key="step_index")
    metrics = st.columns(4)
    metrics[0].metric(t("Memory in use"), _units(step.memory))
    metrics[1].metric(t("Peak so far"), _units(sim.peak_so_far(number - 1)))
    metrics[2].metric(t("Forward computations"),
                      t("{done} of {total}", done=step.forwards, total=sim.forwards))
    metrics[3].metric(t("Peak for the whole step"), _units(sim.peak))
    st.plotly_chart(figures.stepper_memory_figure(sim, number - 1, code),
                    key="step_memory_chart", **_CHART)
    st.caption(t("One unit = one layer input. Bottom block of each column: the layer's input "
                 "(▲ marks a checkpoint); top block: the layer's internals."))
    with st.expander(t("All four strategies at N = {layers}", layers=layers), expanded=False):
        table = pd.DataFrame(summary_rows(layers, float(ratio)))
        table["strategy"] = [strategy_label(key, code) for key in table["strategy"]]
        st.dataframe(table.rename(columns={key: t(label)
                                           for key, label in SUMMARY_COLUMNS.items()}),
                     hide_index=True)


def tradeoff() -> None:
    code = current_language()
    st.markdown(t("**Memory against compute, all strategies**"))
    columns = st.columns(2)
    layers = columns[0].slider(t("Layers N"), 4, 64, 16, key="trade_layers")
    ratio = columns[1].selectbox(t("A layer's internals are"), list(_RATIOS), index=0,
                                 key="trade_ratio", format_func=_words(code, _RATIOS))
    st.plotly_chart(figures.tradeoff_figure(layers, float(ratio), code), key="trade_chart",
                    **_CHART)
    if ratio:
        st.caption(t("The recursive variant is drawn for chains of single tensors only "
                     "(internals: nothing)."))


# --------------------------------------------------------------------------------------
# Lesson 3: how many checkpoints
# --------------------------------------------------------------------------------------

_LAYER_KINDS = {"chain": (N_("as much as its input (a simple chain)"), 1.0),
                "transformer": (N_("17× its input (a transformer layer: 34 vs 2 bytes)"), 17.0)}


def k_curve() -> None:
    code = current_language()
    st.markdown(t("**Memory against k, the number of layers per segment**"))
    columns = st.columns(2)
    keep({"kcurve_layers": (16, between(4, 100)),
          "kcurve_kind": (next(iter(_LAYER_KINDS)), one_of(_LAYER_KINDS))})
    layers = columns[0].slider(t("Layers N"), 4, 100, key="kcurve_layers")
    kind = columns[1].radio(t("Rebuilding one layer needs"), list(_LAYER_KINDS),
                            key="kcurve_kind",
                            format_func=_words(code, {key: words for key, (words, _)
                                                      in _LAYER_KINDS.items()}))
    layer = _LAYER_KINDS[kind][1]
    st.plotly_chart(figures.k_curve_figure(layers, 1.0, layer, code), key="kcurve_chart",
                    **_CHART)
    length = best_segment_length(layers, 1.0, layer)
    metrics = st.columns(3)
    metrics[0].metric(t("Best k (layers per segment)"), fmt_number(length),
                      help=t("{segments} segments of at most {k} layers",
                             segments=math.ceil(layers / length), k=length))
    metrics[1].metric(t("Memory there"),
                      _units(uniform_segments_memory(layers, length, 1.0, layer)))
    metrics[2].metric(t("Keeping everything"), _units(layers * layer))
    st.caption(t("Units: one layer input. k is the number of layers per segment, as in the "
                 "demos' “every k layers”: ⌈N/k⌉ checkpoints plus one segment of k layers "
                 "rebuilt. The curve's real-valued minimum is {minimum} units, at k = "
                 "{best}.", minimum=fmt_decimal(minimum_memory(layers, 1, layer), 1),
                 best=fmt_decimal(optimal_segment_length(layers, 1, layer), 1)))


_BUDGET_SIZES = [4.0] * 8 + [2.0] * 8 + [1.0] * 8


def budget() -> None:
    code = current_language()
    st.markdown(t("**Chen et al.'s budget walk on a network whose outputs shrink**"))
    sizes = _BUDGET_SIZES
    budgets = [float(value) for value in range(1, int(sum(sizes)) + 1)]
    best = best_budget(sizes, budgets)
    chosen = st.slider(t("Budget B"), 1, int(sum(sizes)), int(best.budget), key="budget_b")
    plan = budget_placement(sizes, float(chosen))
    st.plotly_chart(figures.budget_figure(sizes, plan, code), key="budget_chart", **_CHART)
    metrics = st.columns(4)
    metrics[0].metric(t("Checkpoints"), fmt_number(len(plan.checkpoints)))
    metrics[1].metric(t("x: kept outputs"), fmt_decimal(plan.stored))
    metrics[2].metric(t("y: largest segment"), fmt_decimal(plan.largest_segment))
    metrics[3].metric("x + y", fmt_decimal(plan.memory),
                      help=t("Keeping everything: {total}", total=fmt_decimal(sum(sizes))))
    st.plotly_chart(figures.budget_sweep_figure(sizes, [budget_placement(sizes, b)
                                                        for b in budgets], plan, code),
                    key="budget_sweep_chart", **_CHART)
    st.caption(t("Segments alternate in colour; ▼ marks a kept output. Best budget in this "
                 "sweep: B = {budget}, x + y = {memory}, against {total} for keeping every "
                 "output.", budget=fmt_decimal(best.budget),
                 memory=fmt_decimal(best.memory), total=fmt_decimal(sum(sizes))))


# --------------------------------------------------------------------------------------
# Lesson 4: a transformer layer
# --------------------------------------------------------------------------------------

_LAYER_FIELDS = ("batch", "seq", "hidden", "heads", "layers")
_LAYER_LABELS = {"batch": N_("Batch b"), "seq": N_("Tokens s"), "hidden": N_("Hidden h"),
                 "heads": N_("Heads a"), "layers": N_("Layers L")}
_LAYER_HIGHS = {"batch": 1_024, "seq": 131_072, "hidden": 32_768, "heads": 256, "layers": 256}
# The parts of a layer's activations (their ids in checkpoint_math) and their words.
_PART_LABELS = {
    "attention (Q, K, V, output, projections)": N_("attention (Q, K, V, output, projections)"),
    "attention scores (softmax, dropout)": N_("attention scores (softmax, dropout)"),
    "MLP": N_("MLP"),
    "layer norms": N_("layer norms"),
}
_SCORES = "attention scores (softmax, dropout)"


def _part(part: str) -> str:
    return t(_PART_LABELS.get(part, part))


def _reset_layer() -> None:
    for name in _LAYER_FIELDS:
        st.session_state[f"layer_{name}"] = SEED[name]
        st.session_state.pop(f"layer_{name}_notice", None)
    st.session_state["layer_efficient"] = True


def layer_calculator() -> None:
    code = current_language()
    keep({**{f"layer_{name}": (SEED[name], between(1, _LAYER_HIGHS[name]))
             for name in _LAYER_FIELDS}, "layer_efficient": (True, flag)})
    st.markdown(t("**Calculator: activations of a GPT-style model**"))
    columns = st.columns(6)
    for column, name in zip(columns, _LAYER_FIELDS, strict=False):
        with column:
            _bounded_number(t(_LAYER_LABELS[name]), f"layer_{name}", 1, _LAYER_HIGHS[name])
    columns[5].button(t("Worked example"), key="layer_reset", on_click=_reset_layer,
                      help=t("Back to the 2B-class model of the worked example"))
    _notices([f"layer_{name}" for name in _LAYER_FIELDS])
    efficient = st.checkbox(t("Efficient (fused) attention: the s×s scores are never stored"),
                            key="layer_efficient")
    b, s, h, a, n = (int(st.session_state[f"layer_{name}"]) for name in _LAYER_FIELDS)
    acts = transformer_activations(b, s, h, n, a, efficient)
    metrics = st.columns(4)
    metrics[0].metric(t("All kept"), _gb(acts.all_kept))
    metrics[1].metric(t("Checkpointed inputs"), _gb(acts.checkpoint_inputs))
    metrics[2].metric(t("+ one layer rebuilt"), _gb(acts.one_layer_rebuilt))
    delta, colour = _saving_delta(acts.all_kept, acts.checkpointed)
    metrics[3].metric(t("Checkpointed total"), _gb(acts.checkpointed), delta=delta,
                      delta_color=colour)
    parts = layer_activation_parts(b, s, h, a, efficient)
    rows = {
        t("keep everything"): {_part(part): value * n for part, value in parts.items()},
        t("selective: recompute the scores"): {_part(part): value * n
                                               for part, value in parts.items()
                                               if part != _SCORES},
        t("checkpoint every layer"): {
            t("layer inputs (checkpoints)"): layer_input_bytes(b, s, h) * n,
            t("one layer rebuilt"): acts.one_layer_rebuilt},
    }
    st.plotly_chart(figures.layer_strategies_figure(rows, code), key="layer_chart", **_CHART)
    formula = ("34·s·b·h" if efficient else "s·b·h·(34 + 5·a·s/h)")
    st.caption(t("Per layer: {formula} = {per_layer}; a layer input: 2·s·b·h = {input}. "
                 "1 GB = 10⁹ bytes.", formula=formula, per_layer=_gb(acts.per_layer),
                 input=t("{size:,.1f} MB", size=layer_input_bytes(b, s, h) / 1e6)))
    if efficient:
        st.caption(t("With efficient attention the scores are never stored, so selective "
                     "recomputation has nothing left to drop: the fused kernel already "
                     "recomputes them. Untick the box to see the difference."))


# --------------------------------------------------------------------------------------
# Lesson 5: logits
# --------------------------------------------------------------------------------------

_VOCAB_MARKS = {"GPT-2": 50_257, "Llama 3": 128_256, N_("worked example"): 248_000}
_WIDTHS = {4: N_("4 (32-bit)"), 2: N_("2 (16-bit)")}
_CHUNKS = [64, 128, 256, 512, 1_024, 2_048, 4_096]


def logits_calculator() -> None:
    code = current_language()
    st.markdown(t("**Calculator: the logits**"))
    columns = st.columns(4)
    limits = {"batch": (1, 1_024), "seq": (1, 131_072), "vocab": (2, 1_000_000)}
    labels = {"batch": N_("Batch b"), "seq": N_("Tokens s"), "vocab": N_("Vocabulary V")}
    keep({**{f"logits_{name}": (SEED[name], between(*limits[name])) for name in limits},
          "logits_bytes": (4, one_of(_WIDTHS)), "logits_chunk": (256, one_of(_CHUNKS))})
    for column, name in zip(columns, limits, strict=False):
        with column:
            _bounded_number(t(labels[name]), f"logits_{name}", *limits[name])
    width = columns[3].selectbox(t("Bytes per number"), list(_WIDTHS), key="logits_bytes",
                                 format_func=_words(code, _WIDTHS))
    _notices([f"logits_{name}" for name in limits])
    batch, seq, vocab = (int(st.session_state[f"logits_{name}"]) for name in limits)
    size = logits_bytes(batch, seq, vocab, int(width))
    metrics = st.columns(3)
    metrics[0].metric(t("Logits"), _gb(size))
    metrics[1].metric(t("With their gradient"), _gb(2 * size))
    chunk = st.select_slider(t("Loss computed in chunks of … positions"), _CHUNKS,
                             key="logits_chunk", format_func=lambda n: format_number(n, code))
    metrics[2].metric(t("Largest logits tensor with a chunked loss"),
                      _gb(logits_bytes(1, min(int(chunk), batch * seq), vocab, int(width))))
    marks = {t(label): value for label, value in _VOCAB_MARKS.items()}
    st.plotly_chart(figures.logits_figure(batch, seq, vocab, int(width), marks, code),
                    key="logits_chart", **_CHART)


# --------------------------------------------------------------------------------------
# Lesson 6: the cost of a step
# --------------------------------------------------------------------------------------


def step_cost() -> None:
    st.plotly_chart(figures.step_cost_figure(code=current_language()), key="cost_chart",
                    **_CHART)


# --------------------------------------------------------------------------------------
# Lesson 7: how to choose
# --------------------------------------------------------------------------------------


def decision() -> None:
    code = current_language()
    st.markdown(t("**From the symptom to the tool**"))
    columns = st.columns(3)
    keep({"decide_peak": (next(iter(PEAKS)), one_of(PEAKS)),
          "decide_over": (next(iter(OVERS)), one_of(OVERS)),
          "decide_layers": (32, between(1, 200))})
    peak = columns[0].selectbox(t("Where is the peak?"), list(PEAKS), key="decide_peak",
                                format_func=_words(code, PEAKS))
    over = columns[1].radio(t("How far over budget?"), list(OVERS), key="decide_over",
                            format_func=_words(code, OVERS), disabled=peak != "layers")
    layers = columns[2].number_input(t("Layers"), 1, 200, key="decide_layers",
                                     disabled=peak != "layers")
    for number, step in enumerate(recommend(peak, over, int(layers)), start=1):
        tool, why = step.words(code)
        st.markdown(t("{number}. **{tool}**: {why}", number=number, tool=tool, why=why))


WIDGETS: dict[str, Callable[[], None]] = {
    "calculator:memory": memory_calculator,
    "stepper": stepper,
    "figure:tradeoff": tradeoff,
    "figure:k-curve": k_curve,
    "calculator:budget": budget,
    "calculator:layer": layer_calculator,
    "calculator:logits": logits_calculator,
    "figure:step-cost": step_cost,
    "figure:decision": decision,
}
