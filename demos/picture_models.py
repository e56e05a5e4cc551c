"""Pictures at high resolution: the lab's image models, trained one step and measured.

Tiny real models of the families practitioners fine-tune on large images
(model_classes.tiny_pictures: UNets in SD 1.5's and SDXL's shapes, SD3- and Flux-style
diffusion transformers, ViT, SigLIP and DINOv2 vision encoders) are built from their
diffusers and transformers classes through their model kinds (model_classes.kinds), with
checkpointing off, on every block (the library's own switch) or on every n-th block, with
or without LoRA, and trained one step at a chosen resolution and batch. Measured as the
lab measures its own model (demos.measure): what autograd saves for backward per block
and outside the blocks (the kind's count, model_classes.image_step), the step's peak
(the live-bytes tracker, demos.tracker; the CUDA allocator on a GPU), the FLOPs torch
counts (torch.utils.flop_counter) and the wall and CPU time of timed steps, strategies
interleaved round by round. A sweep over the image's side measures what is saved for
backward at each size (forward only: the count needs no backward), beside the arithmetic
of what grows: C·H·W per feature map, (H/p)·(W/p) tokens (memory.pixels).

No Streamlit; ids and numbers only (the UI words them). The demo service runs these in
its worker process (serving.picture_jobs)."""

from __future__ import annotations

import contextlib
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import pandas as pd
import torch
from torch.utils.flop_counter import FlopCounterMode

from demos.device import detect_device
from demos.measure import PAGE_REPEATS, OutOfMemory, sync, warm_up
from demos.picture_settings import (
    FAMILIES,
    SWEEP_SIZES,
    PictureSetup,
    growing_units,
)
from demos.results import EVENTS_COLUMN
from demos.tracker import LiveTracker
from model_classes.image_step import saved_step
from model_classes.kinds import ModelKind, kind_for
from model_classes.saved_step import Step
from model_classes.tiny_pictures import tiny_config
from model_classes.variant import Variant

__all__ = ["FAMILIES", "SWEEP_SIZES", "PictureRun", "PictureSetup", "from_frame",
           "growing_units", "measure_memory", "measure_time", "saved_at", "to_frame"]
SEED = 0


def variant_of(setup: PictureSetup) -> Variant:
    """The model kinds' record of what changes what a model keeps: LoRA on the attention
    projections at the setup's rank (0: full fine-tuning), fp32."""
    return Variant(lora_rank=setup.lora, lora_targets="attention")

@dataclass
class PictureRun:
    """One strategy's measured step. Read by reports.timing like a lab result
    (demos.results.StrategyResult): fits, the timed runs, the counted FLOPs."""

    family: str
    size: int
    batch: int
    strategy: str
    n: int
    lora: int
    checkpointed: list[int]  # indices of the checkpointed blocks
    blocks: list[str]  # each block's path in the model, in forward order
    levels: list[int]  # each block's level (a UNet's: 0 at full resolution), else 0
    per_block: list[int]  # bytes saved for backward per block
    outside: dict[str, int]  # bytes saved outside the blocks, per part of the model
    device: str = "cpu"
    peak_bytes: int | None = None  # live bytes above parameters and inputs at the peak
    flops_counted: int | None = None
    step_seconds_runs: list[float] = field(default_factory=list)
    cpu_seconds_runs: list[float] = field(default_factory=list)
    threads: int | None = None
    loss: float | None = None
    parameter_bytes: int = 0
    trainable_bytes: int = 0
    error_id: str | None = None  # "oom": out of memory on this device
    memory_events: list[list] | None = None
    fits: bool = True
    flops_predicted: float | None = None  # no prediction: the verdict reads the count

    @property
    def blocks_total(self) -> int:
        return sum(self.per_block)

    @property
    def total(self) -> int:
        return self.blocks_total + sum(self.outside.values())

    @property
    def step_seconds(self) -> float | None:
        return statistics.median(self.step_seconds_runs) if self.step_seconds_runs else None

    @property
    def cpu_seconds(self) -> float | None:
        return statistics.median(self.cpu_seconds_runs) if self.cpu_seconds_runs else None


# ------------------------------------------------------------------ the model of a setup

def kind_of(family: str) -> ModelKind:
    return kind_for(tiny_config(family))


def build(setup: PictureSetup, device: str = "cpu") -> tuple[torch.nn.Module, ModelKind]:
    """The family's tiny model with random weights (SEED), LoRA as the training scripts
    add it, on `device`, in training mode."""
    cfg = tiny_config(setup.family)
    kind = kind_for(cfg)
    config = kind.config(cfg)
    torch.manual_seed(SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = kind.build(config, variant_of(setup), blocks=len(kind.block_types(config)))
    return model.to(device), kind


def switch(model: torch.nn.Module, kind: ModelKind, strategy: str, n: int) -> tuple[int, ...]:
    """The library's own checkpointing for a strategy (model_classes.kinds)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return kind.checkpoint(model, strategy, n)


def block_names(model: torch.nn.Module, kind: ModelKind) -> list[str]:
    return list(kind.block_names(model))  # type: ignore[attr-defined]


def levels(names: Sequence[str], model: torch.nn.Module) -> list[int]:
    """Each block's UNet level (0 at full resolution: down_blocks.i is level i, up_blocks.j
    level L-1-j, the mid block the lowest); 0 for a transformer's blocks."""
    down = len(getattr(model, "down_blocks", ()))
    out = []
    for name in names:
        parts = name.split(".")
        if parts[0] == "down_blocks":
            out.append(int(parts[1]))
        elif parts[0] == "up_blocks":
            out.append(down - 1 - int(parts[1]))
        elif parts[0] == "mid_block":
            out.append(down - 1)
        else:
            out.append(0)
    return out


def outside_parts(step: Step) -> dict[str, int]:
    """Bytes saved outside the blocks by part: "shared" (tensors handed to several blocks),
    "loss", a UNet's down_blocks.i / mid_block / up_blocks.i (what diffusers never
    checkpoints there: each attention's norm and projections, the resamplers, the first
    resnet of the mid block), "stem" (everything before and after: the input convolution
    or patch embedding, the time and text embeddings, the final norm and projection)."""
    parts: dict[str, int] = {}
    for (slot, module, _kind, _padded), nbytes in step.cpu.items():
        if slot >= 0:
            continue
        path = module.split(".")
        if module in ("shared", "loss"):
            part = module
        elif path[0] in ("down_blocks", "up_blocks") and len(path) > 1:
            part = f"{path[0]}.{path[1]}"
        elif path[0] == "mid_block":
            part = "mid_block"
        else:
            part = "stem"
        parts[part] = parts.get(part, 0) + nbytes
    return parts


# ------------------------------------------------------------------ one step, measured

def _zero(model: torch.nn.Module) -> None:
    model.zero_grad(set_to_none=True)


def _tracked(model: torch.nn.Module, kind: ModelKind, setup: PictureSetup, run: PictureRun,
             dev: torch.device) -> None:
    """One step under the live tracker with every saved tensor counted: bytes per block
    and outside, the peak (the CUDA allocator's on a GPU), the loss."""
    _zero(model)
    forward = _forward(kind, model, setup)
    params = list(model.parameters())
    tracker = LiveTracker(dev.type, events=True)
    tracker.ignore(params)
    hooks = [p.register_post_accumulate_grad_hook(lambda p: tracker.mark_gradient(p.grad))
             for p in params if p.requires_grad]
    if dev.type == "cuda":
        sync(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
    try:
        with tracker:
            step, loss = saved_step(model, kind.blocks(model), forward)
            tracker.start_backward()
            loss.backward()
    finally:
        for h in hooks:
            h.remove()
    run.per_block = step.per_block(len(run.blocks))
    run.outside = outside_parts(step)
    run.loss = float(loss.detach().float())
    if dev.type == "cuda":
        sync(dev)
        run.peak_bytes = torch.cuda.max_memory_allocated(dev) - base
    else:
        run.peak_bytes = tracker.peak_bytes
    run.memory_events = tracker.events
    tracker.close()
    _zero(model)


def _counted(model: torch.nn.Module, forward: Callable) -> int:
    """torch's FLOP counter around one whole step (forward, loss, backward and the
    recomputation in it): a step of its own, as demos.measure counts."""
    _zero(model)
    with FlopCounterMode(display=False) as counter:
        forward(lambda: None).backward()
    _zero(model)
    return int(counter.get_total_flops())


def _timed(model: torch.nn.Module, forward: Callable, dev: torch.device) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) of one step."""
    _zero(model)
    sync(dev)
    start, cpu = time.perf_counter(), time.process_time()
    forward(lambda: None).backward()
    sync(dev)
    return time.perf_counter() - start, time.process_time() - cpu


@contextlib.contextmanager
def _one_thread(dev: torch.device) -> Iterator[None]:
    """One CPU thread for the tiny models' small tensors (threads cost more than they give
    there, as for the lab of mistakes); the other cores stay with other learners."""
    threads = torch.get_num_threads()
    if dev.type == "cpu":
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _runs(setup: PictureSetup, device: str, size: int | None = None
          ) -> tuple[torch.nn.Module, ModelKind, torch.device, list[PictureRun]]:
    """The model of a setup (at `size`, default its own) and an empty run per strategy:
    none, then the setup's own (unless it is none)."""
    setup.validated()
    warm_up()
    info = detect_device(device)
    at = setup if size is None else setup.with_(size=size)
    model, kind = build(at, info.kind)
    names = block_names(model, kind)
    runs = []
    for strategy in ["none"] + ([setup.strategy] if setup.strategy != "none" else []):
        runs.append(PictureRun(
            at.family, at.size, at.batch, strategy, at.n, at.lora,
            list(switch(model, kind, strategy, at.n)), names, levels(names, model), [], {},
            info.kind, parameter_bytes=sum(p.nbytes for p in model.parameters()),
            trainable_bytes=sum(p.nbytes for p in model.parameters() if p.requires_grad)))
    return model, kind, torch.device(info.kind), runs


def _forward(kind: ModelKind, model: torch.nn.Module, setup: PictureSetup) -> Callable:
    return kind.training_forward(model, setup.batch, setup.size,  # type: ignore[attr-defined]
                                 variant_of(setup), SEED)


def measure_memory(setup: PictureSetup, device: str = "auto") -> list[PictureRun]:
    """What one step keeps, without checkpointing and with the setup's strategy (one run
    each; one only for "none"), on one model: bytes saved for backward per block and
    outside, the peak, the loss (the tracked step). A strategy out of memory on this device
    comes back with error_id "oom"."""
    model, kind, dev, runs = _runs(setup, device)
    with _one_thread(dev):
        for run in runs:
            switch(model, kind, run.strategy, setup.n)
            with OutOfMemory() as oom:
                _tracked(model, kind, setup, run, dev)
            if oom.message is not None:
                run.error_id, run.fits = "oom", False
                _zero(model)
    return runs


def measure_time(setup: PictureSetup, device: str = "auto", repeats: int | None = None
                 ) -> list[PictureRun]:
    """What one step costs, without checkpointing and with the setup's strategy: the FLOPs
    torch counts (a step of its own), then `repeats` timed rounds (PAGE_REPEATS for the
    device by default; an untimed round first on a GPU), strategies interleaved, wall and
    CPU time of each."""
    model, kind, dev, runs = _runs(setup, device)
    repeats = PAGE_REPEATS.get(dev.type, 5) if repeats is None else repeats
    forward = _forward(kind, model, setup)
    with _one_thread(dev):
        for run in runs:
            switch(model, kind, run.strategy, setup.n)
            with OutOfMemory() as oom:
                run.flops_counted = _counted(model, forward)
            if oom.message is not None:
                run.error_id, run.fits = "oom", False
                _zero(model)
        warm = dev.type == "cuda"
        for round_ in range(repeats + warm):
            for run in runs:
                if not run.fits:
                    continue
                switch(model, kind, run.strategy, setup.n)
                with OutOfMemory() as oom:
                    seconds, cpu = _timed(model, forward, dev)
                if oom.message is not None:
                    run.error_id, run.fits = "oom", False
                    _zero(model)
                elif round_ >= warm:
                    run.step_seconds_runs.append(seconds)
                    run.cpu_seconds_runs.append(cpu)
                    run.threads = torch.get_num_threads() if dev.type == "cpu" else 1
    return runs


def saved_at(setup: PictureSetup, size: int, device: str = "auto") -> list[PictureRun]:
    """A sweep point: what one step at `size` pixels saves for backward, per block and
    outside, without checkpointing and with the setup's strategy (forward and loss only:
    the count needs no backward; no peak, FLOPs or time)."""
    model, kind, dev, runs = _runs(setup, device, size)
    at = setup.with_(size=size)
    with _one_thread(dev):
        for run in runs:
            switch(model, kind, run.strategy, setup.n)
            with OutOfMemory() as oom:
                step, loss = saved_step(model, kind.blocks(model), _forward(kind, model, at))
                run.per_block = step.per_block(len(run.blocks))
                run.outside = outside_parts(step)
                del loss
            if oom.message is not None:
                run.error_id, run.fits = "oom", False
    return runs


# ------------------------------------------------------------------ results as a table

def to_frame(runs: Sequence[PictureRun]) -> pd.DataFrame:
    """Runs as rows (the demo service stores and merges tables): a run's fields, its
    tracker events in demos.results.EVENTS_COLUMN."""
    rows = []
    for run in runs:
        row = {f.name: getattr(run, f.name) for f in fields(run) if f.name != "memory_events"}
        row[EVENTS_COLUMN] = run.memory_events
        rows.append(row)
    return pd.DataFrame(rows)


def from_frame(frame: pd.DataFrame) -> list[PictureRun]:
    """The runs of a stored table (to_frame's rows)."""
    names = {f.name for f in fields(PictureRun)}
    runs = []
    for row in frame.to_dict(orient="records"):
        data = {k: _plain(v) for k, v in row.items() if k in names}
        data["memory_events"] = _plain(row.get(EVENTS_COLUMN))
        data["outside"] = {str(k): int(v) for k, v in (data.get("outside") or {}).items()}
        runs.append(PictureRun(**data))
    return runs


def _plain(value: Any) -> Any:
    """A table cell as plain Python (NaN as None, numpy numbers as numbers)."""
    if isinstance(value, float) and value != value:
        return None
    if hasattr(value, "item") and not isinstance(value, (list, dict)):
        return value.item()
    return value
