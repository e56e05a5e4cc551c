"""The interactive parts of the lessons, registered by the name the Markdown uses.

Each widget is a function of no arguments that draws itself with Streamlit; the numbers
and figures come from the pure helpers in lessons/. Widget keys are prefixed with the
widget's name so that two widgets never share state.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd
import streamlit as st

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
    transformer_activations,
    uniform_segments_memory,
)
from lessons.decision import OVERS, PEAKS, recommend
from lessons.memory_calculator import (
    DEFAULT_PRESET,
    OPTIMIZERS,
    PRECISIONS,
    PRESETS,
    TrainingSetup,
    breakdown,
    bytes_per_parameter,
)
from lessons.stepper import STRATEGIES, STRATEGY_LABELS, simulate, summary_rows
from lessons.values import SEED

_gb = format_gb


# --------------------------------------------------------------------------------------
# Lesson 1: the memory calculator
# --------------------------------------------------------------------------------------

_MEM_FIELDS = ("batch", "tokens", "hidden", "layers", "vocab")


def _apply_preset() -> None:
    setup = PRESETS[st.session_state["mem_preset"]].setup
    st.session_state["mem_params"] = round(setup.params / 1e9, 3)
    st.session_state["mem_precision"] = setup.precision
    st.session_state["mem_optimizer"] = setup.optimizer
    for name in _MEM_FIELDS:
        st.session_state[f"mem_{name}"] = getattr(setup, name)


def memory_calculator() -> None:
    if "mem_params" not in st.session_state:
        st.session_state["mem_preset"] = DEFAULT_PRESET
        _apply_preset()
    st.markdown("**Calculator: training memory of a transformer**")
    st.selectbox("Preset", list(PRESETS), key="mem_preset", on_change=_apply_preset,
                 format_func=lambda key: PRESETS[key].label)
    st.caption(PRESETS[st.session_state["mem_preset"]].note)
    first = st.columns(3)
    first[0].number_input("Parameters (billions)", min_value=0.001, max_value=2_000.0,
                          step=0.1, format="%.3f", key="mem_params")
    first[1].selectbox("Precision", list(PRECISIONS), key="mem_precision",
                       format_func=lambda key: PRECISIONS[key].label)
    first[2].selectbox("Optimizer", list(OPTIMIZERS), key="mem_optimizer",
                       format_func=lambda key: OPTIMIZERS[key].label)
    second = st.columns(5)
    limits = {"batch": (1, 1_024), "tokens": (1, 131_072), "hidden": (64, 32_768),
              "layers": (1, 256), "vocab": (2, 1_000_000)}
    labels = {"batch": "Batch (examples)", "tokens": "Tokens per example",
              "hidden": "Hidden size", "layers": "Layers", "vocab": "Vocabulary"}
    for column, name in zip(second, _MEM_FIELDS, strict=True):
        low, high = limits[name]
        column.number_input(labels[name], min_value=low, max_value=high, step=1,
                            key=f"mem_{name}")
    setup = TrainingSetup(
        params=float(st.session_state["mem_params"]) * 1e9,
        precision=st.session_state["mem_precision"],
        optimizer=st.session_state["mem_optimizer"],
        **{name: int(st.session_state[f"mem_{name}"]) for name in _MEM_FIELDS},
    )
    plain, checkpointed = breakdown(setup), breakdown(setup, checkpointing=True)
    metrics = st.columns(4)
    metrics[0].metric("Total, everything kept", _gb(plain.total))
    metrics[1].metric("Activations, everything kept", _gb(plain.activations))
    metrics[2].metric("Total, checkpoint every layer", _gb(checkpointed.total),
                      delta=f"-{_gb(plain.total - checkpointed.total)}", delta_color="inverse")
    metrics[3].metric("Bytes per parameter",
                      f"{bytes_per_parameter(setup.precision, setup.optimizer)}",
                      help="Weights + gradients + optimizer state, per parameter.")
    st.plotly_chart(
        figures.memory_breakdown_figure({"everything kept": plain,
                                         "checkpoint every layer": checkpointed}),
        key="mem_chart", config={"displayModeBar": False},
    )
    st.caption("Activations: 34·b·s·h bytes per layer in 16-bit (Korthikanti et al.), "
               "scaled for 32-bit; with checkpointing, each layer's input plus one layer "
               "rebuilt. Logits: b·s·V in 32-bit, before their gradient.")


# --------------------------------------------------------------------------------------
# Lesson 2: the stepper
# --------------------------------------------------------------------------------------

_RATIOS = {0: "nothing (a chain of single tensors)", 1: "1× its input", 4: "4× its input",
           16: "16× its input (a transformer layer)"}


def _reset_step() -> None:
    st.session_state["step_index"] = 1


def _move_step(delta: int, total: int) -> None:
    current = int(st.session_state.get("step_index", 1))
    st.session_state["step_index"] = min(max(current + delta, 1), total)


@st.fragment
def stepper() -> None:
    st.markdown("**Step through one training step**")
    controls = st.columns([3, 2, 2])
    strategy = controls[0].radio("Strategy", STRATEGIES, key="step_strategy",
                                 format_func=STRATEGY_LABELS.get, on_change=_reset_step)
    layers = controls[1].slider("Layers N", 2, 16, 8, key="step_layers",
                                on_change=_reset_step)
    ratio = controls[2].selectbox("A layer's internals are", list(_RATIOS), index=1,
                                  key="step_ratio", format_func=_RATIOS.get,
                                  on_change=_reset_step)
    sim = simulate(strategy, layers, float(ratio))
    total = len(sim.steps)
    if int(st.session_state.get("step_index", 1)) > total:
        st.session_state["step_index"] = total
    buttons = st.columns([2, 2, 1.4, 4])
    buttons[0].button("◀ Previous step", key="step_prev", on_click=_move_step,
                      args=(-1, total), width="stretch")
    buttons[1].button("Next step ▶", key="step_next", on_click=_move_step, args=(1, total),
                      width="stretch", type="primary")
    buttons[2].button("Restart", key="step_restart", on_click=_reset_step,
                      width="stretch")
    number = st.slider("Step", 1, total, key="step_index") if total > 1 else 1
    step = sim.steps[number - 1]
    phase = {"forward": "Forward", "recompute": "Recompute", "backward": "Backward"}
    st.info(f"**Step {number} of {total} · {phase[step.phase]}.** {step.text}",
            icon=":material/footprint:")
    metrics = st.columns(4)
    metrics[0].metric("Memory in use", f"{step.memory:g} units")
    metrics[1].metric("Peak so far", f"{sim.peak_so_far(number - 1):g} units")
    metrics[2].metric("Forward computations", f"{step.forwards} of {sim.forwards}")
    metrics[3].metric("Peak for the whole step", f"{sim.peak:g} units")
    st.plotly_chart(figures.stepper_figure(sim, number - 1), key="step_chart",
                    config={"displayModeBar": False})
    st.plotly_chart(figures.stepper_memory_figure(sim, number - 1), key="step_memory_chart",
                    config={"displayModeBar": False})
    st.caption("One unit = one layer input. Bottom block of each column: the layer's input "
               "(▲ marks a checkpoint); top block: the layer's internals.")
    with st.expander(f"All four strategies at N = {layers}", expanded=False):
        st.dataframe(pd.DataFrame(summary_rows(layers, float(ratio))), hide_index=True)


def tradeoff() -> None:
    st.markdown("**Memory against compute, all strategies**")
    columns = st.columns(2)
    layers = columns[0].slider("Layers N", 4, 64, 16, key="trade_layers")
    ratio = columns[1].selectbox("A layer's internals are", list(_RATIOS), index=0,
                                 key="trade_ratio", format_func=_RATIOS.get)
    st.plotly_chart(figures.tradeoff_figure(layers, float(ratio)), key="trade_chart",
                    config={"displayModeBar": False})
    if ratio:
        st.caption("The recursive variant is drawn for chains of single tensors only "
                   "(internals: nothing).")


# --------------------------------------------------------------------------------------
# Lesson 3: how many checkpoints
# --------------------------------------------------------------------------------------

_LAYER_KINDS = {"chain": ("as much as its input (a simple chain)", 1.0),
                "transformer": ("17× its input (a transformer layer: 34 vs 2 bytes)", 17.0)}


def k_curve() -> None:
    st.markdown("**Memory against the number of segments**")
    columns = st.columns(2)
    layers = columns[0].slider("Layers N", 4, 100, 16, key="kcurve_layers")
    kind = columns[1].radio("Rebuilding one layer needs", list(_LAYER_KINDS),
                            key="kcurve_kind", format_func=lambda key: _LAYER_KINDS[key][0])
    layer = _LAYER_KINDS[kind][1]
    st.plotly_chart(figures.k_curve_figure(layers, 1.0, layer), key="kcurve_chart",
                    config={"displayModeBar": False})
    length = best_segment_length(layers, 1.0, layer)
    metrics = st.columns(3)
    metrics[0].metric("Best segments (whole layers)", f"{math.ceil(layers / length)}",
                      help=f"{length} layer(s) per segment")
    metrics[1].metric("Memory there",
                      f"{uniform_segments_memory(layers, length, 1.0, layer):g} units")
    metrics[2].metric("Keeping everything", f"{layers * layer:g} units")
    st.caption(f"Units: one layer input. Segments hold whole layers: ⌈N/k⌉ inputs plus one "
               f"segment of k layers rebuilt. The curve's real-valued minimum is "
               f"2·√(N·layer) = {minimum_memory(layers, 1, layer):.1f} units.")


_BUDGET_SIZES = [4.0] * 8 + [2.0] * 8 + [1.0] * 8


def budget() -> None:
    st.markdown("**Chen et al.'s budget walk on a network whose outputs shrink**")
    sizes = _BUDGET_SIZES
    budgets = [float(value) for value in range(1, int(sum(sizes)) + 1)]
    best = best_budget(sizes, budgets)
    chosen = st.slider("Budget B", 1, int(sum(sizes)), int(best.budget), key="budget_b")
    plan = budget_placement(sizes, float(chosen))
    st.plotly_chart(figures.budget_figure(sizes, plan), key="budget_chart",
                    config={"displayModeBar": False})
    metrics = st.columns(4)
    metrics[0].metric("Checkpoints", f"{len(plan.checkpoints)}")
    metrics[1].metric("x: kept outputs", f"{plan.stored:g}")
    metrics[2].metric("y: largest segment", f"{plan.largest_segment:g}")
    metrics[3].metric("x + y", f"{plan.memory:g}", help=f"Keeping everything: {sum(sizes):g}")
    st.plotly_chart(figures.budget_sweep_figure(sizes, [budget_placement(sizes, b)
                                                        for b in budgets], plan),
                    key="budget_sweep_chart", config={"displayModeBar": False})
    st.caption(f"Best budget in this sweep: B = {best.budget:g}, x + y = {best.memory:g}, "
               f"against {sum(sizes):g} for keeping every output.")


# --------------------------------------------------------------------------------------
# Lesson 4: a transformer layer
# --------------------------------------------------------------------------------------

_LAYER_FIELDS = ("batch", "seq", "hidden", "heads", "layers")


def _reset_layer() -> None:
    for name in _LAYER_FIELDS:
        st.session_state[f"layer_{name}"] = SEED[name]
    st.session_state["layer_efficient"] = True


def layer_calculator() -> None:
    if "layer_batch" not in st.session_state:
        _reset_layer()
    st.markdown("**Calculator: activations of a GPT-style model**")
    columns = st.columns(6)
    labels = {"batch": "Batch b", "seq": "Tokens s", "hidden": "Hidden h", "heads": "Heads a",
              "layers": "Layers L"}
    highs = {"batch": 1_024, "seq": 131_072, "hidden": 32_768, "heads": 256, "layers": 256}
    for column, name in zip(columns, _LAYER_FIELDS, strict=False):
        column.number_input(labels[name], min_value=1, max_value=highs[name], step=1,
                            key=f"layer_{name}")
    columns[5].button("Worked example", key="layer_reset", on_click=_reset_layer,
                      help="Back to the 2B-class model of the worked example")
    efficient = st.checkbox("Efficient (fused) attention: the s×s scores are never stored",
                            key="layer_efficient")
    b, s, h, a, n = (int(st.session_state[f"layer_{name}"]) for name in _LAYER_FIELDS)
    acts = transformer_activations(b, s, h, n, a, efficient)
    metrics = st.columns(4)
    metrics[0].metric("All kept", _gb(acts.all_kept))
    metrics[1].metric("Checkpointed inputs", _gb(acts.checkpoint_inputs))
    metrics[2].metric("+ one layer rebuilt", _gb(acts.one_layer_rebuilt))
    metrics[3].metric("Checkpointed total", _gb(acts.checkpointed),
                      delta=f"-{acts.saving * 100:.0f}%", delta_color="inverse")
    parts = layer_activation_parts(b, s, h, a, efficient)
    scores = "attention scores (softmax, dropout)"
    rows = {
        "keep everything": {part: value * n for part, value in parts.items()},
        "selective: recompute the scores": {part: value * n for part, value in parts.items()
                                            if part != scores},
        "checkpoint every layer": {"layer inputs (checkpoints)": layer_input_bytes(b, s, h) * n,
                                   "one layer rebuilt": acts.one_layer_rebuilt},
    }
    st.plotly_chart(figures.layer_strategies_figure(rows), key="layer_chart",
                    config={"displayModeBar": False})
    formula = ("34·s·b·h" if efficient else "s·b·h·(34 + 5·a·s/h)")
    st.caption(f"Per layer: {formula} = {_gb(acts.per_layer)}; a layer input: "
               f"2·s·b·h = {layer_input_bytes(b, s, h) / 1e6:,.1f} MB. 1 GB = 10⁹ bytes.")
    if efficient:
        st.caption("With efficient attention the scores are never stored, so selective "
                   "recomputation has nothing left to drop: the fused kernel already "
                   "recomputes them. Untick the box to see the difference.")


# --------------------------------------------------------------------------------------
# Lesson 5: logits
# --------------------------------------------------------------------------------------

_VOCAB_MARKS = {"GPT-2": 50_257, "Llama 3": 128_256, "worked example": 248_000}


def logits_calculator() -> None:
    st.markdown("**Calculator: the logits**")
    columns = st.columns(4)
    batch = columns[0].number_input("Batch b", 1, 1_024, SEED["batch"], key="logits_batch")
    seq = columns[1].number_input("Tokens s", 1, 131_072, SEED["seq"], key="logits_seq")
    vocab = columns[2].number_input("Vocabulary V", 2, 1_000_000, SEED["vocab"],
                                    key="logits_vocab")
    width = columns[3].selectbox("Bytes per number", [4, 2], key="logits_bytes",
                                 format_func=lambda n: f"{n} ({'32' if n == 4 else '16'}-bit)")
    size = logits_bytes(int(batch), int(seq), int(vocab), int(width))
    metrics = st.columns(3)
    metrics[0].metric("Logits", _gb(size))
    metrics[1].metric("With their gradient", _gb(2 * size))
    chunk = st.select_slider("Loss computed in chunks of … positions",
                             [64, 128, 256, 512, 1_024, 2_048, 4_096], value=256,
                             key="logits_chunk")
    metrics[2].metric("Largest logits tensor with a chunked loss",
                      _gb(logits_bytes(1, min(int(chunk), int(batch * seq)), int(vocab),
                                       int(width))))
    st.plotly_chart(figures.logits_figure(int(batch), int(seq), int(vocab), int(width),
                                          _VOCAB_MARKS), key="logits_chart",
                    config={"displayModeBar": False})


# --------------------------------------------------------------------------------------
# Lesson 6: the cost of a step
# --------------------------------------------------------------------------------------


def step_cost() -> None:
    st.plotly_chart(figures.step_cost_figure(), key="cost_chart",
                    config={"displayModeBar": False})


# --------------------------------------------------------------------------------------
# Lesson 7: how to choose
# --------------------------------------------------------------------------------------


def decision() -> None:
    st.markdown("**From the symptom to the tool**")
    columns = st.columns(3)
    peak = columns[0].selectbox("Where is the peak?", list(PEAKS), key="decide_peak",
                                format_func=PEAKS.get)
    over = columns[1].radio("How far over budget?", list(OVERS), key="decide_over",
                            format_func=OVERS.get, disabled=peak != "layers")
    layers = columns[2].number_input("Layers", 1, 200, 32, key="decide_layers",
                                     disabled=peak != "layers")
    for number, step in enumerate(recommend(peak, over, int(layers)), start=1):
        st.markdown(f"{number}. **{step.tool}**: {step.why}")


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
