"""The lab's predictions follow the installed torch, read from its code, not from a
version string: the FLOP counter's registry (torch 2.15 registers the CPU's fused attention
kernel, 2.13 does not) and the checkpoint's signature (respect_saved_tensors_hooks)."""

from __future__ import annotations

import functools

import pytest
import torch
from torch.utils import flop_counter
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

from demos import installed_torch
from demos.measure import compare
from memory import theory
from memory.config import ModelConfig
from memory.strategies import parse_strategies, parse_strategy

aten = torch.ops.aten
CPU_KERNEL = aten._scaled_dot_product_flash_attention_for_cpu
CPU_KERNEL_BACKWARD = aten._scaled_dot_product_flash_attention_for_cpu_backward
GPT = ModelConfig(layers=3, hidden=64, heads=4, seq_len=32, batch=2, vocab=300)


def _register_cpu_attention(monkeypatch) -> None:
    """The registry as torch 2.15 fills it: the CPU kernel with the attention formulas
    (the CUDA flash kernel's, whose first arguments are the same q, k, v / grad, q, k, v)."""
    registry = flop_counter.flop_registry
    monkeypatch.setitem(registry, CPU_KERNEL, registry[aten._scaled_dot_product_flash_attention])
    monkeypatch.setitem(registry, CPU_KERNEL_BACKWARD,
                        registry[aten._scaled_dot_product_flash_attention_backward])


def test_what_the_counter_counts_is_read_from_its_registry(monkeypatch):
    registered = CPU_KERNEL in flop_counter.flop_registry
    assert installed_torch.counter_counts_attention("cpu") is registered
    assert installed_torch.counter_counts_attention("cuda")
    assert not installed_torch.counter_counts_attention("cpu", registry={})
    _register_cpu_attention(monkeypatch)
    assert installed_torch.counter_counts_attention("cpu")


@pytest.mark.parametrize("cpu_attention", [False, True], ids=["installed", "2.15-registry"])
def test_compare_predicts_what_the_counter_counts_with_either_registry(monkeypatch,
                                                                       cpu_attention):
    """flops_predicted equals flops_counted whether or not the counter has the CPU kernel's
    formula; with it the count is the attention formulas' more (the compare contract and
    what fits' confirmed size rest on this)."""
    if cpu_attention:
        _register_cpu_attention(monkeypatch)
    elif CPU_KERNEL in flop_counter.flop_registry:
        monkeypatch.delitem(flop_counter.flop_registry, CPU_KERNEL)
        monkeypatch.delitem(flop_counter.flop_registry, CPU_KERNEL_BACKWARD)
    result = compare(GPT, parse_strategies("none,every-layer,selective:save-attention"),
                     device="cpu",
                     repeats=0, check_gradients=False)
    for r in result.results:
        assert r.flops_counted == r.flops_predicted, r.strategy
    without = theory.counted_flops(GPT, parse_strategy("none"), attention_counted=False)["total"]
    assert (result.results[0].flops_counted > without) is cpu_attention


def test_selective_policy_under_hooks_is_read_from_the_signature():
    """Non-reentrant checkpoint packs its input through the surrounding saved_tensors_hooks
    (one pack per checkpoint input); a selective policy's cache bypasses them unless the
    installed checkpoint has `respect_saved_tensors_hooks` and it is set."""
    lin = torch.nn.Linear(8, 8)
    x = torch.randn(4, 8, requires_grad=True)

    def f(t: torch.Tensor) -> torch.Tensor:
        return torch.relu(lin(t)) @ lin.weight

    def packs(**kwargs) -> list[tuple[int, ...]]:
        seen: list[tuple[int, ...]] = []
        with torch.autograd.graph.saved_tensors_hooks(
                lambda t: seen.append(tuple(t.shape)) or t, lambda t: t):
            checkpoint(f, x, use_reentrant=False, **kwargs)
        return seen

    assert packs() == [(4, 8)]

    def save_matmuls(ctx, op, *args, **kwargs):  # noqa: ANN001
        return (CheckpointPolicy.MUST_SAVE if op in (aten.addmm.default, aten.mm.default)
                else CheckpointPolicy.PREFER_RECOMPUTE)

    context = functools.partial(create_selective_checkpoint_contexts, save_matmuls)
    option = installed_torch.selective_respects_hooks_option()
    assert option is ("respect_saved_tensors_hooks" in checkpoint.__code__.co_varnames)
    if option:
        assert len(packs(context_fn=context, respect_saved_tensors_hooks=True)) > 1
    else:  # the cached addmm and mm outputs never reach the hooks: only the input is packed
        assert packs(context_fn=context) == [(4, 8)]
    assert installed_torch.selective_respects_hooks_option(
        lambda fn, *, respect_saved_tensors_hooks=None: None)
