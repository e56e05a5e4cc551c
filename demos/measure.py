"""One training step (forward, loss, backward) per strategy, measured: peak memory,
bytes held for backward, a breakdown, step time, loss and gradient agreement."""

from __future__ import annotations

import functools
import gc
import os
import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext

import torch
from torch.utils.flop_counter import FlopCounterMode

from demos.device import DeviceInfo, detect_device
from demos.installed_torch import counter_counts_attention
from demos.model import GPT, Segment, build_model, make_batch
from demos.results import Comparison, StrategyResult
from demos.tracker import LiveTracker, tracking
from i18n import N_
from i18n.units import format_bytes
from memory import theory
from memory.config import ConfigError, ModelConfig
from memory.placement import BudgetTooSmall
from memory.strategies import SelectivePolicy, StrategySpec, device_refusal, require_spec

__all__ = ["PAGE_REPEATS", "OutOfMemory", "Step", "compare", "default_limit",
           "saved_tensors_context", "sync", "warm_up"]

TRACKER_METHOD = N_("live-tensor tracker (TorchDispatchMode)")
CUDA_METHOD = N_("CUDA allocator (max_memory_allocated)")
# Timed steps per strategy on the demo pages, interleaved strategy by strategy: the median
# and the spread (reports.timing.time_spread: the lowest and highest of three) are shown,
# and a difference the spread covers reads "within noise"; the verdict rests on the FLOPs
# torch counts and, on a CPU, the CPU time. Three on a CPU: with the memory's tracked and
# counted steps, the compare page's default is complete about 3 s after a slider move (2
# cores, the learner's browser on the same machine; five took 4.2 s).
PAGE_REPEATS = {"cpu": 3, "cuda": 9}
# From MIN_ADAPTIVE_RUNS asked runs on (the command line's default, a GPU page's nine),
# timing goes on after them (rounds of every strategy, interleaved) while a strategy's
# spread is wider than NARROW_SPREAD of its median, up to MAX_REPEATS_FACTOR × the asked
# runs or TIME_CAP_SECONDS of timing in all, whichever comes first: short steps get more
# runs, long ones are done once the asked ones are timed (with a 3 s cap, a page whose own
# drawing widened the spread waited for ten rounds). Fewer asked: exactly those.
NARROW_SPREAD = 0.10
MAX_REPEATS_FACTOR = 2
TIME_CAP_SECONDS = 1.0
MIN_ADAPTIVE_RUNS = 5
CPU_LIMIT_FRACTION = 0.5  # of available memory: the machine is shared
CUDA_LIMIT_FRACTION = 0.9  # of free GPU memory


# --- process set-up ---------------------------------------------------------------------
_READY = False


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def warm_up() -> None:
    """Import what the first checkpoint() and dispatch mode import (torch._dynamo, 1.5-2 s),
    and set the CPU thread count (all cores, or $DEMOS_THREADS), once per process."""
    global _READY
    if _READY:
        return
    torch.set_num_threads(int(os.environ.get("DEMOS_THREADS", 0)) or _cores())
    cfg = ModelConfig(layers=1, hidden=32, heads=1, seq_len=8, batch=1, vocab=16)
    model = build_model(cfg)
    idx, tgt = make_batch(cfg)
    for seg in (Segment(0, 1, "checkpoint"),
                Segment(0, 1, "selective", SelectivePolicy.SAVE_MATMULS)):
        tracker = LiveTracker("cpu")
        with tracker:
            model(idx, tgt, [seg]).backward()
    _READY = True


def default_limit(info: DeviceInfo) -> int | None:
    """A safe share of the device's free memory."""
    if info.free_bytes is None:
        return None
    share = CUDA_LIMIT_FRACTION if info.kind == "cuda" else CPU_LIMIT_FRACTION
    return int(info.free_bytes * share)


def _limit_source(info: DeviceInfo, given: int | None) -> str:
    if given is not None:
        return "the limit set for this run"
    share = CUDA_LIMIT_FRACTION if info.kind == "cuda" else CPU_LIMIT_FRACTION
    where = "free GPU memory" if info.kind == "cuda" else "available CPU memory"
    return f"{share:.0%} of {where}"


# --- one step -------------------------------------------------------------------------
def sync(dev: torch.device) -> None:
    """Wait for the device's queued work (CUDA); nothing to wait for on a CPU."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text
                                              or "can't allocate memory" in text)


class OutOfMemory:
    """Catches an out-of-memory error raised in its block and keeps only its first line;
    any other error passes through.

        with OutOfMemory() as oom:
            step.timed(...)
        if oom.message is not None:  # the exception and its traceback are gone by now,
            free_memory(model)       # so the tensors they pinned can be freed
    """

    def __init__(self) -> None:
        self.message: str | None = None

    def __enter__(self) -> OutOfMemory:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: object) -> bool:
        if exc is None or not _is_oom(exc):
            return False
        self.message = (str(exc).splitlines() or ["out of memory"])[0][:160]
        return True


def _free_memory(model: GPT | None) -> None:
    if model is not None:
        model.zero_grad(set_to_none=True)
        model.set_probe(None)
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class Step:
    """Runs one training step of a strategy on a shared model and batch: timed, under the
    CUDA allocator's statistics, or under the live tracker."""

    def __init__(self, cfg: ModelConfig, model: GPT, idx, tgt, dev: torch.device) -> None:
        self.cfg, self.model, self.idx, self.tgt, self.dev = cfg, model, idx, tgt, dev

    def _forward(self, spec: StrategySpec, plan: list[Segment]) -> torch.Tensor:
        torch.manual_seed(self.cfg.seed + 1)  # same dropout masks for every strategy
        with saved_tensors_context(spec):
            return self.model(self.idx, self.tgt, plan)

    def timed(self, spec: StrategySpec, plan: list[Segment]) -> float:
        return self.timed_with_cpu(spec, plan)[0]

    def timed_with_cpu(self, spec: StrategySpec, plan: list[Segment]) -> tuple[float, float]:
        """(wall seconds, this process's CPU seconds, all its threads) of one step. CPU
        time well below wall time × threads means the process waited for the cores:
        other work on the machine, not this step, took the difference."""
        self.model.zero_grad(set_to_none=True)
        sync(self.dev)
        start, cpu = time.perf_counter(), time.process_time()
        self._forward(spec, plan).backward()
        sync(self.dev)
        return time.perf_counter() - start, time.process_time() - cpu

    def counted(self, spec: StrategySpec, plan: list[Segment]) -> int:
        """torch.utils.flop_counter.FlopCounterMode around one whole step (forward, loss,
        backward and the recomputation in it). A step of its own: the counter decomposes
        the ops it has no formula for (LayerNorm, GELU: torch/utils/flop_counter.py), which
        changes the temporaries, so it never runs under the memory tracker or the clock."""
        self.model.zero_grad(set_to_none=True)
        with FlopCounterMode(display=False) as counter:
            self._forward(spec, plan).backward()
        self.model.zero_grad(set_to_none=True)
        return counter.get_total_flops()

    def allocator_peak(self, spec: StrategySpec, plan: list[Segment]) -> int:
        """CUDA: peak allocated bytes above what was allocated before the step."""
        self.model.zero_grad(set_to_none=True)
        sync(self.dev)
        torch.cuda.reset_peak_memory_stats(self.dev)
        base = torch.cuda.memory_allocated(self.dev)
        self._forward(spec, plan).backward()
        sync(self.dev)
        return torch.cuda.max_memory_allocated(self.dev) - base

    def tracked(self, spec: StrategySpec, plan: list[Segment], timeline: bool
                ) -> tuple[LiveTracker, dict[str, int], float]:
        """A step under the live tracker: (tracker, held bytes at end of forward, loss)."""
        self.model.zero_grad(set_to_none=True)
        with tracking(self.model, [self.idx, self.tgt], self.dev.type, timeline) as tracker:
            loss = self._forward(spec, plan)
            held = tracker.snapshot()
            tracker.start_backward()
            loss.backward()
        return tracker, held, loss.item()


def saved_tensors_context(spec: StrategySpec) -> AbstractContextManager:
    """Where autograd keeps the tensors saved for backward: in CPU memory for a strategy
    that offloads (save_on_cpu), else where they are."""
    if spec.strategy.offloads:
        return torch.autograd.graph.save_on_cpu(pin_memory=True)
    return nullcontext()


def _grads(model: GPT) -> list[torch.Tensor]:
    return [p.grad.detach().to("cpu", copy=True) if p.grad is not None else torch.zeros(0)
            for p in model.parameters()]


def _check_grads(results: list[StrategyResult], ref: list[torch.Tensor], model: GPT,
                 i: int) -> None:
    results[i].max_grad_diff, results[i].bitwise_equal = _compare_grads(ref, model)


def _compare_grads(ref: list[torch.Tensor], model: GPT) -> tuple[float, bool]:
    worst, equal = 0.0, True
    for r, p in zip(ref, model.parameters(), strict=True):
        g = p.grad.detach().to("cpu")
        equal = equal and torch.equal(r, g)
        worst = max(worst, (r.float() - g.float()).abs().max().item())
    return worst, equal


def compare(config: ModelConfig, strategies: Sequence[StrategySpec], device: str = "auto",
            repeats: int = 5, timeline: bool = False, time_steps: bool = True,
            limit_bytes: int | None = None, time_cap_s: float = TIME_CAP_SECONDS,
            time_within: int | None = None, min_repeats: int | None = None,
            on_partial: Callable[[Comparison], None] | None = None,
            check_gradients: bool = True, memory: bool = True) -> Comparison:
    """Measure one training step per strategy on one model and batch: memory under the
    live tracker (with torch's FLOP counter around the same step), then `repeats` timed
    steps or more (NARROW_SPREAD, `time_cap_s`), wall and CPU time. `time_within`: time
    only the strategies whose parameters + measured peak stay within these bytes.
    `min_repeats` (default `repeats`): the rounds always timed; the rest up to `repeats`
    only within `time_cap_s` (long steps then get fewer timed runs).
    `on_partial(comparison)` sees the comparison as it fills in: once its memory is
    measured, then after each round of timed steps (medians of the runs so far); the
    gradient agreement with plain training then comes with the first round.
    `check_gradients=False`: no plain reference step for the gradient agreement (a search
    that needs only the memory and time, whose plain step would hold several times the
    checkpointed step's memory).
    `memory=False`: the timed steps only (no tracked step or FLOP count; on a GPU an
    untimed step first, since no tracked step warmed the model; on a CPU the memory part
    just run in the same worker ran the same shapes, and a fresh model's first step there
    is as fast as its next; the plain reference step and each
    strategy's gradient check on its first timed step): the second half of a comparison
    measured in two parts, its memory by `compare(time_steps=False,
    check_gradients=False)` first (merged by `with_times`).

    Never raises for a strategy that does not fit (predicted over the limit, a budget too
    small, CUDA-only on a CPU, out of memory): its result has fits=False and an error.
    Raises ConfigError for an invalid config, TypeError for a strategy given as text
    (`strategies` are records: memory.strategies.parse_strategy parses text)."""
    info = detect_device(device)
    config.validated(info.kind)
    specs = [require_spec(s) for s in strategies]
    if not specs:
        raise ConfigError("strategies: give at least one, e.g. none,every-layer")
    if repeats < 0 or repeats > 100:
        raise ConfigError(f"repeats={repeats} is out of range; allowed 0..100")
    warm_up()
    kind = info.kind
    dev = torch.device(kind)
    limit = limit_bytes if limit_bytes is not None else default_limit(info)
    param_bytes = theory.parameter_bytes(config)
    results: list[StrategyResult] = []
    plans: dict[int, list[Segment]] = {}
    for i, spec in enumerate(specs):
        result, plan = _prepare(config, spec, info, limit, limit_bytes, param_bytes)
        results.append(result)
        if plan is not None:
            plans[i] = plan
    comparison = Comparison(config, info, results, limit, param_bytes)
    if not plans:
        return comparison

    model = None
    with OutOfMemory() as oom:  # out of memory while building: nothing fits
        model = build_model(config, dev)
        idx, tgt = make_batch(config, 0, dev)
    if oom.message is not None:
        model = None
        _free_memory(None)
        for i in plans:
            _refuse(results[i], "model-oom", {"device": info.label()},
                    f"does not fit: the model itself ran out of memory on "
                                f"{info.label()}")
        return comparison
    step = Step(config, model, idx, tgt, dev)
    has_none = any(specs[i].name == "none" for i in plans)
    none_need = param_bytes + theory.predicted_peak_bytes(config, StrategySpec("none"), kind)
    # The gradients every strategy is checked against: 'none''s own, else a plain step's
    # when it fits. With every strategy timed, the plain step runs after the memory is
    # shown (in the timing part when measured in two), each strategy checked on its first
    # timed step.
    reference = check_gradients and not has_none and (limit is None or none_need <= limit)
    if not memory:
        if time_steps and repeats > 0:
            check = None
            if reference and (ref := _reference(step)) is not None:
                check = functools.partial(_check_grads, results, ref, step.model)
            _time(step, specs, plans, results, repeats, time_cap_s, min_repeats,
                  on_round=(lambda: on_partial(comparison)) if on_partial else None,
                  check=check, warm=step.dev.type == "cuda")
        del step, model
        return comparison
    later = (reference and on_partial is not None and time_steps and repeats > 0
             and time_within is None)
    ref = _reference(step) if reference and not later else None
    for i in sorted(plans, key=lambda i: specs[i].name != "none"):  # 'none' first
        grads = _measure(step, specs[i], plans[i], results[i], ref, timeline, info)
        if grads is not None and ref is None:
            ref = grads
    if time_within is not None:
        plans = {i: plan for i, plan in plans.items()
                 if (results[i].peak_bytes or 0) + param_bytes <= time_within}
    if on_partial is not None and plans:
        on_partial(comparison)  # the memory, before the FLOP count and the timed steps
    check = None
    if later and (ref := _reference(step)) is not None:
        check = functools.partial(_check_grads, results, ref, step.model)
    for i, plan in plans.items():
        if results[i].fits:
            _count(step, specs[i], plan, results[i])
    if time_steps and repeats > 0 and plans:
        _time(step, specs, plans, results, repeats, time_cap_s, min_repeats,
              on_round=(lambda: on_partial(comparison)) if on_partial is not None else None,
              check=check)
    del step, model  # tensors are reference-counted: no gc.collect() needed (it costs 0.2 s)
    if dev.type == "cuda":
        torch.cuda.empty_cache()  # give cached blocks back, so free memory reads true
    return comparison


def _prepare(cfg: ModelConfig, spec: StrategySpec, info: DeviceInfo, limit: int | None,
             given_limit: int | None, param_bytes: int
             ) -> tuple[StrategyResult, list[Segment] | None]:
    """The result skeleton and plan of one strategy, or a refusal (plan None)."""
    kind = info.kind
    try:
        plan = theory.plan_for(cfg, spec, kind)
        pred_act = theory.predicted_activation_bytes(cfg, spec, kind)
        pred_peak = theory.predicted_peak_bytes(cfg, spec, kind)
        error = None
    except BudgetTooSmall as exc:
        plan, pred_act, pred_peak, error = None, 0, 0, f"does not fit: {exc}"
    result = StrategyResult(
        spec=spec, label=spec.title, fits=plan is not None, error=error, peak_bytes=None,
        activation_bytes=None, predicted_activation_bytes=pred_act,
        predicted_peak_bytes=pred_peak, breakdown={}, step_seconds=None, step_seconds_runs=[],
        loss=None, max_grad_diff=None, bitwise_equal=None,
        measured_by=CUDA_METHOD if kind == "cuda" else TRACKER_METHOD,
        flops_predicted=theory.counted_flops(
            cfg, spec, kind, attention_counted=counter_counts_attention(kind))["total"]
        if plan is not None else None,
        plan=[f"{s.start}-{s.stop - 1} {s.policy or s.mode}" for s in plan or []])
    if plan is None:
        result.error_id, result.error_args = "budget", {"layers": cfg.layers}
        return result, None
    if not spec.strategy.runs_on(kind):
        _refuse(result, "device", {"strategy": spec.name, "device": info.label()},
                device_refusal(spec, info.label()))
        return result, None
    need = param_bytes + pred_peak
    if limit is not None and need > limit:
        _refuse(result, "limit", {"need": need, "params": param_bytes, "peak": pred_peak,
                                  "limit": limit},
                f"refused before running: predicted {format_bytes(need)} (parameters "
                        f"{format_bytes(param_bytes)} + step peak {format_bytes(pred_peak)}) "
                        f"is over the limit of {format_bytes(limit)} "
                        f"({_limit_source(info, given_limit)})")
        return result, None
    return result, plan


REFUSAL_IDS = ("budget", "device", "limit", "oom", "oom-timing", "model-oom")


def _refuse(result: StrategyResult, kind: str, numbers: dict, message: str) -> None:
    """Mark a strategy as not run: `kind` (one of REFUSAL_IDS) and its numbers for the UI
    to word, `message` the English text for the CLI and the CSV."""
    result.fits, result.error = False, message
    result.error_id, result.error_args = kind, numbers


def refusal_of(result: StrategyResult) -> tuple[str, dict] | None:
    """(id, numbers) of a refused strategy, or None when it ran (or has no id)."""
    if result.fits or result.error_id is None:
        return None
    return result.error_id, dict(result.error_args)


def _reference(step: Step) -> list[torch.Tensor] | None:
    """Gradients of 'none', the reference every strategy is compared with, when 'none'
    itself is not among the strategies. None if it does not fit."""
    with OutOfMemory() as oom:
        step.timed(StrategySpec("none"), [Segment(0, step.cfg.layers)])
    if oom.message is not None:
        _free_memory(step.model)
        return None
    return _grads(step.model)


def _measure(step: Step, spec: StrategySpec, plan, result: StrategyResult, ref, timeline, info
             ) -> list[torch.Tensor] | None:
    """Fill in the memory, loss and gradient figures; return the gradients of 'none'."""
    with OutOfMemory() as oom:
        tracker, held, loss = step.tracked(spec, plan, timeline)
        breakdown = {"parameters": step.model.param_bytes(), **tracker.peak_by_category}
        if step.dev.type == "cuda":  # the allocator also sees workspaces and rounding
            result.peak_bytes = step.allocator_peak(spec, plan)
            breakdown["temporaries"] += max(0, result.peak_bytes - tracker.peak_bytes)
        else:
            result.peak_bytes = tracker.peak_bytes
    if oom.message is not None:  # after the block: the traceback no longer pins tensors
        result.peak_bytes = None
        _free_memory(step.model)
        _refuse(result, "oom", {"device": info.label()},
                f"does not fit: out of memory on {info.label()} ({oom.message})")
        return None
    tracker.close()
    result.tracker_peak_bytes = tracker.peak_bytes
    result.peak_op, result.peak_phase, result.peak_layer = tracker.peak_at or (None,) * 3
    result.activation_bytes = held["activations"]
    result.loss_held_bytes = held["logits"]
    result.breakdown = breakdown
    result.timeline = tracker.points
    result.memory_events = tracker.events
    result.loss = loss
    grads = None
    if spec.name == "none":
        grads = _grads(step.model)
        result.max_grad_diff, result.bitwise_equal = 0.0, True
    elif ref is not None:
        result.max_grad_diff, result.bitwise_equal = _compare_grads(ref, step.model)
    step.model.zero_grad(set_to_none=True)
    return grads


def _count(step: Step, spec: StrategySpec, plan, result: StrategyResult) -> None:
    """torch's FLOP count of one whole step (Step.counted); none after out of memory."""
    with OutOfMemory() as oom:
        result.flops_counted = step.counted(spec, plan)
    if oom.message is not None:
        _free_memory(step.model)


def _warm_step(step: Step, specs, plans, results) -> None:
    """One untimed step of the first strategy that fits (out of memory: that strategy's
    refusal, and the next one warms)."""
    for i in plans:
        if not results[i].fits:
            continue
        with OutOfMemory() as oom:
            step.timed(specs[i], plans[i])
        if oom.message is None:
            return
        _refuse_timing(step, results[i], oom.message)


def _refuse_timing(step: Step, result: StrategyResult, message: str) -> None:
    """Out of memory while timing: the memory given back, the strategy refused."""
    _free_memory(step.model)
    _refuse(result, "oom-timing", {},
            f"does not fit: out of memory while timing ({message})")


def _narrow(result: StrategyResult) -> bool:
    runs = sorted(result.step_seconds_runs)
    if len(runs) < 4:
        return False
    low, median, high = statistics.quantiles(runs, n=4, method="inclusive")
    return median > 0 and (high - low) / median <= NARROW_SPREAD


def _time(step: Step, specs, plans, results, repeats: int,
          time_cap_s: float = TIME_CAP_SECONDS, min_repeats: int | None = None,
          on_round: Callable[[], None] | None = None,
          check: Callable[[int], None] | None = None, warm: bool | None = None) -> None:
    """Step times without any tracker, strategies interleaved run by run: `repeats` rounds,
    then more while a spread is wide (NARROW_SPREAD), within MAX_REPEATS_FACTOR × repeats
    rounds and `time_cap_s` seconds in all; wall and CPU time of each run, the median wall
    time. `on_round()` after each round, with the medians so far; `check(i)` after
    strategy i's first timed step, its gradients still on the model (outside the clock).
    `warm`: one untimed step first (default: on a GPU only; on a CPU the tracked step
    warmed this process for these shapes). One step warms every strategy: they run the
    same operators on the same shapes (a checkpointed one runs some of them twice)."""
    if warm is None:
        warm = step.dev.type == "cuda"
    most = repeats * MAX_REPEATS_FACTOR if repeats >= MIN_ADAPTIVE_RUNS else repeats
    least = repeats if min_repeats is None else max(1, min(min_repeats, repeats))
    if warm:
        _warm_step(step, specs, plans, results)
    began = time.perf_counter()
    for run in range(most):
        timing = [i for i in plans if results[i].fits]
        if run >= least and (
                time.perf_counter() - began >= time_cap_s
                or all(_narrow(results[i]) for i in timing)):
            break
        for i in timing:
            with OutOfMemory() as oom:
                seconds, cpu = step.timed_with_cpu(specs[i], plans[i])
                results[i].step_seconds_runs.append(seconds)
                results[i].cpu_seconds_runs.append(cpu)
                if run == 0 and check is not None and specs[i].name != "none":
                    check(i)
            if oom.message is not None:
                _refuse_timing(step, results[i], oom.message)
        if on_round is not None:
            for r in results:
                if r.fits and r.step_seconds_runs:
                    r.step_seconds = statistics.median(r.step_seconds_runs)
            on_round()
    threads = torch.get_num_threads() if step.dev.type == "cpu" else 1
    for r in results:
        if r.fits and r.step_seconds_runs:
            r.step_seconds = statistics.median(r.step_seconds_runs)
            r.threads = threads
        step.model.zero_grad(set_to_none=True)
