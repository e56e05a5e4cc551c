"""The code the planner hands out: the PyTorch snippets run against the installed torch
(same gradients as plain layers, keyword names from the real signatures); the Hugging Face
snippets use only names from the pinned table (transformers is not installed here). All of
it in every language, whose snippets differ only in comments and docstrings
(tests/i18n/test_code_samples.py)."""

from __future__ import annotations

import ast
import inspect
import itertools

import pytest
import torch
import torch._functorch.config
import torch.utils.checkpoint as ckpt

from demos.engine.llama import LlamaBlock
from i18n import SUPPORTED
from memory import footprint as P
from memory.architectures import PRESETS
from memory.config import ModelConfig
from planner import hf_code as hf_module
from planner import torch_code as torch_module

TORCH_CALLABLES = {
    "checkpoint": ckpt.checkpoint,
    "create_selective_checkpoint_contexts": ckpt.create_selective_checkpoint_contexts,
}
LANGUAGES = [language.code for language in SUPPORTED]


def _inputs(**changes) -> P.PlannerInputs:
    return P.PlannerInputs(PRESETS["llama-3.1-8b"], **changes)


def _calls(code: str) -> list[ast.Call]:
    return [node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Call)]


def _name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("strategy", [s for s in P.STRATEGIES if s != "budget"])
def test_torch_snippet_runs_and_gives_the_plain_gradients(strategy: str, lang: str) -> None:
    code = torch_module.torch_code(_inputs(strategy=strategy, some_layers=2), lang)
    for call in _calls(code):
        if _name(call) in TORCH_CALLABLES:
            params = inspect.signature(TORCH_CALLABLES[_name(call)]).parameters
            for keyword in call.keywords:
                assert keyword.arg in params
                assert params[keyword.arg].kind is not inspect.Parameter.VAR_KEYWORD
    namespace: dict = {}
    exec(compile(code, f"<{strategy}>", "exec"), namespace)  # noqa: S102 - our own snippet
    cfg = ModelConfig(layers=3, hidden=32, heads=4, seq_len=8, batch=2, vocab=64)
    torch.manual_seed(0)
    layers = torch.nn.ModuleList(LlamaBlock(cfg, i) for i in range(3))
    x = torch.randn(2, 8, 32, requires_grad=True)

    def grads(run) -> list[torch.Tensor]:
        for p in layers.parameters():
            p.grad = None
        x.grad = None
        run(x).square().mean().backward()
        return [p.grad.clone() for p in layers.parameters()] + [x.grad.clone()]

    def plain(x: torch.Tensor) -> torch.Tensor:
        for layer in layers:
            x = layer(x)
        return x

    wrapped = namespace["Checkpointed"](layers)
    for a, b in zip(grads(plain), grads(wrapped), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_budget_snippet_sets_the_compiler_setting_that_exists(lang: str) -> None:
    code = torch_module.torch_code(_inputs(strategy="budget", budget=0.3), lang)
    assert "activation_memory_budget = 0.3" in code
    assert hasattr(torch._functorch.config, "activation_memory_budget")
    assert hasattr(torch, "compile")


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("strategy, tuning, optimizer, shards, chunked", list(itertools.product(
    P.STRATEGIES, P.TUNINGS, P.OPTIMIZER_KEYS, (1, 4), (False, True))))
def test_hf_snippet_uses_only_pinned_names(strategy, tuning, optimizer, shards, chunked,
                                           lang) -> None:
    p = _inputs(strategy=strategy, tuning=tuning, optimizer=optimizer, shards=shards,
                chunked_loss=chunked, offload=shards > 1)
    code = hf_module.hf_code(p, lang)
    calls = {_name(c): c for c in _calls(code)}
    args = calls["TrainingArguments"]
    for call_name, call in calls.items():
        if call_name in hf_module.HF_NAMES:
            assert {k.arg for k in call.keywords} <= hf_module.HF_NAMES[call_name]
    keywords = {k.arg: k.value for k in args.keywords}
    assert keywords["optim"].value in hf_module.HF_NAMES["optim"]
    assert keywords["gradient_checkpointing"].value is (strategy == "every-layer")
    assert keywords["per_device_train_batch_size"].value == p.batch
    if "fsdp" in keywords:
        assert set(keywords["fsdp"].value.split()) <= hf_module.HF_NAMES["fsdp"]
    assert ("gradient_checkpointing_enable" in calls) is (strategy == "every-layer")
    assert ("BitsAndBytesConfig" in calls) is (tuning == "qlora")


class _CountOps(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts the aten ops that run (forward and backward) while it is active."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func] = self.counts.get(func, 0) + 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("lang", LANGUAGES)
def test_selective_snippet_keeps_the_fused_attention(lang: str) -> None:
    """The SAC policy saves the SDPA kernels (as lesson 7's EXPENSIVE set does): backward
    does not run the fused attention forward again, while norms and activations rerun."""
    namespace: dict = {}
    source = torch_module.torch_code(_inputs(strategy="selective"), lang)
    exec(compile(source, "<selective>", "exec"),  # noqa: S102
         namespace)
    aten = torch.ops.aten
    assert {aten._scaled_dot_product_flash_attention_for_cpu.default,
            aten._scaled_dot_product_flash_attention.default,
            aten._scaled_dot_product_efficient_attention.default} <= namespace["SAVE"]
    cfg = ModelConfig(layers=2, hidden=32, heads=4, seq_len=8, batch=2, vocab=64)
    layers = torch.nn.ModuleList(LlamaBlock(cfg, i) for i in range(2))
    x = torch.randn(2, 8, 32, requires_grad=True)
    counts = {}
    for name, model in (("plain", None), ("selective", namespace["Checkpointed"](layers))):
        with _CountOps() as mode:
            y = model(x) if model is not None else layers[1](layers[0](x))
            y.square().mean().backward()
        counts[name] = mode.counts
    sdpa = aten._scaled_dot_product_flash_attention_for_cpu.default
    assert counts["plain"][sdpa] == counts["selective"][sdpa] == 2
    assert counts["selective"][aten.silu.default] > counts["plain"][aten.silu.default]
