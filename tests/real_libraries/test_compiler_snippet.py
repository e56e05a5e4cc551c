"""The compiler-budget code the planner prints (planner.compiler_code, through torch_code as
the plan page calls it), executed as printed on a tiny real transformers Llama: its
decoder layers compiled with the plan's activation memory budget save fewer bytes for
backward than the same layers compiled at budget 1.0 (the partitioner's default), and
train the same network as the eager model (the same loss and gradients)."""

from __future__ import annotations

import pytest
import torch
import torch._functorch.config

from memory.footprint import PlannerInputs
from model_classes.tiny import build_model, tiny_architecture
from planner.torch_code import torch_code
from tests.compiler_budget_data import SWEEP_GROUP

ARCH = tiny_architecture("llama-3.1-8b", layers=2).with_(hidden=32, heads=2, kv_heads=1,
                                                         mlp_width=64)
SEQ = 16


def step(model: torch.nn.Module) -> tuple[float, int, list[torch.Tensor]]:
    """One training step: the loss, the bytes saved for backward (each storage once,
    parameters apart) and the gradients."""
    ids = torch.randint(0, ARCH.vocab, (1, SEQ), generator=torch.Generator().manual_seed(0))
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = t.untyped_storage().data_ptr()
        if key not in params:
            saved[key] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    return loss.item(), sum(saved.values()), grads


def compiled_as_printed(budget: float) -> tuple[str, tuple[float, int, list[torch.Tensor]]]:
    code = torch_code(PlannerInputs(ARCH, seq=SEQ, batch=1, strategy="budget",
                                    budget=budget))
    torch._dynamo.reset()
    model = build_model(ARCH)
    exec(code, {"layers": model.model.layers})  # the snippet, as the plan page shows it
    return code, step(model)


@SWEEP_GROUP  # in the process that compiles the sweep: Inductor started once
@pytest.mark.compile
def test_the_printed_budget_code_runs_and_saves_less() -> None:
    before = torch._functorch.config.activation_memory_budget
    try:
        loss, eager_saved, grads = step(build_model(ARCH))
        code, (budget_loss, budget_saved, budget_grads) = compiled_as_printed(0.5)
        assert "activation_memory_budget = 0.5" in code
        _, (_, default_saved, _) = compiled_as_printed(1.0)
    finally:
        torch._functorch.config.activation_memory_budget = before
        torch._dynamo.reset()
    assert budget_saved < default_saved <= eager_saved
    assert budget_loss == pytest.approx(loss, rel=1e-5)
    for a, b in zip(grads, budget_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
