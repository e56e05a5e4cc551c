"""Which tensors autograd saves are weights, not activations: autocast's 16-bit copy of a
trainable parameter is saved for backward like an activation, but a plan counts it with the
weights. Reads only the autograd graph's node names, so this room stays free of torch."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

# nodes that only view their input: a saved view of a weight copy is still the copy
VIEW_NODES = frozenset({"TBackward0", "ViewBackward0", "TransposeBackward0",
                        "PermuteBackward0", "UnsafeViewBackward0", "ExpandBackward0"})


def is_weight_copy(t: Any, views: Collection[str] = VIEW_NODES) -> bool:
    """Whether a saved tensor (a torch.Tensor) is (a view of) a cast of a trainable
    parameter: autocast's 16-bit weight copy, a ToCopyBackward0 straight from the
    parameter's AccumulateGrad."""
    fn = t.grad_fn
    while fn is not None and type(fn).__name__ in views:
        fn = fn.next_functions[0][0] if fn.next_functions else None
    if fn is None or type(fn).__name__ != "ToCopyBackward0" or not fn.next_functions:
        return False
    source = fn.next_functions[0][0]
    return source is not None and type(source).__name__ == "AccumulateGrad"
