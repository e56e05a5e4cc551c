"""One training step's forward of a transformers causal LM, and what autograd saves for
backward in it: per decoder layer and module, on the CPU as measured and as a GPU keeps it.
Runs on real tensors or under the caller's FakeTensorMode (shapes only, nothing allocated).

Each storage is counted once (views of it are the same storage), parameters apart, and
attributed to the decoder layer running when it was first saved (the layer's own input to
that layer; a tensor made outside the layers and passed in, such as a mask, outside them),
and inside the layer to the innermost module running.

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
import weakref
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import torch

from memory.saved_weights import VIEW_NODES, is_weight_copy


def storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


@dataclass
class Step:
    """Bytes per (slot index, module, kind, padded): cpu and gpu."""

    cpu: dict[tuple, int] = field(default_factory=lambda: defaultdict(int))
    gpu: dict[tuple, int] = field(default_factory=lambda: defaultdict(int))



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


def _gpu_rules(root, autocast: bool = False) -> dict[int, tuple[str, tuple[int, ...], int]]:
    """Storage -> (rule, shape, element size) for the saved tensors CUDA keeps otherwise
    (see the module's docstring), read off the autograd graph from `root`; `autocast`:
    the step ran under autocast."""
    rules: dict[int, tuple[str, tuple[int, ...], int]] = {}
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        name = type(node).__name__
        picks: list[tuple[str, str]] = []
        if name == "NativeDropoutBackward0":
            picks = [("_saved_result1", "mask")]
        elif name == "NativeLayerNormBackward0":
            picks = [("_saved_result1", "stats"), ("_saved_result2", "stats")]
        elif name == "SoftmaxBackward0" and autocast:
            picks = [("_saved_result", "softmax")]
        elif name.startswith("ScaledDotProduct") and "Attention" in name:
            masked = getattr(node, "_saved_attn_mask", None) is not None
            query = getattr(node, "_saved_query", None)
            wide = isinstance(query, torch.Tensor) and query.dtype == torch.float32
            picks = [("_saved_logsumexp", "lse-pad" if masked or wide else "lse")]
        for attr, rule in picks:
            t = getattr(node, attr, None)
            if rule == "softmax" and isinstance(t, torch.Tensor) and t.element_size() > 2:
                continue  # softmax(dtype=float32): fp32 on both
            if isinstance(t, torch.Tensor):
                rules[storage_key(t)] = (rule, tuple(t.shape), t.element_size())
        stack.extend(fn for fn, _ in node.next_functions)
    return rules


# a select of a weight copy (a fused projection's slice) is the copy too

_VIEWS = VIEW_NODES | {"SelectBackward0"}


def measure_step(model: torch.nn.Module, batch: int, seq: int, autocast: bool = False,
                 input_ids: torch.Tensor | None = None) -> Step:
    """One forward with its loss; what autograd saves, per layer and module, on the CPU
    and as a GPU keeps it. Runs real or under the caller's FakeTensorMode."""
    from torch._guards import detect_fake_mode

    layers = decoder_layers(model)
    index = {id(m): i for i, m in enumerate(layers)}
    # the parameters' storages, held to the step's end: bitsandbytes' Linear4bit swaps a
    # bias for a cast of it during the step, and a freed address goes to the next storage
    held = [p.untyped_storage() for p in [*model.parameters(), *model.buffers()]]
    params = {s._cdata for s in held}
    # "alive": the tensors whose storages "shared" and "input" name, held to the step's end:
    # a storage's key is its address, which a freed storage hands on to the next one
    state: dict[str, Any] = {"layer": None, "stack": [], "shared": set(), "input": set(),
                             "dropout": False, "alive": []}
    seen: dict[object, tuple] = {}
    packs: dict[object, int] = defaultdict(int)  # how many saves of each storage
    masks: dict[object, int] = {}  # dropout masks the CPU keeps as floats: their numbers
    # each storage's saved tensors, weakly: autograd holds what pack returns for as long as
    # the node that saved it lives, so a storage is kept for backward while one is alive
    refs: dict[object, list[weakref.ref]] = {}

    def _alive(key: object) -> bool:
        return any(ref() is not None for ref in refs.get(key, ()))

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
                        state["alive"].append(u)
            if isinstance(hidden, torch.Tensor):
                state["input"].add(storage_key(hidden))
                state["alive"].append(hidden)
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
            seen[("offsets", id(module), len(seen))] = (
                state["layer"], state["stack"][-1], "other", 4 * module.num_experts)
        if state["stack"]:
            state["stack"].pop()
        if id(module) in index:
            state["layer"] = None
        return None

    for module in model.modules():
        if id(module) in names:
            handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
            handles.append(module.register_forward_hook(post, with_kwargs=True))

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = storage_key(t)
        if key in seen and not _alive(key):
            # a storage saved by a branch of the graph that nothing used (a router's top-k
            # values, a discarded output) was freed with it and lent this one its address
            for table in (seen, masks, packs, refs):
                table.pop(key, None)
        packs[key] += 1
        if key in params:
            return t
        if key in seen:
            refs[key].append(weakref.ref(t))
            return t
        if is_weight_copy(t, _VIEWS):  # autocast's 16-bit weight copy: the plan counts it with the
            params.add(key)  # weights (mixed precision's 6 bytes per parameter)
            return t
        nbytes = t.untyped_storage().nbytes()
        if not nbytes:
            return t
        layer = state["layer"]
        module = state["stack"][-1] if state["stack"] else ""
        if layer is None or key in state["shared"]:
            slot, kind = -1, "other"
            if t.dim() >= 2 and t.shape[-1] == model.config.get_text_config().vocab_size:
                kind = "loss"
            module = "outside"
        else:
            slot = layer
            kind = ("input" if key in state["input"] else
                    "lora" if "lora_" in module else "other")
        seen[key] = (slot, module, kind, nbytes)
        refs[key] = [weakref.ref(t)]
        if state["dropout"] and not t.requires_grad and t.is_floating_point():
            # the CPU's dropout keeps its mask in the input's dtype (input * mask / (1 - p))
            masks[key] = nbytes // t.element_size()
        return t

    if input_ids is None:
        input_ids = torch.zeros((batch, seq), dtype=torch.long)
    cast = (torch.autocast("cpu", dtype=torch.bfloat16) if autocast
            else contextlib.nullcontext())
    dropout = torch.nn.functional.dropout

    def marked_dropout(*args, **kwargs):
        state["dropout"] = True
        try:
            return dropout(*args, **kwargs)
        finally:
            state["dropout"] = False

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), cast, \
                _as_real_batch(), mock.patch.object(torch.nn.functional, "dropout",
                                                    marked_dropout):
            out = model(input_ids=input_ids, labels=input_ids, use_cache=False)
        rules = _gpu_rules(out.loss.grad_fn, autocast)
    finally:
        for h in handles:
            h.remove()
    step = Step()
    for key, (slot, module, kind, nbytes) in seen.items():
        if key in refs and not _alive(key):
            continue  # freed before backward: its graph branch died in forward
        gpu, padded = nbytes, False
        if key in masks:  # CUDA's native_dropout keeps a bool mask
            gpu = masks[key]
        rule = rules.get(key)
        if rule is not None:
            name, shape, size = rule
            numel = nbytes // size
            if name == "mask":
                gpu = numel
            elif name == "stats":
                gpu = numel * 4
            elif name == "softmax":  # fp32 on CUDA, and cast back for a later op that saves it
                gpu = numel * 4 + (nbytes if packs[key] > 1 else 0)
            elif name == "lse-pad":
                padded = True
            if name.startswith("lse"):
                kind = "lse"
        step.cpu[(slot, module, kind, False)] += nbytes
        step.gpu[(slot, module, kind, padded)] += gpu
    return step
