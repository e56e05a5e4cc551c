"""Bytes per parameter and per activation value, by precision and optimizer (the Hugging
Face "model training anatomy" accounting): what weights, gradients and optimizer state cost."""

from __future__ import annotations

from dataclasses import dataclass

from i18n import N_


@dataclass(frozen=True)
class Precision:
    key: str
    label: str  # marked N_
    weight_bytes: int  # per parameter, every copy of the weights together
    grad_bytes: int  # per parameter
    activation_bytes: int  # per activation value


PRECISIONS: dict[str, Precision] = {
    "mixed": Precision("mixed", N_("Mixed precision (16-bit compute, 32-bit master weights)"),
                       6, 4, 2),
    "fp32": Precision("fp32", N_("32-bit everywhere (fp32)"), 4, 4, 4),
    "bf16": Precision("bf16", N_("Pure 16-bit (bf16 weights, gradients and optimizer "
                                 "state; no autocast)"), 2, 2, 2),
}


@dataclass(frozen=True)
class Optimizer:
    key: str
    label: str  # marked N_
    state_bytes: int  # per parameter


OPTIMIZERS: dict[str, Optimizer] = {
    "adamw": Optimizer("adamw", N_("AdamW (two states in the weights' dtype)"), 8),
    "adamw-8bit": Optimizer("adamw-8bit", N_("8-bit AdamW"), 2),
    "sgd-momentum": Optimizer("sgd-momentum", N_("SGD with momentum"), 4),
    "sgd": Optimizer("sgd", N_("Plain SGD (no state)"), 0),
}


# Optimizers whose state tensors take the parameters' dtype (torch 2.13: torch/optim/adam.py,
# exp_avg = zeros_like(p); sgd.py, the momentum buffer a clone of the gradient); the
# `state_bytes` above are for fp32 parameters. 8-bit AdamW's state is 8-bit whatever the
# parameters' dtype.
STATE_IN_PARAM_DTYPE = ("adamw", "sgd-momentum", "sgd")


def optimizer_state_bytes(precision: str, optimizer: str) -> int:
    """Optimizer state per trained parameter: in pure bf16 the parameters are bf16, and
    torch's AdamW and SGD keep their state in bf16 too (half the fp32 bytes)."""
    state = OPTIMIZERS[optimizer].state_bytes
    if precision == "bf16" and optimizer in STATE_IN_PARAM_DTYPE:
        return state * PRECISIONS["bf16"].weight_bytes // 4
    return state
