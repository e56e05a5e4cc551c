"""The lessons' calculators: training memory (lesson 1), Chen et al.'s budget walk
(lesson 3), a transformer layer's activations (lesson 4) and the logits (lesson 5).

Widget keys are prefixed with the widget's name so that two widgets never share state; the
learner's settings survive a reload and a new tab (`ui.progress.keep`). Registered by name in
ui.lesson_widgets.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from i18n import N_, format_number
from lessons import figures
from lessons.checkpoint_math import (
    best_budget,
    budget_placement,
    layer_activation_parts,
    layer_input_bytes,
    logits_bytes,
    transformer_activations,
)
from lessons.memory_calculator import (
    DEFAULT_PRESET,
    PRESETS,
    TrainingSetup,
    breakdown,
    bytes_per_parameter,
    describe_setup,
    transformer_params,
)
from lessons.values import SEED
from memory.precisions import OPTIMIZERS, PRECISIONS
from ui.i18n import current_language, fmt_decimal, fmt_number, t
from ui.lesson_common import (
    CHART,
    bounded_number,
    gb,
    notices,
    option_words,
    saving_delta,
)
from ui.progress import between, flag, keep, one_of

# --------------------------------------------------------------------------------------
# Lesson 1: the memory calculator
# --------------------------------------------------------------------------------------

_MEM_FIELDS = ("batch", "tokens", "hidden", "layers", "vocab")
_MEM_LIMITS = {"batch": (1, 1_024), "tokens": (1, 131_072), "hidden": (64, 32_768),
               "layers": (1, 256), "vocab": (2, 1_000_000)}
_MEM_LABELS = {"batch": N_("Batch (examples)"), "tokens": N_("Tokens per example"),
               "hidden": N_("Hidden size"), "layers": N_("Layers"), "vocab": N_("Vocabulary")}
# The parameter count in millions, a whole number: a decimal box would show 0.124 or
# 2000.000 (Streamlit's number box writes a point whatever the language), which a German
# or Vietnamese reader takes for 124 or two million.
_PARAMS_LIMITS = (1, 2_000_000)


def _preset_values(preset: str) -> dict[str, tuple[object, Callable[[object], object]]]:
    """The calculator's inputs for a preset: widget key -> (value, what the widget takes)."""
    setup = PRESETS[preset].setup
    return {"mem_params_m": (round(setup.params / 1e6), between(*_PARAMS_LIMITS)),
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
    st.session_state["mem_params_m"] = int(min(max(round(estimate / 1e6), low), high))


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
                 format_func=option_words(code, {k: p.label for k, p in PRESETS.items()}))
    caption = st.empty()  # filled below, from the values actually used
    # The two choices get half the width each: their options are sentences (German's
    # longest, 80 characters, was cut at a third of the width).
    first = st.columns(2)
    first[0].selectbox(t("Precision"), list(PRECISIONS), key="mem_precision",
                       format_func=option_words(code, {k: p.label for k, p in PRECISIONS.items()}))
    first[1].selectbox(t("Optimizer"), list(OPTIMIZERS), key="mem_optimizer",
                       format_func=option_words(code, {k: o.label for k, o in OPTIMIZERS.items()}))
    second = st.columns(6)
    with second[0]:
        low, high = _PARAMS_LIMITS
        bounded_number(t("Parameters (millions)"), "mem_params_m", low, high, format="%d")
    for column, name in zip(second[1:], _MEM_FIELDS, strict=True):
        low, high = _MEM_LIMITS[name]
        with column:
            bounded_number(t(_MEM_LABELS[name]), f"mem_{name}", low, high,
                            on_change=_shape_changed if name in ("hidden", "layers", "vocab")
                            else None)
    notices(["mem_params_m", *(f"mem_{name}" for name in _MEM_FIELDS)])
    setup = TrainingSetup(
        params=float(st.session_state["mem_params_m"]) * 1e6,
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
    metrics[0].metric(t("Total, everything kept"), gb(plain.total))
    metrics[1].metric(t("Activations, everything kept"), gb(plain.activations))
    delta, colour = saving_delta(plain.total, checkpointed.total)
    metrics[2].metric(t("Total, checkpoint every layer"), gb(checkpointed.total),
                      delta=delta, delta_color=colour)
    metrics[3].metric(t("Bytes per parameter"),
                      fmt_number(bytes_per_parameter(setup.precision, setup.optimizer)),
                      help=t("Weights + gradients + optimizer state, per parameter."))
    st.plotly_chart(
        figures.memory_breakdown_figure({t("everything kept"): plain,
                                         t("checkpoint every layer"): checkpointed}, code),
        key="mem_chart", **CHART,
    )
    st.caption(t("Activations: 34·b·s·h bytes per layer in 16-bit (Korthikanti et al.), "
                 "scaled for 32-bit; with checkpointing, each layer's input plus one layer "
                 "rebuilt. Logits: b·s·V in 32-bit, before their gradient."))


# --------------------------------------------------------------------------------------
# Lesson 3: how many checkpoints
# --------------------------------------------------------------------------------------

_BUDGET_SIZES = [4.0] * 8 + [2.0] * 8 + [1.0] * 8


def budget() -> None:
    code = current_language()
    st.markdown(t("**Chen et al.'s budget walk on a network whose outputs shrink**"))
    sizes = _BUDGET_SIZES
    budgets = [float(value) for value in range(1, int(sum(sizes)) + 1)]
    best = best_budget(sizes, budgets)
    chosen = st.slider(t("Budget B"), 1, int(sum(sizes)), int(best.budget), key="budget_b")
    plan = budget_placement(sizes, float(chosen))
    st.plotly_chart(figures.budget_figure(sizes, plan, code), key="budget_chart", **CHART)
    metrics = st.columns(4)
    metrics[0].metric(t("Checkpoints"), fmt_number(len(plan.checkpoints)))
    metrics[1].metric(t("x: kept outputs"), fmt_decimal(plan.stored))
    metrics[2].metric(t("y: largest segment"), fmt_decimal(plan.largest_segment))
    metrics[3].metric("x + y", fmt_decimal(plan.memory),
                      help=t("Keeping everything: {total}", total=fmt_decimal(sum(sizes))))
    st.plotly_chart(figures.budget_sweep_figure(sizes, [budget_placement(sizes, b)
                                                        for b in budgets], plan, code),
                    key="budget_sweep_chart", **CHART)
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
            bounded_number(t(_LAYER_LABELS[name]), f"layer_{name}", 1, _LAYER_HIGHS[name])
    columns[5].button(t("Worked example"), key="layer_reset", on_click=_reset_layer,
                      help=t("Back to the 2B-class model of the worked example"))
    notices([f"layer_{name}" for name in _LAYER_FIELDS])
    efficient = st.checkbox(t("Efficient (fused) attention: the s×s scores are never stored"),
                            key="layer_efficient")
    b, s, h, a, n = (int(st.session_state[f"layer_{name}"]) for name in _LAYER_FIELDS)
    acts = transformer_activations(b, s, h, n, a, efficient)
    metrics = st.columns(4)
    metrics[0].metric(t("All kept"), gb(acts.all_kept))
    metrics[1].metric(t("Checkpointed inputs"), gb(acts.checkpoint_inputs))
    metrics[2].metric(t("+ one layer rebuilt"), gb(acts.one_layer_rebuilt))
    delta, colour = saving_delta(acts.all_kept, acts.checkpointed)
    metrics[3].metric(t("Checkpointed total"), gb(acts.checkpointed), delta=delta,
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
    st.plotly_chart(figures.layer_strategies_figure(rows, code), key="layer_chart", **CHART)
    formula = ("34·s·b·h" if efficient else "s·b·h·(34 + 5·a·s/h)")
    st.caption(t("Per layer: {formula} = {per_layer}; a layer input: 2·s·b·h = {input}. "
                 "1 GB = 10⁹ bytes.", formula=formula, per_layer=gb(acts.per_layer),
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
            bounded_number(t(labels[name]), f"logits_{name}", *limits[name])
    width = columns[3].selectbox(t("Bytes per number"), list(_WIDTHS), key="logits_bytes",
                                 format_func=option_words(code, _WIDTHS))
    notices([f"logits_{name}" for name in limits])
    batch, seq, vocab = (int(st.session_state[f"logits_{name}"]) for name in limits)
    size = logits_bytes(batch, seq, vocab, int(width))
    metrics = st.columns(3)
    metrics[0].metric(t("Logits"), gb(size))
    # the number the lesson stresses: three tensors of this size at the loss
    metrics[1].metric(t("Peak at the loss (three such tensors)"), gb(3 * size))
    chunk = st.select_slider(t("Loss computed in chunks of … positions"), _CHUNKS,
                             key="logits_chunk", format_func=lambda n: format_number(n, code))
    metrics[2].metric(t("Largest logits tensor with a chunked loss"),
                      gb(logits_bytes(1, min(int(chunk), batch * seq), vocab, int(width))))
    marks = {t(label): value for label, value in _VOCAB_MARKS.items()}
    st.plotly_chart(figures.logits_figure(batch, seq, vocab, int(width), marks, code),
                    key="logits_chart", **CHART)
