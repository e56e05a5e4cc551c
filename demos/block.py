"""The base of every layer the lab's model stacks: one place for the probe hook that tells
the live tracker (demos.tracker.LiveTracker) where forward and backward are. A
layer kind subclasses `ProbedBlock` and writes only its `_body(x) -> x`; checkpointing is
applied from outside, by the model, never inside a block."""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn


class Probe(Protocol):
    """What the model tells an observer (demos.tracker.LiveTracker) while it runs: the
    phase and layer in forward, and the moments backward passes a layer's edges."""

    def set_phase(self, phase: str, layer: int | None = None) -> None: ...

    def enter_layer(self, layer: int) -> object:
        """A layer starts (in forward, or rebuilt in backward); returns a token for
        restore()."""

    def restore(self, token: object) -> None: ...

    def backward_event(self, event: str, layer: int | None) -> None:
        """Backward reached 'enter' (a layer's output), 'leave' (its input) or
        'loss-done'."""


class _BackwardMark(torch.autograd.Function):
    """Identity in forward; tells the probe when backward passes this point."""

    @staticmethod
    def forward(ctx, x, probe, event, layer):
        ctx.probe, ctx.event, ctx.layer = probe, event, layer
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        ctx.probe.backward_event(ctx.event, ctx.layer)
        return grad, None, None, None


def mark(x: torch.Tensor, probe: Probe | None, event: str, layer: int | None) -> torch.Tensor:
    return x if probe is None else _BackwardMark.apply(x, probe, event, layer)


class ProbedBlock(nn.Module):
    """A decoder layer with the probe hook: `forward(x)` runs `_body(x)` between two marks
    that tell the probe when backward reaches the layer's output and its input."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index
        self.probe: Probe | None = None

    def _body(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probe = self.probe
        if probe is None:
            return self._body(x)
        token = probe.enter_layer(self.index)
        try:  # a checkpoint's recomputation may stop early by raising; restore the state
            x = mark(x, probe, "leave", self.index)
            return mark(self._body(x), probe, "enter", self.index)
        finally:
            probe.restore(token)
