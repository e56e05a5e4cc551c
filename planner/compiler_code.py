"""The compiler's code for a plan: torch.compile with an activation memory budget."""

from __future__ import annotations

from i18n import DEFAULT, gettext
from memory.footprint import PlannerInputs
from planner.snippets import comment

_BUDGET = '''import torch
import torch._functorch.config

{comment}
torch._functorch.config.activation_memory_budget = {budget}
for layer in layers:  # {each}
    layer.compile()
'''


def compiler_code(p: PlannerInputs, code: str = DEFAULT) -> str:
    """torch.compile with the plan's activation memory budget, commented in `code`."""
    budget = f"{p.budget:g}"
    note = gettext(
        code, "torch.compile's partitioner saves, for each compiled graph, between only "
        "the graph's inputs (0: recompute the rest in backward) and its default choice "
        "(1: the min-cut, which already recomputes cheap pointwise ops); {budget} "
        "interpolates between those two sizes.", budget=budget)
    each = gettext(code, "each decoder layer its own graph (an nn.ModuleList of layers)")
    return _BUDGET.format(comment="\n".join(comment(note)), budget=budget, each=each)
