"""What the compiler-budget sweep measures by default (the page's defaults and the
benchmark's): the budgets, the manual strategies beside them and the model. Without torch,
so that the command line's help and the page's settings need no engine."""

from __future__ import annotations

from memory.config import ModelConfig

# The budgets the page and the benchmark sweep: both end points and two between.
BUDGETS: tuple[float, ...] = (1.0, 0.5, 0.2, 0.0)
# The manual strategies run eagerly on the same model and batch.
EAGER_STRATEGIES: tuple[str, ...] = (
    "none", "every-layer", "every-k:2", "selective:save-matmuls",
    "selective:save-every-other-matmul", "selective:save-attention")
# Manual strategies also run under torch.compile (at the default budget 1.0).
COMPILED_STRATEGIES: tuple[str, ...] = ("every-layer", "selective:save-matmuls")
# The page's model: small, because every point compiles (tens of seconds each on a small
# CPU; the compile time grows with the graph, that is with the layers).
BASE = ModelConfig(layers=4, hidden=128, heads=4, seq_len=128, batch=2, vocab=1024)
