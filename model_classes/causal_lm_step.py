"""One training step's forward of a transformers causal LM, and what autograd saves for
backward in it: per decoder layer and module, on the CPU as measured and as a GPU keeps it.
Runs on real tensors or under the caller's FakeTensorMode (shapes only, nothing allocated).

Each storage is counted once (views of it are the same storage), parameters apart, and
attributed to the decoder layer running when it was first saved (the layer's own input to
that layer; a tensor made outside the layers and passed in, such as a mask, outside them),
and inside the layer to the innermost module running. The counting itself is the ledger
every kind shares (model_classes.saved_step.SavedLedger); this module says where a storage
belongs and what a causal LM's forward is.

CPU against GPU: the measurement runs torch's CPU kernels; a plan prices the GPU's. The
terms that differ are converted per saved tensor, read off the autograd graph:
* dropout masks: 1 byte per number on CUDA (native_dropout's bool mask), the input's
  dtype on the CPU (its dropout multiplies by a float mask; found as the tensor
  torch.nn.functional.dropout saves that needs no gradient);
* LayerNorm's mean and 1/std (native_layer_norm's 2nd and 3rd results): fp32 on CUDA, the
  input's dtype on the CPU;
* SDPA's log-sum-exp (fp32 per head and token on both): CUDA's memory-efficient kernel,
  used for fp32 inputs or with an attention mask, pads it to 32 tokens;
* softmax under autocast: CUDA's autocast runs it in fp32 (its fp32 list,
  torch/include/ATen/autocast_mode.h, AT_FORALL_FP32_SET_OPT_DTYPE), the CPU's in its
  input's dtype: a 16-bit softmax output is kept in fp32 on CUDA, and where a later op
  saves it too (GPT-2's eager attention without dropout: the matmul with v) that op keeps
  the 16-bit cast of it (`.type(value.dtype)`) as well;
* SDPA with attention dropout: the CPU has no fused kernel with dropout and runs the
  math kernel (s² probabilities); CUDA's flash kernel drops inside the kernel, so the GPU
  variant is measured with the attention dropout set to 0 (the kernel keeps its random
  seed and offset: 16 bytes, left out).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from unittest import mock

import torch

from model_classes.saved_step import SavedLedger, Step, storage_key

__all__ = ["Step", "decoder_layers", "measure_step", "storage_key"]


class _GroupedMM(torch.autograd.Function):
    """torch's grouped_mm for shapes only, keeping for backward what its derivative keeps
    (torch 2.13, tools/autograd/derivatives.yaml, _grouped_mm: the input for the weight's
    gradient, the weight for the input's, each only where that gradient is computed)."""

    @staticmethod
    def forward(ctx, input, weight, offs):  # type: ignore[override]
        ctx.save_for_backward(input if ctx.needs_input_grad[1] else None,
                              weight if ctx.needs_input_grad[0] else None)
        return input.new_empty((input.shape[0], weight.shape[-1]))

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        raise NotImplementedError("shapes only: a measured step runs no backward")


def _fake_grouped_mm(input: torch.Tensor, weight: torch.Tensor, offs: torch.Tensor
                     ) -> torch.Tensor:
    """transformers.integrations.moe._grouped_mm as it runs on the CPU and on a GPU
    (torch's grouped_mm of the input cast to the weight's dtype), for fake tensors."""
    return _GroupedMM.apply(input.to(weight.dtype), weight, offs)


@contextlib.contextmanager
def _as_real_batch() -> Iterator[None]:
    """What transformers decides from values that fake tensors have not, decided as for a
    real batch. It looks for packed sequences in position_ids by reading them (unable, it
    builds a mask as if the batch were packed; a real unpacked batch has none); and its
    experts run torch's grouped_mm, whose shape function under fake tensors wants bf16
    where the CPU and GPU kernels take fp32 too, and whose fallback (a custom op) keeps its
    input and weight for backward even where the weight is frozen: under fake tensors a
    stand-in of grouped_mm runs (_GroupedMM), keeping what grouped_mm keeps."""
    from torch._guards import detect_fake_mode

    fake = detect_fake_mode() is not None
    with mock.patch("transformers.masking_utils.find_packed_sequence_indices",
                    lambda position_ids: None), \
            (mock.patch("transformers.integrations.moe._grouped_mm", _fake_grouped_mm)
             if fake else contextlib.nullcontext()):
        yield


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    from transformers.modeling_layers import GradientCheckpointingLayer

    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


def measure_step(model: torch.nn.Module, batch: int, seq: int, autocast: bool = False,
                 input_ids: torch.Tensor | None = None) -> Step:
    """One forward with its loss; what autograd saves, per layer and module, on the CPU
    and as a GPU keeps it (model_classes.saved_step). Runs real or under the caller's
    FakeTensorMode."""
    from torch._guards import detect_fake_mode

    layers = decoder_layers(model)
    index = {id(m): i for i, m in enumerate(layers)}
    state: dict[str, Any] = {"layer": None, "stack": [], "shared": set(), "input": set()}
    vocab = model.config.get_text_config().vocab_size

    def where(t: torch.Tensor, key: int) -> tuple[int, str, str]:
        layer = state["layer"]
        module = state["stack"][-1] if state["stack"] else ""
        if layer is None or key in state["shared"]:
            kind = "loss" if t.dim() >= 2 and t.shape[-1] == vocab else "other"
            return -1, "outside", kind
        return layer, module, ("input" if key in state["input"] else
                               "lora" if "lora_" in module else "other")

    ledger = SavedLedger(model, where)
    handles = []
    names = {}
    for i, layer in enumerate(layers):
        for sub_name, sub in layer.named_modules():
            names[id(sub)] = (i, sub_name)

    def pre(module, args, kwargs):
        where = names.get(id(module))
        if where is None:
            return None
        i, sub_name = where
        if id(module) in index:
            state["layer"] = i
            hidden = args[0] if args else kwargs.get("hidden_states")
            for t in [*args, *kwargs.values()]:
                for u in (t if isinstance(t, tuple) else (t,)):
                    if isinstance(u, torch.Tensor) and u is not hidden:
                        state["shared"].add(storage_key(u))
                        ledger.hold.append(u)
            if isinstance(hidden, torch.Tensor):
                state["input"].add(storage_key(hidden))
                ledger.hold.append(hidden)
        state["stack"].append(sub_name)
        return None

    fake = detect_fake_mode() is not None

    def post(module, args, kwargs, output):
        if id(module) not in names:
            return None
        if fake and isinstance(getattr(module, "num_experts", None), int) and hasattr(
                module, "down_proj") and state["layer"] is not None:
            # torch's grouped_mm keeps the experts' offsets (int32, one per expert) for
            # backward; its stand-in under fake tensors (_GroupedMM) keeps no integer
            # tensor: count them
            ledger.add(("offsets", id(module), len(ledger.seen)),
                       (state["layer"], state["stack"][-1], "other"), 4 * module.num_experts)
        if state["stack"]:
            state["stack"].pop()
        if id(module) in index:
            state["layer"] = None
        return None

    for module in model.modules():
        if id(module) in names:
            handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
            handles.append(module.register_forward_hook(post, with_kwargs=True))

    if input_ids is None:
        input_ids = torch.zeros((batch, seq), dtype=torch.long)
    cast = (torch.autocast("cpu", dtype=torch.bfloat16) if autocast
            else contextlib.nullcontext())
    try:
        with ledger.hooked(), cast, _as_real_batch():
            out = model(input_ids=input_ids, labels=input_ids, use_cache=False)
        return ledger.step(out.loss.grad_fn, autocast)
    finally:
        for h in handles:
            h.remove()
