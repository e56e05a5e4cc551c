"""How a strategy runs the layers: consecutive segments, each kept, checkpointed or
checkpointed with a per-op policy. Plain data, shared by the model, the theory and the
budget planner."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Segment:
    """Layers [start, stop) run as one unit: 'keep' (plain), 'checkpoint', or
    'selective' (checkpoint with a per-op policy: a SelectivePolicy value, or a factory of
    policy functions, one per checkpointed call)."""

    start: int
    stop: int
    mode: str = "keep"
    policy: Any = None  # str | Callable[[], policy function] | None

    @property
    def size(self) -> int:
        return self.stop - self.start


def sqrt_k(layers: int) -> int:
    """Segment length for the sqrt strategy: about sqrt(N) layers."""
    return max(1, round(math.sqrt(layers)))
