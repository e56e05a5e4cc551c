"""The PyTorch code shown in lesson 7 runs (on CPU), so learners can paste it."""

from __future__ import annotations

import re

import pytest

from lessons.document import content_file

BLOCKS = re.findall(r"```python\n(.*?)```", content_file("in-practice").read_text(), re.DOTALL)
# Hugging Face is not a dependency of this app, and torch.compile needs a C++ toolchain.
RUNNABLE = [code for code in BLOCKS
            if "transformers" not in code and "torch.compile" not in code]


def test_lesson_7_shows_code_for_every_api():
    joined = "\n".join(BLOCKS)
    for api in ("checkpoint(block, x, use_reentrant=False)", "checkpoint_sequential(",
                "create_selective_checkpoint_contexts", "activation_memory_budget",
                "activation_checkpointing_enable(", "activation_checkpointing=True"):
        assert api in joined
    assert len(RUNNABLE) == 5


def test_the_selective_policy_saves_the_fused_attention_kernels():
    """Recomputing fused attention is the most expensive recomputation per byte saved; the
    lesson's policy must keep its output, as torch's own partitioner does."""
    selective = next(code for code in RUNNABLE if "create_selective_checkpoint_contexts" in code)
    assert "_scaled_dot_product_flash_attention" in selective
    assert "_scaled_dot_product_efficient_attention" in selective
    assert "scaled_dot_product_attention(" in selective  # the example block has attention


@pytest.mark.parametrize("code", RUNNABLE, ids=["checkpoint", "sequential", "selective",
                                                "save_on_cpu", "measure"])
def test_pytorch_snippet_runs_and_gives_gradients(code):
    namespace: dict = {}
    exec(compile(code, "<lesson 7>", "exec"), namespace)  # noqa: S102 - our own lesson text
    import torch

    grads = [p.grad for value in namespace.values() if isinstance(value, torch.nn.Module)
             for p in value.parameters()]
    assert grads and all(g is not None for g in grads)
