"""What changes what a model keeps for backward, as one record: the precision, the
attention kernel, LoRA, the device priced and QLoRA's 4-bit base."""

from __future__ import annotations

from dataclasses import dataclass

import torch

# QUANTIZED: a variant key's precision prefix for QLoRA, the base in 4-bit NF4
# ("4bit-fp32": loaded in fp32, no autocast; "4bit-mixed": loaded in bf16, under bf16
# autocast)
from memory.footprint import QUANTIZED

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
KERNELS = ("sdpa", "eager")


@dataclass(frozen=True)
class Variant:
    """What changes what a layer keeps: the precision (fp32, bf16, mixed: autocast over
    fp32 weights, or over a bf16 base under LoRA), the attention kernel, LoRA (rank and
    targets: "attention" or "all-linear"; rank 0: full fine-tuning), the device priced
    ("cpu": as measured, "cuda": converted) and `quantized`: QLoRA's base, every linear
    layer transformers quantizes in bitsandbytes' 4-bit NF4 (quantized_base)."""

    precision: str = "fp32"
    kernel: str = "sdpa"
    lora_rank: int = 0
    lora_targets: str = "all-linear"
    device: str = "cpu"
    quantized: bool = False


def split_quantized(precision: str) -> tuple[str, bool]:
    """A variant key's precision as (the precision, whether the base is QLoRA's 4-bit):
    "4bit-mixed" is ("mixed", True)."""
    return precision.removeprefix(QUANTIZED), precision.startswith(QUANTIZED)


def autocast(variant: Variant) -> bool:
    """Whether the step runs under bf16 autocast (mixed precision)."""
    return variant.precision == "mixed"


def base_dtype(variant: Variant) -> str:
    """The dtype the weights are built in: bf16 for a bf16 plan and for a LoRA base under
    mixed precision, fp32 otherwise."""
    return "bf16" if variant.precision == "bf16" or (
        variant.precision == "mixed" and variant.lora_rank) else "fp32"
