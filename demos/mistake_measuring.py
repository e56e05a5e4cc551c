"""The measuring helpers of the lab of mistakes (demos.mistakes): a run under the
live tracker (peak, phase, loss, torch's warning or checkpoint error), counted FLOPs,
gradients and their differences, and the lab's model run block by block, plain or
checkpointed."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import CheckpointError, checkpoint
from torch.utils.flop_counter import FlopCounterMode

from demos.mistake_records import CASE_CONFIG, PEAK_TOLERANCE, Measured
from demos.model import GPT, build_model
from demos.tracker import LiveTracker
from memory.config import ModelConfig


def within_tolerance(peak: int | None, plain: int | None) -> bool:
    return peak is not None and plain is not None and abs(peak - plain) <= PEAK_TOLERANCE * plain


def grads_of(model: nn.Module) -> dict[str, torch.Tensor | None]:
    return {n: (None if p.grad is None else p.grad.detach().clone())
            for n, p in model.named_parameters() if p.requires_grad}


def none_grads(grads: dict[str, torch.Tensor | None]) -> tuple[str, ...]:
    return tuple(n for n, g in grads.items() if g is None)


def max_diff(grads: dict[str, torch.Tensor | None],
              plain: dict[str, torch.Tensor | None]) -> float:
    """Largest |a - b| over every parameter; a missing gradient counts as zeros."""
    worst = 0.0
    for name, ref in plain.items():
        got = grads.get(name)
        if ref is None and got is None:
            continue
        a = ref if ref is not None else torch.zeros_like(got)  # type: ignore[arg-type]
        b = got if got is not None else torch.zeros_like(ref)  # type: ignore[arg-type]
        worst = max(worst, float((a - b).abs().max()))
    return worst


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


@dataclass
class TrackedStep:
    """What a run under the tracker leaves: peak, phase at the peak, loss, warnings."""

    peak: int = 0
    phase: str | None = None
    loss: float | None = None
    warning: str | None = None
    error: str | None = None
    error_type: str | None = None
    seconds: float = 0.0
    events: list[list] | None = None


def tracked(model: nn.Module, step: Callable[[LiveTracker], torch.Tensor | None],
             inputs: tuple[torch.Tensor, ...] = ()) -> TrackedStep:
    """Run step(tracker) under the live tracker, capturing warnings and a checkpoint
    error; parameters and inputs are not counted."""
    out = TrackedStep()
    tracker = LiveTracker("cpu", events=True)
    tracker.ignore(list(model.parameters()) + list(inputs))
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with tracker:
                loss = step(tracker)
            out.loss = None if loss is None else float(loss.detach())
        except CheckpointError as error:
            out.error, out.error_type = first_line(str(error)), type(error).__name__
    out.seconds = time.perf_counter() - started
    out.peak, out.phase = tracker.peak_bytes, (tracker.peak_at or (None, None, None))[1]
    out.events = tracker.events
    tracker.close()
    torch_warnings = [w for w in caught if "torch" in (w.filename or "")
                      or "checkpoint" in str(w.message)]
    if torch_warnings:
        out.warning = str(torch_warnings[0].message)
    return out


def count_flops(step: Callable[[], object]) -> int:
    counter = FlopCounterMode(display=False)
    with counter, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step()
    return int(counter.get_total_flops())


def measured(s: TrackedStep, **more: Any) -> Measured:
    return Measured(peak_bytes=s.peak, peak_phase=s.phase, loss=s.loss, warning=s.warning,
                    error=s.error, error_type=s.error_type, seconds=s.seconds,
                    memory_events=s.events, **more)


def case_model(cfg: ModelConfig = CASE_CONFIG) -> GPT:
    torch.manual_seed(cfg.seed)
    return build_model(cfg)


def embed(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    x = model.tok(idx)
    if model.pos is not None:
        x = x + model.pos.weight[: idx.shape[1]]
    return model.drop(x)


def head_loss(model: GPT, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = model.head(model.ln_f(x))
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


BlockRunner = Callable[[nn.Module, torch.Tensor], torch.Tensor]


def plain_block(block: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return block(x)


def model_loss(model: GPT, idx: torch.Tensor, targets: torch.Tensor,
          run_block: BlockRunner = plain_block) -> torch.Tensor:
    x = embed(model, idx)
    for block in model.blocks:
        x = run_block(block, x)
    return head_loss(model, x, targets)


def probed_step(model: GPT, loss_fn: Callable[[], torch.Tensor], seed: int | None = None
                ) -> Callable[[LiveTracker], torch.Tensor]:
    """One training step of `loss_fn` with the tracker as the model's probe (each byte
    attributed to its phase and layer); `seed` first when given (the same dropout masks in
    every run)."""
    def step(tracker: LiveTracker) -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        if seed is not None:
            torch.manual_seed(seed)
        tracker.set_phase("forward")
        model.set_probe(tracker)
        try:
            loss = loss_fn()
            tracker.start_backward()
            loss.backward()
        finally:
            model.set_probe(None)
        return loss
    return step


def train_step(model: GPT, idx: torch.Tensor, targets: torch.Tensor,
               run_block: BlockRunner = plain_block, seed: int = 0
               ) -> Callable[[LiveTracker], torch.Tensor]:
    return probed_step(model, lambda: model_loss(model, idx, targets, run_block), seed)


def ckpt(reentrant: bool, preserve: bool = True) -> BlockRunner:
    def run(block: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(block, x, use_reentrant=reentrant, preserve_rng_state=preserve)
    return run

