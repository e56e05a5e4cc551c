"""The loss peak as transformers computes it: ForCausalLMLoss upcasts the logits to fp32
before cross-entropy (transformers 5.24.0, loss/loss_utils.py). Measured with the live
tracker on a head and the library's loss function: three fp32 b·s·V tensors at the peak in
either precision (log-softmax, its gradient, the logits' gradient), plus the logits
themselves while the caller still holds them (a loop that keeps `outputs` through
backward); HF's Trainer drops them first. The planner's logits_peak_bytes counts the three
fp32 tensors and, in 16-bit, the held logits: exact for a loop that holds them in 16-bit
and for the Trainer in fp32, 2 bytes per logit high for the Trainer in 16-bit."""

from __future__ import annotations

import pytest
import torch
from transformers.loss.loss_utils import ForCausalLMLoss

from demos.tracker import LiveTracker
from memory import footprint as F
from memory.architectures import custom

B, S, H, V = 2, 32, 32, 2048


def loss_peak(dtype: torch.dtype, hold_logits: bool) -> int:
    torch.manual_seed(0)
    head = torch.nn.Linear(H, V, bias=False).to(dtype)
    x = torch.randn(B, S, H, dtype=dtype, requires_grad=True)
    labels = torch.randint(0, V, (B, S))
    tracker = LiveTracker("cpu")
    tracker.ignore([x, labels, *head.parameters()])
    with tracker:
        logits = head(x)
        loss = ForCausalLMLoss(logits, labels, V)
        if not hold_logits:
            del logits
        loss.backward()
    return tracker.peak_bytes


@pytest.mark.parametrize("precision,dtype", [("fp32", torch.float32), ("bf16", torch.bfloat16)])
def test_the_loss_peak_is_three_fp32_logit_tensors(precision, dtype) -> None:
    logits = B * S * V
    e = 4 if dtype == torch.float32 else 2
    dropped, held = loss_peak(dtype, False), loss_peak(dtype, True)
    assert dropped // logits == F.LOSS_FP32_TENSORS * 4  # a few bytes of loss and labels
    assert held // logits == F.LOSS_FP32_TENSORS * 4 + e
    arch = custom(1, H, 1, 1, 4 * H, "gelu", "layernorm", V, True)
    planned = F.logits_peak_bytes(F.PlannerInputs(arch, seq=S, batch=B, precision=precision))
    assert planned == (held if e < 4 else dropped) // logits * logits
