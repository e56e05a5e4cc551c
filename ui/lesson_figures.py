"""The lessons' figures and steppers: one training step, step by step, and the
memory/compute trade-off (lesson 2), memory against the segment length (lesson 3), the cost of
a step (lesson 6) and the decision from symptom to tool (lesson 7).

Widget keys are prefixed with the widget's name so that two widgets never share state; the
learner's settings survive a reload and a new tab (`ui.progress.keep`). Registered by name in
ui.lesson_widgets.
"""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from i18n import N_
from lessons import figures
from lessons.checkpoint_math import (
    best_segment_length,
    minimum_memory,
    optimal_segment_length,
    uniform_segments_memory,
)
from lessons.decision import OVERS, PEAKS, recommend
from lessons.stepper import (
    STRATEGIES,
    SUMMARY_COLUMNS,
    simulate,
    strategy_label,
    summary_rows,
)
from ui.i18n import current_language, fmt_decimal, fmt_number, t
from ui.lesson_common import CHART, measured_or_ask, option_words, units
from ui.progress import between, keep, one_of

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
                                  key="step_ratio", format_func=option_words(code, _RATIOS),
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
                        **CHART)
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
    metrics[0].metric(t("Memory in use"), units(step.memory))
    metrics[1].metric(t("Peak so far"), units(sim.peak_so_far(number - 1)))
    metrics[2].metric(t("Forward computations"),
                      t("{done} of {total}", done=step.forwards, total=sim.forwards))
    metrics[3].metric(t("Peak for the whole step"), units(sim.peak))
    st.plotly_chart(figures.stepper_memory_figure(sim, number - 1, code),
                    key="step_memory_chart", **CHART)
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
                                 key="trade_ratio", format_func=option_words(code, _RATIOS))
    st.plotly_chart(figures.tradeoff_figure(layers, float(ratio), code), key="trade_chart",
                    **CHART)
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
                            format_func=option_words(code, {key: words for key, (words, _)
                                                      in _LAYER_KINDS.items()}))
    layer = _LAYER_KINDS[kind][1]
    st.plotly_chart(figures.k_curve_figure(layers, 1.0, layer, code), key="kcurve_chart",
                    **CHART)
    length = best_segment_length(layers, 1.0, layer)
    metrics = st.columns(3)
    metrics[0].metric(t("Best k (layers per segment)"), fmt_number(length),
                      help=t("{segments} segments of at most {k} layers",
                             segments=math.ceil(layers / length), k=length))
    metrics[1].metric(t("Memory there"),
                      units(uniform_segments_memory(layers, length, 1.0, layer)))
    metrics[2].metric(t("Keeping everything"), units(layers * layer))
    st.caption(t("Units: one layer input. k is the number of layers per segment, as in the "
                 "demos' “every k layers”: ⌈N/k⌉ checkpoints plus one segment of k layers "
                 "rebuilt. The curve's real-valued minimum is {minimum} units, at k = "
                 "{best}.", minimum=fmt_decimal(minimum_memory(layers, 1, layer), 1),
                 best=fmt_decimal(optimal_segment_length(layers, 1, layer), 1)))


# --------------------------------------------------------------------------------------
# Lesson 6: the cost of a step, and where the checkpoints go
# --------------------------------------------------------------------------------------


def step_cost() -> None:
    st.plotly_chart(figures.step_cost_figure(code=current_language()), key="cost_chart",
                    **CHART)


def placement() -> None:
    """Every placement method for a budget on the lab's model with unequal layers (the
    /placement page's default run: serving.placement_jobs), measured on this server when
    the learner asks: its figure of recompute against peak, with the optimum at every
    budget."""
    from reports import placement_figures
    from serving import placement_jobs
    from serving.jobs import Job
    from ui import demo_runner as runner
    from ui.navigation import page_link

    code = current_language()
    st.markdown(t("**Measured: where the checkpoints go, on layers of unequal widths**"))
    options = placement_jobs.options(placement_jobs.DEFAULT_SHAPE, placement_jobs.DEFAULT_BUDGET)
    job = Job.make("placement", placement_jobs.BASE, (), **options)
    result = measured_or_ask(job, "placement-lesson", runner.run_placement)
    if result is None:
        return
    st.plotly_chart(placement_figures.placement_figure(result, code), key="placement_chart",
                    **CHART)
    st.caption(placement_figures.figure_caption(code))
    page_link("placement", label=t("Run it for another budget: the live placement demo"),
              icon=":material/play_arrow:")


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
                                format_func=option_words(code, PEAKS))
    over = columns[1].radio(t("How far over budget?"), list(OVERS), key="decide_over",
                            format_func=option_words(code, OVERS), disabled=peak != "layers")
    layers = columns[2].number_input(t("Layers"), 1, 200, key="decide_layers",
                                     disabled=peak != "layers")
    for number, step in enumerate(recommend(peak, over, int(layers)), start=1):
        tool, why = step.words(code)
        st.markdown(t("{number}. **{tool}**: {why}", number=number, tool=tool, why=why))
