"""An exact tracker of live tensor storage bytes, for devices without allocator
statistics (the CPU). Every op's new output storage is counted when it appears and
uncounted when a weakref finalizer sees it die; storages shared by views count once.

It is also the model's probe (demos.model.Probe): it knows the phase (forward, recompute,
backward, loss) and the layer, so each byte is attributed and each op can be put on a timeline."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from demos.results import TimelinePoint

CATEGORIES = ("gradients", "activations", "logits", "temporaries")


_ALIASING: dict = {}


def _aliases(func) -> bool:
    """True if the op returns (a view of) one of its inputs: no new storage."""
    hit = _ALIASING.get(func)
    if hit is None:
        try:
            hit = any(r.alias_info is not None for r in func._schema.returns)
        except AttributeError:
            hit = False
        _ALIASING[func] = hit
    return hit


class LiveTracker(TorchDispatchMode):
    """Use as a context manager around a training step:

        tracker = LiveTracker("cpu", timeline=True, events=True)
        tracker.ignore(model.parameters())
        with tracker:
            ...
        tracker.peak_bytes, tracker.peak_by_category, tracker.points, tracker.events

    `events` keeps every storage's birth and death, in order: [op index, storage id, bytes
    (negative when it dies), op, phase, layer] (the op, phase and layer that made it);
    reports.memory_snapshot turns them into torch's memory snapshot.
    """

    def __init__(self, device_type: str | None = None, timeline: bool = False,
                 events: bool = False) -> None:
        super().__init__()
        self.device_type = device_type
        # data_ptr -> [nbytes, category, op, phase, layer, weakref to the storage, id]
        self.live: dict[int, list] = {}
        self.events: list[list] | None = [] if events else None
        self.by_category = dict.fromkeys(CATEGORIES, 0)
        self.live_bytes = 0
        self.peak_bytes = 0
        self.peak_by_category = dict(self.by_category)
        self._peak_at: tuple[str, str, int | None] | None = None
        self.points: list[TimelinePoint] | None = [] if timeline else None
        self.phase, self.layer = "forward", None
        self.in_backward = False
        self.loss_backward = False
        self._ignored: set[int] = set()
        self._count = 0

    # --- storage accounting -------------------------------------------------------------
    def ignore(self, tensors) -> None:
        """Storages that exist before the step (parameters, inputs) are never counted."""
        for t in tensors:
            if isinstance(t, torch.Tensor):
                self._ignored.add(t.untyped_storage().data_ptr())

    def _category(self) -> str:
        if self.phase in ("forward", "recompute"):
            return "activations"
        if self.phase == "loss" or self.loss_backward:
            return "logits"
        return "temporaries"

    def _track(self, t: torch.Tensor, op: str) -> None:
        if self.device_type is not None and t.device.type != self.device_type:
            return
        storage = t.untyped_storage()
        key, nbytes = storage.data_ptr(), storage.nbytes()
        if nbytes == 0 or key in self.live or key in self._ignored:
            return
        entry = [nbytes, self._category(), op, self.phase, self.layer, None, 0]
        self.live[key] = entry
        if self.events is not None:
            entry[6] = len(self.events)  # the index of its birth: a storage id
            self.events.append([self._count, entry[6], nbytes, op, self.phase, self.layer])
        self.live_bytes += nbytes
        self.by_category[entry[1]] += nbytes
        # A plain weakref (lighter than weakref.finalize): its callback runs when the
        # storage dies, unless the entry (and with it the ref) was dropped first.
        entry[5] = weakref.ref(storage, lambda _ref, key=key, entry=entry: self._free(key, entry))

    def _free(self, key: int, entry: list) -> None:
        if self.live.get(key) is entry:
            del self.live[key]
            self.live_bytes -= entry[0]
            self.by_category[entry[1]] -= entry[0]
            if self.events is not None:
                self.events.append([self._count, entry[6], -entry[0], *entry[2:5]])

    def mark_gradient(self, t: torch.Tensor) -> None:
        """Reattribute a tensor's storage (a parameter's .grad) to 'gradients'."""
        entry = self.live.get(t.untyped_storage().data_ptr())
        if entry is not None and entry[1] != "gradients":
            self.by_category[entry[1]] -= entry[0]
            entry[1] = "gradients"
            self.by_category["gradients"] += entry[0]

    def snapshot(self) -> dict[str, int]:
        """Live bytes per category right now."""
        return dict(self.by_category)

    def live_entries(self) -> list[tuple]:
        """(nbytes, category, op, phase, layer) of every live storage, for explanations."""
        return [tuple(e[:5]) for e in self.live.values()]

    def close(self) -> None:
        """Stop following the storages still alive (e.g. gradients), so they no longer
        keep this tracker and its timeline in memory."""
        self.live.clear()  # dropping the entries drops their weakrefs and callbacks

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not _aliases(func):
            if isinstance(out, torch.Tensor):  # the common case, without a pytree walk
                self._track(out, func.__name__)
            else:
                for t in tree_leaves(out):
                    if isinstance(t, torch.Tensor):
                        self._track(t, func.__name__)
        if self.live_bytes > self.peak_bytes:
            self.peak_bytes = self.live_bytes
            self.peak_by_category = dict(self.by_category)
            self._peak_at = (func.__name__, self.phase, self.layer)
        if self.points is not None:
            self.points.append(TimelinePoint(self._count, func.__name__, self.phase, self.layer,
                                             self.live_bytes))
        self._count += 1
        return out

    @property
    def peak_at(self) -> tuple[str, str, int | None] | None:
        """(op, phase, layer) at the peak, or None before any op."""
        return self._peak_at

    @property
    def peak_op(self) -> str | None:
        """The op at the peak, with its phase and layer (formatted only when asked)."""
        if self._peak_at is None:
            return None
        op, phase, layer = self._peak_at
        return f"{op} ({phase}, layer {layer})"

    # --- the model's probe ---------------------------------------------------------------
    def set_phase(self, phase: str, layer: int | None = None) -> None:
        self.phase, self.layer = phase, layer
        self.in_backward = phase == "backward"

    def start_backward(self) -> None:
        self.set_phase("backward", None)
        self.loss_backward = True

    def enter_layer(self, layer: int) -> tuple:
        token = (self.phase, self.layer)
        self.phase = "recompute" if self.in_backward else "forward"
        self.layer = layer
        return token

    def restore(self, token: tuple) -> None:
        self.phase, self.layer = token

    def backward_event(self, event: str, layer: int | None) -> None:
        if event == "loss-done":
            self.loss_backward = False
            self.phase, self.layer = "backward", None
        elif event == "enter":
            self.phase, self.layer = "backward", layer
        elif event == "leave":
            self.phase, self.layer = "backward", None


@contextmanager
def tracking(model: torch.nn.Module, inputs: Iterable[torch.Tensor],
             device_type: str | None, timeline: bool = False) -> Iterator[LiveTracker]:
    """One step of the lab's model under the live tracker, its event log kept: the
    parameters and `inputs` left out, each parameter's gradient counted as a gradient,
    the tracker set as the model's probe (phase and layer). Call `start_backward()`
    before the loss's backward."""
    tracker = LiveTracker(device_type, timeline=timeline, events=True)
    params = list(model.parameters())
    tracker.ignore([*params, *inputs])
    hooks = [p.register_post_accumulate_grad_hook(lambda p: tracker.mark_gradient(p.grad))
             for p in params if p.requires_grad]
    model.set_probe(tracker)
    try:
        with tracker:
            yield tracker
    finally:
        model.set_probe(None)
        for h in hooks:
            h.remove()
