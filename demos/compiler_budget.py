"""The compiler's memory budget, measured: `torch.compile` with
`torch._functorch.config.activation_memory_budget` swept on the lab's model, beside the
manual strategies (eager, and two of them compiled) on the same model and batch.

The budget is a **private** setting (`torch._functorch`, PyTorch 2.13:
torch/_functorch/config.py). The min-cut partitioner that splits a compiled training
graph into forward and backward reads it (torch/_functorch/partitioners.py,
`choose_saved_values_set`): at 1.0 it saves its default, runtime-optimised set; at 0.0 it
saves only the graph's inputs (the whole compiled region checkpointed); in between it
solves a knapsack for the least recomputation whose saved bytes stay under that share of
the way from the first size to the second. One budget applies to a whole compiled graph
(`torch.autograd.graph.region_activation_memory_budget` must cover every forward op of
the graph it is used in), so the sweep sets the global value around each compile, after
`torch._dynamo.reset()`.

What each point measures, on this run:

* bytes saved for backward: compiled graphs save through `ctx.save_for_backward`, so
  `torch.autograd.graph.saved_tensors_hooks` sees every tensor they keep; counted once per
  storage, parameters left out. Eager non-reentrant checkpointing packs its inputs through
  those hooks (one pack per input), but a selective policy's cache keeps its tensors
  outside them (torch 2.13; torch 2.14 added `respect_saved_tensors_hooks=True`), so eager
  points are measured with the engine's live tracker (demos.tracker: bytes created
  in forward and still alive when it ends, the parameters and the token ids left out). On
  the plain model both methods agree (a test checks it).
* counted FLOPs: `torch.utils.flop_counter` formulas. A `TorchDispatchMode` such as
  `FlopCounterMode` makes Dynamo skip the frame (torch/_dynamo/convert_frame.py), so the
  counter around a compiled step only counts an eager step. For compiled points the
  FLOPs are counted from the forward and backward graphs the partitioner hands Inductor
  (every op with a formula, from the shapes in the graph); the recomputed FLOPs are the
  step's FLOPs above the step without recomputation. Eager points run under
  `FlopCounterMode`.
* step time: forward and backward of one step, median of `repeats` runs after a warm
  step, with the middle half as the spread. Compiled points are timed right after their
  compile (a reset drops the previous compiled code), not interleaved.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import pandas as pd
import torch
from torch import nn
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)
from torch.utils.flop_counter import (
    FlopCounterMode,
    flop_registry,
    sdpa_backward_flop_count,
    sdpa_flop_count,
    shape_wrapper,
)

from demos.budget_settings import BASE, BUDGETS, COMPILED_STRATEGIES, EAGER_STRATEGIES
from demos.model import GPT, MATMUL_OPS, build_model, make_batch, policy_fn
from demos.results import EVENTS_COLUMN
from demos.tracker import tracking
from memory.config import ConfigError, ModelConfig

__all__ = ["BASE", "BUDGETS", "COMPILED_STRATEGIES", "COMPILER_BYTES", "EAGER_STRATEGIES",
           "BudgetPoint", "compile_seconds", "from_frame", "measure_point", "point_names",
           "sweep_budget", "to_frame"]

EVERY_OTHER_MATMUL = "save-every-other-matmul"
# One compile's CPU-estimate seconds (memory.theory.cpu_seconds' unit; the service scales
# it by this device's measured speed). Measured on a shared 2-core machine: 10-30 s for a
# 1-2 layer model when lightly loaded, 120-400 s for 4 layers at a load average of 13-17.
COMPILE_BASE_S = 20.0
COMPILE_PER_LAYER_S = 8.0
# What the worker grows by while compiling (Inductor's modules and graphs): measured
# 150-190 MiB here; bounded with room to spare.
COMPILER_BYTES = 512 * 2**20


def compile_seconds(cfg: ModelConfig) -> float:
    """Estimated CPU-estimate seconds of compiling one point's forward and backward."""
    return COMPILE_BASE_S + COMPILE_PER_LAYER_S * cfg.layers
_SAVE, _RECOMPUTE = CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_RECOMPUTE
# torch 2.13's flop counter has no formula for the CPU's fused attention kernel
# (torch/utils/flop_counter.py registers the CUDA ones): the same SDPA formulas, for it
# (like torch's, without a discount for the causal mask).
_aten = torch.ops.aten


def _attention_flops(query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query, key, value)


def _attention_backward_flops(grad_out, query, key, value, *args, out_shape=None,
                              **kwargs) -> int:
    return sdpa_backward_flop_count(grad_out, query, key, value)


CPU_ATTENTION_FLOPS: dict[Any, Callable] = {
    _aten._scaled_dot_product_flash_attention_for_cpu: _attention_flops,
    _aten._scaled_dot_product_flash_attention_for_cpu_backward: _attention_backward_flops,
}
FORMULAS: dict[Any, Callable] = {
    **flop_registry, **{k: shape_wrapper(v) for k, v in CPU_ATTENTION_FLOPS.items()}}


@dataclass
class BudgetPoint:
    """One measured point. kind: "budget" (compiled, a budget), "compiled" (a manual
    strategy under torch.compile, budget 1.0) or "eager" (a manual strategy)."""

    kind: str
    strategy: str  # "budget:0.5", "every-layer", "selective:save-matmuls", ...
    budget: float | None
    saved_bytes: int  # held for backward at the end of forward, parameters left out
    flops: int  # counted FLOPs of the training step (forward + backward)
    forward_flops: int
    backward_flops: int
    step_seconds: float
    step_seconds_low: float  # the middle half of the timed runs
    step_seconds_high: float
    compile_seconds: float | None  # the first (compiling) forward and backward
    loss: float
    max_grad_diff: float  # largest |gradient difference| to the eager plain step
    measured_by: str  # "saved-tensors-hooks" or "live-tracker"
    flops_counted_by: str  # "compiled-graphs" or "flop-counter"
    runs: list[float] = field(default_factory=list)
    # an eager point's tracked step (LiveTracker.events), for the memory snapshot; None for
    # a compiled one: under a dispatch mode such as the tracker Dynamo skips the frame
    # (torch/_dynamo/convert_frame.py), so a tracker would only see an eager step
    memory_events: list[list] | None = None

    @property
    def label(self) -> str:
        return self.strategy if self.kind != "compiled" else f"compile+{self.strategy}"


def point_names(budgets: Sequence[float] = BUDGETS,
                eager: Sequence[str] = EAGER_STRATEGIES,
                compiled: Sequence[str] = COMPILED_STRATEGIES) -> list[tuple[str, str]]:
    """(kind, strategy) of every point a sweep measures, in order."""
    return ([("budget", f"budget:{b:g}") for b in budgets]
            + [("compiled", s) for s in compiled] + [("eager", s) for s in eager])


# ---------------------------------------------------------------- manual strategies

def _every_other_matmul() -> tuple[Any, Any]:
    """Selective checkpointing that saves the 1st, 3rd, ... matmul of each checkpointed
    layer (in a GPT block: QKV and the MLP's first linear) and recomputes the rest. The
    forward and the recomputation count their matmuls apart, so both make the same
    choice for the same op."""
    seen = {False: 0, True: 0}

    def decide(ctx, func, *args, **kwargs) -> CheckpointPolicy:
        if func in MATMUL_OPS:
            n = seen[ctx.is_recompute]
            seen[ctx.is_recompute] += 1
            return _SAVE if n % 2 == 0 else _RECOMPUTE
        return _RECOMPUTE

    return create_selective_checkpoint_contexts(decide)


def _context_fn(strategy: str) -> Callable | None:
    if not strategy.startswith("selective:"):
        return None
    name = strategy.partition(":")[2]
    if name == EVERY_OTHER_MATMUL:
        return _every_other_matmul
    return partial(create_selective_checkpoint_contexts, policy_fn(name))


class _Checkpointed(nn.Module):
    """Consecutive blocks run as one checkpointed segment (non-reentrant)."""

    def __init__(self, blocks: Sequence[nn.Module], context_fn: Callable | None) -> None:
        super().__init__()
        self.inner = nn.ModuleList(blocks)
        self.context_fn = context_fn

    def _run(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.inner:
            x = block(x)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.context_fn is None:
            return checkpoint(self._run, x, use_reentrant=False)
        return checkpoint(self._run, x, use_reentrant=False, context_fn=self.context_fn)


def strategy_model(cfg: ModelConfig, strategy: str) -> GPT:
    """The lab's model (same weights for every strategy) with its blocks checkpointed as
    the strategy says: none, every-layer, every-k:K or selective:POLICY (one layer per
    segment; POLICY one of memory.strategies' policies or save-every-other-matmul)."""
    model = build_model(cfg)
    if strategy.startswith("budget:") or strategy == "none":
        return model
    size = 1
    if strategy.startswith("every-k:"):
        size = int(strategy.partition(":")[2])
    elif strategy != "every-layer" and not strategy.startswith("selective:"):
        raise ConfigError(f"strategy={strategy!r}: allowed none, every-layer, every-k:K, "
                          f"selective:POLICY")
    context_fn = _context_fn(strategy)
    blocks = list(model.blocks)
    model.blocks = nn.ModuleList(_Checkpointed(blocks[i:i + size], context_fn)
                                 for i in range(0, len(blocks), size))
    return model


# ---------------------------------------------------------------- measuring

def _storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def saved_by_hooks(step: Callable[[], torch.Tensor], leave_out: set[int]
                   ) -> tuple[torch.Tensor, int]:
    """Run a forward; the bytes its autograd graph saves for backward, once per storage,
    storages in `leave_out` (parameters) not counted."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key not in leave_out:
            seen[key] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = step()
    return loss, sum(seen.values())


def held_by_tracker(model: GPT, step: Callable[[], torch.Tensor],
                    inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, int, list[list]]:
    """Run a whole step (forward and backward) under the live tracker: the loss, the bytes
    the forward created that are still alive at its end (everything backward holds on to,
    a selective policy's cache included; the parameters and `inputs` left out) and the
    tracker's event log."""
    with tracking(model, inputs, "cpu") as tracker:
        loss = step()
        held = tracker.live_bytes - loss.untyped_storage().nbytes()  # the loss itself
        tracker.start_backward()
        loss.backward()
    tracker.close()
    return loss, held, tracker.events or []


class _GraphFlops:
    """An Inductor backend that records the FLOPs of the forward and backward graphs the
    partitioner produced (torch.utils.flop_counter's formulas over the shapes in each
    node's metadata) and compiles them with Inductor as usual."""

    def __init__(self) -> None:
        self.forward = 0
        self.backward = 0

    @staticmethod
    def count(gm: torch.fx.GraphModule) -> int:
        def value(a: Any) -> Any:
            return a.meta.get("val") if isinstance(a, torch.fx.Node) else a

        total = 0
        for node in gm.graph.nodes:
            if node.op != "call_function":
                continue
            target, args, out = node.target, node.args, node.meta.get("val")
            # Inside a checkpointed region an op that draws random numbers (the fused
            # attention, for its dropout) runs wrapped: run_and_save_rng_state(op, *args)
            # in forward, run_with_rng_state(state, op, *args) when it is recomputed.
            name = getattr(target, "__name__", "")
            if name == "run_and_save_rng_state":
                target, args = args[0], args[1:]
                out = out[1] if isinstance(out, tuple | list) else out
            elif name == "run_with_rng_state":
                target, args = args[1], args[2:]
            formula = FORMULAS.get(getattr(target, "overloadpacket", None))
            if formula is None:
                continue
            args = torch.utils._pytree.tree_map(value, args)
            kwargs = torch.utils._pytree.tree_map(value, node.kwargs)
            total += int(formula(*args, **kwargs, out_val=out))
        return total

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        from torch._inductor.compile_fx import compile_fx, compile_fx_inner

        def inner(graph: torch.fx.GraphModule, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            flops = self.count(graph)
            if kwargs.get("is_backward"):
                self.backward += flops
            else:
                self.forward += flops
            return compile_fx_inner(graph, inputs, *args, **kwargs)

        return compile_fx(gm, example_inputs, inner_compile=inner)


@contextlib.contextmanager
def _fresh_compiler(budget: float) -> Iterator[None]:
    """A clean Dynamo state and this budget for whatever compiles inside. The AOT
    autograd cache is off so that every compile runs the partitioner (and counts)."""
    import torch._dynamo
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    torch._dynamo.reset()
    with functorch_config.patch(activation_memory_budget=float(budget),
                                enable_autograd_cache=False), \
            inductor_config.patch(compile_threads=1):
        yield
    torch._dynamo.reset()


def _grads(model: nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def _max_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    if len(a) != len(b):
        return float("inf")
    return max((float((x - y).abs().max()) for x, y in zip(a, b, strict=True)),
               default=0.0)


def _spread(runs: list[float]) -> tuple[float, float, float]:
    """Median and the middle half (as reports.timing.time_spread: quartiles from 4 runs,
    else the range)."""
    ordered = sorted(runs)
    if len(ordered) < 4:
        return statistics.median(ordered), ordered[0], ordered[-1]
    low, _, high = statistics.quantiles(ordered, n=4, method="inclusive")
    return statistics.median(ordered), low, high


def measure_point(cfg: ModelConfig, kind: str, strategy: str, repeats: int = 5,
                  reference: list[torch.Tensor] | None = None) -> tuple[BudgetPoint, list]:
    """Measure one point; also returns its gradients (the eager plain step's are the
    reference the others are compared with)."""
    if kind not in ("budget", "compiled", "eager"):
        raise ConfigError(f"kind={kind!r}: allowed budget, compiled, eager")
    budget = float(strategy.partition(":")[2]) if kind == "budget" else (
        1.0 if kind == "compiled" else None)
    if budget is not None and not 0.0 <= budget <= 1.0:
        raise ConfigError(f"budget={budget}: allowed 0..1")
    cfg = cfg.validated("cpu")
    model = strategy_model(cfg, strategy)
    idx, tgt = make_batch(cfg)
    params = list(model.parameters())
    leave_out = {_storage_key(p) for p in params} | {_storage_key(idx), _storage_key(tgt)}
    compiled = kind != "eager"
    counter = _GraphFlops()
    stack = contextlib.ExitStack()
    with stack:
        if compiled:
            stack.enter_context(_fresh_compiler(budget))
            forward = torch.compile(model, backend=counter)
        else:
            forward = model

        def step() -> torch.Tensor:
            torch.manual_seed(cfg.seed + 1)
            return forward(idx, tgt)

        model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        step().backward()  # compiles the forward and the backward graphs
        compile_seconds = time.perf_counter() - start if compiled else None
        model.zero_grad(set_to_none=True)
        events = None
        if compiled:
            loss, saved = saved_by_hooks(step, leave_out)
            forward_flops, backward_flops = counter.forward, counter.backward
            loss.backward()
        else:
            loss, saved, events = held_by_tracker(model, step, [idx, tgt])
        grads = _grads(model)
        if not compiled:
            model.zero_grad(set_to_none=True)
            with FlopCounterMode(display=False,
                                 custom_mapping=CPU_ATTENTION_FLOPS) as flop_counter:
                out = step()
                forward_flops = flop_counter.get_total_flops()
                out.backward()
            backward_flops = flop_counter.get_total_flops() - forward_flops
        runs = []
        for _ in range(max(repeats, 1)):
            model.zero_grad(set_to_none=True)
            start = time.perf_counter()
            step().backward()
            runs.append(time.perf_counter() - start)
    median, low, high = _spread(runs)
    point = BudgetPoint(
        kind=kind, strategy=strategy, budget=budget, saved_bytes=int(saved),
        flops=int(forward_flops + backward_flops), forward_flops=int(forward_flops),
        backward_flops=int(backward_flops), step_seconds=median, step_seconds_low=low,
        step_seconds_high=high, compile_seconds=compile_seconds, loss=float(loss.detach()),
        max_grad_diff=_max_diff(grads, reference) if reference is not None else 0.0,
        measured_by="saved-tensors-hooks" if compiled else "live-tracker",
        flops_counted_by="compiled-graphs" if compiled else "flop-counter", runs=runs,
        memory_events=events)
    return point, grads


def reference_grads(cfg: ModelConfig) -> list[torch.Tensor]:
    """The gradients of one eager plain step, the reference of every point."""
    model = build_model(cfg.validated("cpu"))
    idx, tgt = make_batch(cfg)
    torch.manual_seed(cfg.seed + 1)
    model(idx, tgt).backward()
    return _grads(model)


def sweep_budget(cfg: ModelConfig, budgets: Sequence[float] = BUDGETS,
                 eager: Sequence[str] = EAGER_STRATEGIES,
                 compiled: Sequence[str] = COMPILED_STRATEGIES, repeats: int = 5,
                 progress: Callable[[int, int], None] | None = None) -> list[BudgetPoint]:
    """Every point: the budgets (compiled), the compiled manual strategies, the eager
    manual strategies; all on the same model, batch and weights."""
    names = point_names(budgets, eager, compiled)
    reference = reference_grads(cfg)
    points = []
    for n, (kind, strategy) in enumerate(names):
        point, _ = measure_point(cfg, kind, strategy, repeats, reference)
        points.append(point)
        if progress is not None:
            progress(n + 1, len(names))
    return points


# ---------------------------------------------------------------- as a table

COLUMNS = ["kind", "strategy", "budget", "saved_bytes", "flops", "forward_flops",
           "backward_flops", "recomputed_flops", "step_seconds", "step_seconds_low",
           "step_seconds_high", "compile_seconds", "loss", "max_grad_diff", "measured_by",
           "flops_counted_by"]


def to_frame(points: Sequence[BudgetPoint], events: bool = False) -> pd.DataFrame:
    """One row per point; recomputed_flops is each point's FLOPs above the plain eager
    step's (or, without one, the least FLOPs measured). `events`: the eager points'
    tracker event logs in EVENTS_COLUMN (the demo's stored result; not the CLI's table)."""
    columns = [*COLUMNS, EVENTS_COLUMN] if events else COLUMNS
    rows = [{k: v for k, v in asdict(p).items() if k != "runs"} for p in points]
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=columns)
    plain = frame[(frame["kind"] == "eager") & (frame["strategy"] == "none")]
    base = int(plain["flops"].iloc[0]) if len(plain) else int(frame["flops"].min())
    frame["recomputed_flops"] = frame["flops"] - base
    return frame[columns]


def from_frame(frame: pd.DataFrame) -> list[BudgetPoint]:
    names = {f for f in BudgetPoint.__dataclass_fields__ if f != "runs"}
    points = []
    for row in frame.to_dict(orient="records"):
        values = {k: v for k, v in row.items() if k in names}
        for key in ("budget", "compile_seconds"):
            if values.get(key) is not None and pd.isna(values[key]):
                values[key] = None
        points.append(BudgetPoint(**values))
    return points
