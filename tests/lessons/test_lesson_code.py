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
                "gradient_checkpointing_enable(", "gradient_checkpointing=True"):
        assert api in joined
    assert len(RUNNABLE) == 3


@pytest.mark.parametrize("code", RUNNABLE, ids=["checkpoint", "sequential", "selective"])
def test_pytorch_snippet_runs_and_gives_gradients(code):
    namespace: dict = {}
    exec(compile(code, "<lesson 7>", "exec"), namespace)  # noqa: S102 - our own lesson text
    import torch

    grads = [p.grad for value in namespace.values() if isinstance(value, torch.nn.Module)
             for p in value.parameters()]
    assert grads and all(g is not None for g in grads)
