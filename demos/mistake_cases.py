"""The cases of the lab of mistakes (demos.mistakes): each runner measures a
mistake three times (plain, wrong, fixed) and returns the three runs and its configuration;
each `*_shows` check says whether a run shows the case's symptom."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import CheckpointError, checkpoint

from demos.mistake_measuring import (
    BlockRunner,
    case_model,
    ckpt,
    count_flops,
    embed,
    grads_of,
    head_loss,
    max_diff,
    measured,
    model_loss,
    none_grads,
    plain_block,
    probed_step,
    tracked,
    train_step,
    within_tolerance,
)
from demos.mistake_records import CASE_CONFIG, STATE_CONFIG, Measured
from demos.model import GPT, make_batch
from demos.tracker import LiveTracker


def run_whole_model() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    model = case_model()
    idx, tgt = make_batch(CASE_CONFIG)

    def one_segment(model: GPT, idx: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        return checkpoint(model, idx, tgt, use_reentrant=False)  # GPT.forward: the loss

    runs = {
        "plain": lambda: model_loss(model, idx, tgt),
        "wrong": lambda: one_segment(model, idx, tgt),
        "fixed": lambda: model_loss(model, idx, tgt, ckpt(False)),
    }
    out = []
    plain_grads = None
    for fn in runs.values():
        s = tracked(model, probed_step(model, fn), (idx, tgt))
        grads = grads_of(model)
        plain_grads = plain_grads or grads
        flops = count_flops(lambda fn=fn: fn().backward())
        out.append(measured(s, flops=flops, max_grad_diff=max_diff(grads, plain_grads)))
    return out[0], out[1], out[2], CASE_CONFIG.as_dict()


def whole_model_shows(m: Measured, plain: Measured) -> bool:
    extra = (m.flops or 0) - (plain.flops or 0)
    return within_tolerance(m.peak_bytes, plain.peak_bytes) and extra > 0


def run_frozen_inputs() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    model = case_model()
    for p in (*model.tok.parameters(), *model.pos.parameters()):  # type: ignore[union-attr]
        p.requires_grad_(False)  # a frozen embedding, as in adapter fine-tuning
    idx, tgt = make_batch(CASE_CONFIG)
    plain = tracked(model, train_step(model, idx, tgt), (idx, tgt))
    plain_grads = grads_of(model)
    out = [measured(plain, none_grads=none_grads(plain_grads), max_grad_diff=0.0)]
    for runner in (ckpt(True), ckpt(False)):
        s = tracked(model, train_step(model, idx, tgt, runner), (idx, tgt))
        grads = grads_of(model)
        out.append(measured(s, none_grads=none_grads(grads),
                             max_grad_diff=max_diff(grads, plain_grads)))
    return out[0], out[1], out[2], CASE_CONFIG.as_dict()


def none_shows(m: Measured, plain: Measured) -> bool:
    return len(m.none_grads) > len(plain.none_grads)


def run_dropout_rng() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    cfg = CASE_CONFIG.replace(dropout=0.1)
    model = case_model(cfg)
    idx, tgt = make_batch(cfg)
    out, plain_grads = [], None
    for runner in (plain_block, ckpt(False, preserve=False), ckpt(False, preserve=True)):
        s = tracked(model, train_step(model, idx, tgt, runner), (idx, tgt))
        grads = grads_of(model)
        plain_grads = plain_grads or grads
        out.append(measured(s, max_grad_diff=max_diff(grads, plain_grads)))
    return out[0], out[1], out[2], cfg.as_dict()


def differ_shows(m: Measured, plain: Measured) -> bool:
    return (m.max_grad_diff or 0.0) > 0.0


class _NormBlock(nn.Module):
    """A feed-forward block with a BatchNorm: Linear -> BatchNorm1d -> GELU, residual."""

    def __init__(self, h: int) -> None:
        super().__init__()
        self.fc = nn.Linear(h, h)
        self.bn = nn.BatchNorm1d(h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        return x + F.gelu(self.bn(self.fc(x).reshape(b * s, h)).reshape(b, s, h))


class _NormBlockFixed(_NormBlock):
    """The same block with only the Linear checkpointed: the BatchNorm runs once."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        y = checkpoint(self.fc, x, use_reentrant=False)
        return x + F.gelu(self.bn(y.reshape(b * s, h)).reshape(b, s, h))


def _bn_updates(blocks: nn.ModuleList) -> int:
    return sum(int(b.bn.num_batches_tracked) for b in blocks)


def run_batchnorm() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    cfg = CASE_CONFIG
    model = case_model(cfg)
    idx, tgt = make_batch(cfg)
    out, plain_stats, plain_grads = [], None, None
    for kind in ("plain", "wrong", "fixed"):
        torch.manual_seed(1)
        cls = _NormBlockFixed if kind == "fixed" else _NormBlock
        blocks = nn.ModuleList(cls(cfg.hidden) for _ in range(cfg.layers)).train()
        runner = ckpt(False) if kind == "wrong" else plain_block

        def step(tracker: LiveTracker, blocks: nn.ModuleList = blocks,
                 runner: BlockRunner = runner) -> torch.Tensor:
            model.zero_grad(set_to_none=True)
            x = embed(model, idx)
            for block in blocks:
                x = runner(block, x)
            loss = head_loss(model, x, tgt)
            tracker.start_backward()
            loss.backward()
            return loss

        s = tracked(model, step, (idx, tgt))
        stats = torch.cat([torch.cat([b.bn.running_mean, b.bn.running_var]) for b in blocks])
        grads = {f"blocks.{i}.{n}": p.grad.clone() for i, b in enumerate(blocks)
                 for n, p in b.named_parameters() if p.grad is not None}
        plain_stats = stats if plain_stats is None else plain_stats
        plain_grads = plain_grads or grads
        out.append(measured(s, statistic=float(_bn_updates(blocks)),
                             statistic_diff=float((stats - plain_stats).abs().max()),
                             max_grad_diff=max_diff(grads, plain_grads)))
    return out[0], out[1], out[2], cfg.as_dict()


def statistic_shows(m: Measured, plain: Measured) -> bool:
    return m.statistic is not None and m.statistic != plain.statistic


class _Effects:
    """What a training script might do inside a layer: count calls, collect a loss."""

    def __init__(self) -> None:
        self.calls = 0
        self.aux: list[torch.Tensor] = []


def run_side_effects() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    cfg = CASE_CONFIG
    model = case_model(cfg)
    idx, tgt = make_batch(cfg)

    def block_inside(effects: _Effects, block: nn.Module, x: torch.Tensor) -> torch.Tensor:
        effects.calls += 1  # the side effects first: early stop cannot skip them
        effects.aux.append(x.pow(2).mean())
        return block(x)

    def wrong(effects: _Effects, block: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(partial(block_inside, effects, block), x, use_reentrant=False)

    def fixed(effects: _Effects, block: nn.Module, x: torch.Tensor) -> torch.Tensor:
        effects.calls += 1  # outside the checkpointed function: once per forward
        effects.aux.append(x.pow(2).mean())
        return checkpoint(block, x, use_reentrant=False)

    out = []
    for runner in (partial(block_inside), wrong, fixed):
        effects = _Effects()
        s = tracked(model, train_step(model, idx, tgt, partial(runner, effects)), (idx, tgt))
        out.append(measured(s, statistic=float(effects.calls + len(effects.aux))))
    return out[0], out[1], out[2], cfg.as_dict()


def _state_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> int:
    total = 0
    for p in model.parameters():
        total += p.numel() * p.element_size()
        if p.grad is not None:
            total += p.grad.numel() * p.grad.element_size()
    for state in optimizer.state.values():
        for v in state.values():
            if isinstance(v, torch.Tensor):
                total += v.numel() * v.element_size()
    return total


def _state_run(runner: BlockRunner, freeze_large: bool) -> Measured:
    cfg = STATE_CONFIG
    model = case_model(cfg)
    if freeze_large:  # train what an adapter run trains: not the V x h embedding and head
        for module in (model.tok, model.head):
            module.weight.requires_grad_(False)
    idx, tgt = make_batch(cfg)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-3, foreach=False)

    def step(tracker: LiveTracker) -> torch.Tensor:
        loss = train_step(model, idx, tgt, runner)(tracker)
        tracker.set_phase("optimizer")
        optimizer.step()
        return loss

    s = tracked(model, step, (idx, tgt))
    return measured(s, state_bytes=_state_bytes(model, optimizer),
                     parameter_bytes=model.param_bytes())


def run_not_activations() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    plain = _state_run(plain_block, freeze_large=False)
    wrong = _state_run(ckpt(False), freeze_large=False)
    fixed = _state_run(plain_block, freeze_large=True)
    return plain, wrong, fixed, STATE_CONFIG.as_dict()


def _total(m: Measured) -> int:
    """The whole peak: the weights plus the live peak above them (which holds the
    gradients and the optimizer state made during the step)."""
    return (m.peak_bytes or 0) + (m.parameter_bytes or 0)


def state_shows(m: Measured, plain: Measured) -> bool:
    return within_tolerance(_total(m), _total(plain))


def run_no_grad() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    model = case_model().eval()
    idx, tgt = make_batch(CASE_CONFIG)

    def step_of(runner: BlockRunner) -> Callable[[LiveTracker], torch.Tensor]:
        def step(tracker: LiveTracker) -> torch.Tensor:
            with torch.no_grad():
                return model_loss(model, idx, tgt, runner)
        return step

    def guarded(block: nn.Module, x: torch.Tensor) -> torch.Tensor:
        # checkpoint only when there will be a backward (Hugging Face's own guard)
        if block.training and torch.is_grad_enabled():
            return checkpoint(block, x, use_reentrant=True)
        return block(x)

    runs = [tracked(model, step_of(r), (idx, tgt))
            for r in (plain_block, ckpt(True), guarded)]
    return (*(measured(s) for s in runs), CASE_CONFIG.as_dict())  # type: ignore[return-value]


def warning_shows(m: Measured, plain: Measured) -> bool:
    return m.warning is not None or m.error is not None


class _Truncate(nn.Module):
    """Keeps the first `keep` tokens, then runs a block: a data-dependent length (a
    curriculum, padding trimmed by a setting) that code may change after the forward."""

    def __init__(self, block: nn.Module, keep: int) -> None:
        super().__init__()
        self.block, self.keep = block, keep

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x[:, : self.keep])
        return F.pad(y, (0, 0, 0, x.shape[1] - y.shape[1]))


def run_mismatch() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    cfg = CASE_CONFIG
    model = case_model(cfg)
    idx, tgt = make_batch(cfg)
    half = cfg.seq_len // 2
    wrapped = [_Truncate(b, half) for b in model.blocks]

    def step_of(mode: str) -> Callable[[LiveTracker], torch.Tensor]:
        def step(tracker: LiveTracker) -> torch.Tensor:
            model.zero_grad(set_to_none=True)
            for w in wrapped:
                w.keep = half
            x = embed(model, idx)
            for w in wrapped:
                x = w(x) if mode == "plain" else checkpoint(w, x, use_reentrant=False)
            loss = head_loss(model, x, tgt)
            if mode == "wrong":  # the setting changes before backward recomputes
                for w in wrapped:
                    w.keep = half + 8
            tracker.start_backward()
            loss.backward()
            if mode == "fixed":  # the fix: change it only after backward
                for w in wrapped:
                    w.keep = half + 8
            return loss
        return step

    out, plain_grads = [], None
    for mode in ("plain", "wrong", "fixed"):
        s = tracked(model, step_of(mode), (idx, tgt))
        grads = grads_of(model)
        plain_grads = plain_grads or grads
        out.append(measured(s, max_grad_diff=max_diff(grads, plain_grads)
                             if s.error is None else None))
    return out[0], out[1], out[2], cfg.as_dict()


class _Captured(logging.Handler):
    """Keeps the messages a library logs (transformers warns through logging)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def run_hf_cache() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    """A tiny random-initialised Hugging Face Llama (built from a config, nothing
    downloaded), trained one step with use_cache=True. In transformers 5.24 the model's
    `merge_with_config_defaults` (utils/generic.py) turns use_cache off when
    checkpointing is on in training with gradients enabled, and logs "`use_cache=True` is
    incompatible with gradient checkpointing. Setting `use_cache=False`." (once per
    process: logging.Logger.warning_once is an lru_cache, cleared here so each run shows
    what the library says); modeling_layers.GradientCheckpointingLayer does the same per
    layer for a call that reaches it with use_cache=True."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    cfg = CASE_CONFIG
    hf = LlamaConfig(vocab_size=cfg.vocab, hidden_size=cfg.hidden, intermediate_size=2 * cfg.hidden,
                     num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads,
                     num_key_value_heads=1, max_position_embeddings=cfg.seq_len)
    torch.manual_seed(cfg.seed)
    model = LlamaForCausalLM(hf).train()
    idx, tgt = make_batch(cfg)
    library_logger = logging.getLogger("transformers")  # its modules log below it
    out = []
    for checkpointing, use_cache in ((False, True), (True, True), (True, False)):
        if checkpointing:
            model.activation_checkpointing_enable()  # use_reentrant=False by default
        else:
            model.activation_checkpointing_disable()
        cached: list[int] = []

        def train(tracker: LiveTracker, use_cache: bool = use_cache,
                  cached: list[int] = cached) -> torch.Tensor:
            model.zero_grad(set_to_none=True)
            result = model(input_ids=idx, labels=tgt, use_cache=use_cache)
            cache = getattr(result, "cache", None)
            cached.append(0 if cache is None else int(cache.get_seq_length()))
            tracker.start_backward()
            result.loss.backward()
            return result.loss

        hf_logging.warning_once.cache_clear()
        handler = _Captured()
        library_logger.addHandler(handler)
        try:
            s = tracked(model, train, (idx, tgt))
        finally:
            library_logger.removeHandler(handler)
        if handler.messages and s.warning is None:
            s.warning = handler.messages[0]
        out.append(measured(s, statistic=float(cached[0]) if cached else None))
    model.activation_checkpointing_disable()
    return out[0], out[1], out[2], {**cfg.as_dict(), "arch": "llama (transformers)"}


def error_shows(m: Measured, plain: Measured) -> bool:
    return m.error_type == CheckpointError.__name__

