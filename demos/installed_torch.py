"""What the installed torch does where releases differ, read from torch's own code rather
than from a version string, so that the lab's predictions hold on whichever torch runs it.

* FLOP counting of fused attention: torch.utils.flop_counter has a formula for an op only
  when the op is in its registry (`flop_registry`, filled by `register_flop_formula`).
  torch 2.13 registers the CUDA kernels (_scaled_dot_product_flash/efficient/cudnn_attention
  and their backward) but not the CPU's fused kernel, so on a CPU it counts no attention;
  torch 2.15 registers _scaled_dot_product_flash_attention_for_cpu and its backward too.
* A selective policy under saved_tensors_hooks (save_on_cpu, a byte counter): torch 2.13's
  checkpoint has no `respect_saved_tensors_hooks` and the tensors the policy's cache keeps
  bypass the hooks; from torch 2.14 the argument exists (default None: still bypassed, with
  a FutureWarning while hooks are active; True routes them through the hooks).
"""

from __future__ import annotations

import inspect

import torch
from torch.utils import checkpoint as checkpoint_module
from torch.utils.flop_counter import flop_registry

_aten = torch.ops.aten

# The fused attention kernels scaled_dot_product_attention dispatches to, forward and
# backward, by device kind (a GPU takes one of the three; each is registered alike)
ATTENTION_KERNELS: dict[str, tuple[tuple[str, str], ...]] = {
    "cpu": (("_scaled_dot_product_flash_attention_for_cpu",
             "_scaled_dot_product_flash_attention_for_cpu_backward"),),
    "cuda": (("_scaled_dot_product_flash_attention",
              "_scaled_dot_product_flash_attention_backward"),
             ("_scaled_dot_product_efficient_attention",
              "_scaled_dot_product_efficient_attention_backward"),
             ("_scaled_dot_product_cudnn_attention",
              "_scaled_dot_product_cudnn_attention_backward")),
}


def _registered(name: str, registry: dict | None = None) -> bool:
    packet = getattr(_aten, name, None)
    return packet is not None and packet in (flop_registry if registry is None else registry)


def counter_counts_attention(device_kind: str, registry: dict | None = None) -> bool:
    """Whether torch's FlopCounterMode counts the fused attention kernel on `device_kind`
    ("cpu" or "cuda"): every kernel scaled_dot_product_attention may take there has a
    formula, forward and backward, in the counter's registry (`registry`: another one,
    for a test)."""
    kernels = ATTENTION_KERNELS["cpu" if device_kind == "cpu" else "cuda"]
    return all(_registered(name, registry) for pair in kernels for name in pair)


def selective_respects_hooks_option(function=None) -> bool:
    """Whether torch.utils.checkpoint.checkpoint (or `function`) takes
    `respect_saved_tensors_hooks`: without it (torch 2.13) what a selective policy's cache
    keeps never passes through the surrounding saved_tensors_hooks."""
    target = checkpoint_module.checkpoint if function is None else function
    return "respect_saved_tensors_hooks" in inspect.signature(target).parameters
