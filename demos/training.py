"""A few real training steps per strategy, to show that checkpointing does not change
the result: the same seed, data and optimizer give the same loss curve."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext

import pandas as pd
import torch

from demos.device import detect_device
from demos.measure import saved_tensors_context, warm_up
from demos.model import build_model, make_batch
from demos.results import EVENTS_COLUMN
from demos.tracker import tracking
from memory import theory
from memory.config import ConfigError, ModelConfig
from memory.strategies import StrategySpec, device_refusal, require_spec


def train_losses(config: ModelConfig, strategies: Sequence[StrategySpec], steps: int,
                 lr: float = 3e-3,
                 progress: Callable[[int, int], None] | None = None,
                 device: str = "auto", events: bool = False) -> pd.DataFrame:
    """Columns step, strategy, loss. Each strategy starts from the same weights and sees
    the same batches (a counting task the model learns quickly) and dropout masks.
    progress(done, total) is called after every step. `events`: each strategy's first
    step runs under the live tracker (it changes no number) and its event log is in
    EVENTS_COLUMN of that step's row (None in the others)."""
    if not 1 <= steps <= 1000:
        raise ConfigError(f"steps={steps} is out of range; allowed 1..1000")
    if not 0 < lr <= 1:
        raise ConfigError(f"lr={lr} is out of range; allowed 0..1")
    info = detect_device(device)
    config.validated(info.kind)
    specs = [require_spec(s) for s in strategies]
    for spec in specs:
        if not spec.strategy.runs_on(info.kind):
            raise ConfigError(f"strategy {device_refusal(spec, info.label())}")
    warm_up()
    dev = torch.device(info.kind)
    rows, total, done = [], steps * len(specs), 0
    for spec in specs:
        plan = theory.plan_for(config, spec, info.kind)
        model = build_model(config, dev)
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        torch.manual_seed(config.seed + 1)  # same dropout masks for every strategy
        for step in range(steps):
            idx, tgt = make_batch(config, step, dev)
            tracked = events and step == 0
            with (tracking(model, [idx, tgt], info.kind) if tracked
                  else nullcontext()) as tracker:
                with saved_tensors_context(spec):
                    loss = model(idx, tgt, plan)
                opt.zero_grad(set_to_none=True)
                if tracker is not None:
                    tracker.start_backward()
                loss.backward()
            opt.step()
            row = {"step": step, "strategy": spec.label, "loss": loss.item()}
            if events:
                row[EVENTS_COLUMN] = tracker.events if tracker is not None else None
                if tracker is not None:
                    tracker.close()
            rows.append(row)
            done += 1
            if progress is not None:
                progress(done, total)
        del model, opt
    return pd.DataFrame(rows, columns=["step", "strategy", "loss",
                                       *([EVENTS_COLUMN] if events else [])])

