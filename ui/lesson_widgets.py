"""The interactive parts of the lessons, registered by the name the Markdown uses.

Each widget is a function of no arguments that draws itself with Streamlit; the numbers
and figures come from the pure helpers in lessons/. Widget keys are prefixed with the
widget's name so that two widgets never share state. The learner's settings survive a
reload and a new tab (`ui.progress.keep`, which also gives the widgets their defaults).

The widgets live by family: the calculators in ui.lesson_calculators, the figures and the
stepper in ui.lesson_figures, lesson 10's measurements on this server (`measured:*`) in
ui.lesson_toolbox, what they share in ui.lesson_common.
"""

from __future__ import annotations

from collections.abc import Callable

from ui.lesson_calculators import budget, layer_calculator, logits_calculator, memory_calculator
from ui.lesson_figures import decision, k_curve, placement, step_cost, stepper, tradeoff
from ui.lesson_parallel import parallel_calculator
from ui.lesson_toolbox import autocast, checkpoint_error, flops, lora, packing, pipeline

WIDGETS: dict[str, Callable[[], None]] = {
    "calculator:memory": memory_calculator,
    "stepper": stepper,
    "figure:tradeoff": tradeoff,
    "figure:k-curve": k_curve,
    "calculator:budget": budget,
    "calculator:layer": layer_calculator,
    "calculator:logits": logits_calculator,
    "figure:step-cost": step_cost,
    "measured:placement": placement,
    "figure:decision": decision,
    "calculator:parallel": parallel_calculator,
    "measured:packing": packing,
    "measured:autocast": autocast,
    "measured:lora": lora,
    "measured:flops": flops,
    "measured:checkpoint-error": checkpoint_error,
    "measured:pipeline": pipeline,
}
