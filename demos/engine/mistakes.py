"""The lab of mistakes: the classic ways gradient checkpointing goes wrong, each run twice
on the lab's own model (the wrong way and the fixed way) beside a plain run, and measured
on this run: live bytes at the peak (demos.engine.tracker.LiveTracker), counted FLOPs, which
parameters got no gradient, the largest gradient difference to the plain run, a running
statistic, and the text of the warning or error torch raised. No Streamlit.

What torch does is checked against torch 2.13's torch/utils/checkpoint.py:
- `check_backward_validity` warns "None of the inputs have requires_grad=True. Gradients
  will be None" when a reentrant checkpoint (`CheckpointFunction.forward`) gets no input
  that needs a gradient; it runs the function under `torch.no_grad()`, so nothing inside
  is recorded and the parameters inside get no gradient.
- `preserve_rng_state=False` skips `torch.random.fork_rng` around the recomputation, so a
  dropout inside draws new masks in backward.
- `_checkpoint_without_reentrant_generator` returns at once when grad mode is off
  ("if not torch.is_grad_enabled(): yield; return"): nothing is saved, nothing recomputed.
- `_CheckpointFrame.check_recomputed_tensors_match` raises `CheckpointError` when the
  recomputation saves a different number of tensors, or tensors with other shapes, dtypes
  or devices, than the forward did (the determinism check, `determinism_check="default"`).
- Non-reentrant checkpointing stops recomputing once every saved tensor is rebuilt
  (`early_stop=True`), so a side effect placed after the last saved op may not repeat.
"""

from __future__ import annotations

import enum
import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import CheckpointError, checkpoint
from torch.utils.flop_counter import FlopCounterMode

from demos.engine.model import GPT, build_model, make_batch
from demos.engine.tracker import LiveTracker
from i18n import N_
from memory.config import ModelConfig

# Small enough that one case (three runs) takes well under a second on one CPU core, big
# enough that the blocks' activations outweigh the logits.
CASE_CONFIG = ModelConfig(layers=4, hidden=64, heads=2, seq_len=64, batch=4, vocab=256)
# Weights, gradients and AdamW's two moments outweigh the activations here (one short
# sequence, a wide vocabulary): the case "activations are not the problem".
STATE_CONFIG = ModelConfig(layers=2, hidden=128, heads=2, seq_len=16, batch=1, vocab=8192)
PEAK_TOLERANCE = 0.05  # "did not drop": within 5% of the plain run's peak


class Symptom(enum.Enum):
    """What a learner sees first; each leads to the cases that cause it."""

    PEAK_DID_NOT_DROP = "peak-did-not-drop"
    GRADIENTS_NONE = "gradients-none"
    RESULTS_DIFFER = "results-differ"
    SLOWER = "slower"
    WARNING = "warning"


SYMPTOM_TITLES: dict[Symptom, str] = {
    Symptom.PEAK_DID_NOT_DROP: N_("Peak memory did not drop"),
    Symptom.GRADIENTS_NONE: N_("Some gradients are None"),
    Symptom.RESULTS_DIFFER: N_("The loss or the gradients differ"),
    Symptom.SLOWER: N_("Slower than expected"),
    Symptom.WARNING: N_("A warning or an error"),
}


class Statistic(enum.Enum):
    """The running statistic a case counts (none for most)."""

    NONE = "none"
    BATCHNORM_UPDATES = "batchnorm-updates"
    SIDE_EFFECTS = "side-effects"
    CACHED_TOKENS = "cached-tokens"


@dataclass(frozen=True)
class Measured:
    """One run of a case, as measured. Bytes are live tensor bytes above the parameters
    (the live tracker's peak); a field a case does not measure is None."""

    peak_bytes: int | None = None
    peak_phase: str | None = None  # forward, recompute, backward, loss, optimizer
    flops: int | None = None
    none_grads: tuple[str, ...] = ()  # trainable parameters left without a gradient
    max_grad_diff: float | None = None  # largest |grad - plain grad| over all parameters
    loss: float | None = None
    statistic: float | None = None  # the case's Statistic, counted
    statistic_diff: float | None = None  # largest |running statistic - plain run's|
    state_bytes: int | None = None  # parameters + gradients + optimizer state, after the step
    parameter_bytes: int | None = None  # the weights (not counted in peak_bytes)
    warning: str | None = None  # the first warning torch raised
    error: str | None = None  # the error torch raised (first line)
    error_type: str | None = None
    seconds: float = 0.0

    @staticmethod
    def from_json(data: dict[str, Any]) -> Measured:
        return Measured(**{**data, "none_grads": tuple(data.get("none_grads", ()))})


@dataclass(frozen=True)
class CaseResult:
    """A case measured three times: plain (no checkpointing), wrong, fixed; and whether
    the symptom showed in the wrong run and in the fixed one."""

    case: str
    plain: Measured
    wrong: Measured
    fixed: Measured
    wrong_shows: bool
    fixed_shows: bool
    config: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> CaseResult:
        return CaseResult(case=data["case"], plain=Measured.from_json(data["plain"]),
                          wrong=Measured.from_json(data["wrong"]),
                          fixed=Measured.from_json(data["fixed"]),
                          wrong_shows=bool(data["wrong_shows"]),
                          fixed_shows=bool(data["fixed_shows"]),
                          config=dict(data.get("config", {})))


@dataclass(frozen=True)
class Case:
    """One classic mistake: its stable id, the symptoms it shows, what to read, the code
    of the wrong and the fixed way, the lesson where the idea is taught, and its runner."""

    id: str
    symptoms: frozenset[Symptom]
    title: str  # catalog message
    why: str  # one sentence, catalog message
    fix: str  # the one-line fix in words, catalog message
    wrong_code: str  # code is not translated
    fixed_code: str
    lesson: str  # slug of the lesson that teaches the idea (lessons.catalog)
    run: Callable[[], tuple[Measured, Measured, Measured, dict[str, Any]]]
    shows: Callable[[Measured, Measured], bool]  # (run, plain) -> did the symptom show
    statistic: Statistic = Statistic.NONE
    # seconds the three runs take on an idle 2-core CPU once torch is warm, in the unit of
    # memory.theory.cpu_seconds: the demo service's wait estimates and speed history use it
    estimate_s: float = 0.2


# ---------------------------------------------------------------- measuring helpers

def _within(peak: int | None, plain: int | None) -> bool:
    return peak is not None and plain is not None and abs(peak - plain) <= PEAK_TOLERANCE * plain


def _grads(model: nn.Module) -> dict[str, torch.Tensor | None]:
    return {n: (None if p.grad is None else p.grad.detach().clone())
            for n, p in model.named_parameters() if p.requires_grad}


def _none_grads(grads: dict[str, torch.Tensor | None]) -> tuple[str, ...]:
    return tuple(n for n, g in grads.items() if g is None)


def _max_diff(grads: dict[str, torch.Tensor | None],
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


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


@dataclass
class _Step:
    """What a run under the tracker leaves: peak, phase at the peak, loss, warnings."""

    peak: int = 0
    phase: str | None = None
    loss: float | None = None
    warning: str | None = None
    error: str | None = None
    error_type: str | None = None
    seconds: float = 0.0


def _tracked(model: nn.Module, step: Callable[[LiveTracker], torch.Tensor | None],
             inputs: tuple[torch.Tensor, ...] = ()) -> _Step:
    """Run step(tracker) under the live tracker, capturing warnings and a checkpoint
    error; parameters and inputs are not counted."""
    out = _Step()
    tracker = LiveTracker("cpu")
    tracker.ignore(list(model.parameters()) + list(inputs))
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with tracker:
                loss = step(tracker)
            out.loss = None if loss is None else float(loss.detach())
        except CheckpointError as error:
            out.error, out.error_type = _first_line(str(error)), type(error).__name__
    out.seconds = time.perf_counter() - started
    out.peak, out.phase = tracker.peak_bytes, (tracker.peak_at or (None, None, None))[1]
    tracker.close()
    torch_warnings = [w for w in caught if "torch" in (w.filename or "")
                      or "checkpoint" in str(w.message)]
    if torch_warnings:
        out.warning = str(torch_warnings[0].message)
    return out


def _flops(step: Callable[[], object]) -> int:
    counter = FlopCounterMode(display=False)
    with counter, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step()
    return int(counter.get_total_flops())


def _measured(s: _Step, **more: Any) -> Measured:
    return Measured(peak_bytes=s.peak, peak_phase=s.phase, loss=s.loss, warning=s.warning,
                    error=s.error, error_type=s.error_type, seconds=s.seconds, **more)


def _model(cfg: ModelConfig = CASE_CONFIG) -> GPT:
    torch.manual_seed(cfg.seed)
    return build_model(cfg)


def _embed(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    x = model.tok(idx)
    if model.pos is not None:
        x = x + model.pos.weight[: idx.shape[1]]
    return model.drop(x)


def _head_loss(model: GPT, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = model.head(model.ln_f(x))
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


BlockRunner = Callable[[nn.Module, torch.Tensor], torch.Tensor]


def _plain_block(block: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return block(x)


def _loss(model: GPT, idx: torch.Tensor, targets: torch.Tensor,
          run_block: BlockRunner = _plain_block) -> torch.Tensor:
    x = _embed(model, idx)
    for block in model.blocks:
        x = run_block(block, x)
    return _head_loss(model, x, targets)


def _train_step(model: GPT, idx: torch.Tensor, targets: torch.Tensor,
                run_block: BlockRunner = _plain_block, seed: int = 0
                ) -> Callable[[LiveTracker], torch.Tensor]:
    def step(tracker: LiveTracker) -> torch.Tensor:
        model.zero_grad(set_to_none=True)
        torch.manual_seed(seed)  # the same dropout masks in every run
        tracker.set_phase("forward")
        model.set_probe(tracker)
        try:
            loss = _loss(model, idx, targets, run_block)
            tracker.start_backward()
            loss.backward()
        finally:
            model.set_probe(None)
        return loss
    return step


def _ckpt(reentrant: bool, preserve: bool = True) -> BlockRunner:
    def run(block: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(block, x, use_reentrant=reentrant, preserve_rng_state=preserve)
    return run


# ---------------------------------------------------------------- the cases

def _whole_model() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    model = _model()
    idx, tgt = make_batch(CASE_CONFIG)

    def one_segment(model: GPT, idx: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        return checkpoint(model, idx, tgt, use_reentrant=False)  # GPT.forward: the loss

    def step_of(loss_fn: Callable[[], torch.Tensor]) -> Callable[[LiveTracker], torch.Tensor]:
        def step(tracker: LiveTracker) -> torch.Tensor:
            model.zero_grad(set_to_none=True)
            model.set_probe(tracker)
            try:
                loss = loss_fn()
                tracker.start_backward()
                loss.backward()
            finally:
                model.set_probe(None)
            return loss
        return step

    runs = {
        "plain": lambda: _loss(model, idx, tgt),
        "wrong": lambda: one_segment(model, idx, tgt),
        "fixed": lambda: _loss(model, idx, tgt, _ckpt(False)),
    }
    out = []
    plain_grads = None
    for fn in runs.values():
        s = _tracked(model, step_of(fn), (idx, tgt))
        grads = _grads(model)
        plain_grads = plain_grads or grads
        flops = _flops(lambda fn=fn: fn().backward())
        out.append(_measured(s, flops=flops, max_grad_diff=_max_diff(grads, plain_grads)))
    return out[0], out[1], out[2], CASE_CONFIG.as_dict()


def _whole_model_shows(m: Measured, plain: Measured) -> bool:
    extra = (m.flops or 0) - (plain.flops or 0)
    return _within(m.peak_bytes, plain.peak_bytes) and extra > 0


def _frozen_inputs() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    model = _model()
    for p in (*model.tok.parameters(), *model.pos.parameters()):  # type: ignore[union-attr]
        p.requires_grad_(False)  # a frozen embedding, as in adapter fine-tuning
    idx, tgt = make_batch(CASE_CONFIG)
    plain = _tracked(model, _train_step(model, idx, tgt), (idx, tgt))
    plain_grads = _grads(model)
    out = [_measured(plain, none_grads=_none_grads(plain_grads), max_grad_diff=0.0)]
    for runner in (_ckpt(True), _ckpt(False)):
        s = _tracked(model, _train_step(model, idx, tgt, runner), (idx, tgt))
        grads = _grads(model)
        out.append(_measured(s, none_grads=_none_grads(grads),
                             max_grad_diff=_max_diff(grads, plain_grads)))
    return out[0], out[1], out[2], CASE_CONFIG.as_dict()


def _none_shows(m: Measured, plain: Measured) -> bool:
    return len(m.none_grads) > len(plain.none_grads)


def _dropout_rng() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    cfg = CASE_CONFIG.replace(dropout=0.1)
    model = _model(cfg)
    idx, tgt = make_batch(cfg)
    out, plain_grads = [], None
    for runner in (_plain_block, _ckpt(False, preserve=False), _ckpt(False, preserve=True)):
        s = _tracked(model, _train_step(model, idx, tgt, runner), (idx, tgt))
        grads = _grads(model)
        plain_grads = plain_grads or grads
        out.append(_measured(s, max_grad_diff=_max_diff(grads, plain_grads)))
    return out[0], out[1], out[2], cfg.as_dict()


def _differ_shows(m: Measured, plain: Measured) -> bool:
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


def _batchnorm() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    cfg = CASE_CONFIG
    model = _model(cfg)
    idx, tgt = make_batch(cfg)
    out, plain_stats, plain_grads = [], None, None
    for kind in ("plain", "wrong", "fixed"):
        torch.manual_seed(1)
        cls = _NormBlockFixed if kind == "fixed" else _NormBlock
        blocks = nn.ModuleList(cls(cfg.hidden) for _ in range(cfg.layers)).train()
        runner = _ckpt(False) if kind == "wrong" else _plain_block

        def step(tracker: LiveTracker, blocks: nn.ModuleList = blocks,
                 runner: BlockRunner = runner) -> torch.Tensor:
            model.zero_grad(set_to_none=True)
            x = _embed(model, idx)
            for block in blocks:
                x = runner(block, x)
            loss = _head_loss(model, x, tgt)
            tracker.start_backward()
            loss.backward()
            return loss

        s = _tracked(model, step, (idx, tgt))
        stats = torch.cat([torch.cat([b.bn.running_mean, b.bn.running_var]) for b in blocks])
        grads = {f"blocks.{i}.{n}": p.grad.clone() for i, b in enumerate(blocks)
                 for n, p in b.named_parameters() if p.grad is not None}
        plain_stats = stats if plain_stats is None else plain_stats
        plain_grads = plain_grads or grads
        out.append(_measured(s, statistic=float(_bn_updates(blocks)),
                             statistic_diff=float((stats - plain_stats).abs().max()),
                             max_grad_diff=_max_diff(grads, plain_grads)))
    return out[0], out[1], out[2], cfg.as_dict()


def _statistic_shows(m: Measured, plain: Measured) -> bool:
    return m.statistic is not None and m.statistic != plain.statistic


class _Effects:
    """What a training script might do inside a layer: count calls, collect a loss."""

    def __init__(self) -> None:
        self.calls = 0
        self.aux: list[torch.Tensor] = []


def _side_effects() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    cfg = CASE_CONFIG
    model = _model(cfg)
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
        s = _tracked(model, _train_step(model, idx, tgt, partial(runner, effects)), (idx, tgt))
        out.append(_measured(s, statistic=float(effects.calls + len(effects.aux))))
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
    model = _model(cfg)
    if freeze_large:  # train what an adapter run trains: not the V x h embedding and head
        for module in (model.tok, model.head):
            module.weight.requires_grad_(False)
    idx, tgt = make_batch(cfg)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-3, foreach=False)

    def step(tracker: LiveTracker) -> torch.Tensor:
        loss = _train_step(model, idx, tgt, runner)(tracker)
        tracker.set_phase("optimizer")
        optimizer.step()
        return loss

    s = _tracked(model, step, (idx, tgt))
    return _measured(s, state_bytes=_state_bytes(model, optimizer),
                     parameter_bytes=model.param_bytes())


def _not_activations() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    plain = _state_run(_plain_block, freeze_large=False)
    wrong = _state_run(_ckpt(False), freeze_large=False)
    fixed = _state_run(_plain_block, freeze_large=True)
    return plain, wrong, fixed, STATE_CONFIG.as_dict()


def _total(m: Measured) -> int:
    """The whole peak: the weights plus the live peak above them (which holds the
    gradients and the optimizer state made during the step)."""
    return (m.peak_bytes or 0) + (m.parameter_bytes or 0)


def _state_shows(m: Measured, plain: Measured) -> bool:
    return _within(_total(m), _total(plain))


def _no_grad() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    model = _model().eval()
    idx, tgt = make_batch(CASE_CONFIG)

    def step_of(runner: BlockRunner) -> Callable[[LiveTracker], torch.Tensor]:
        def step(tracker: LiveTracker) -> torch.Tensor:
            with torch.no_grad():
                return _loss(model, idx, tgt, runner)
        return step

    def guarded(block: nn.Module, x: torch.Tensor) -> torch.Tensor:
        # checkpoint only when there will be a backward (Hugging Face's own guard)
        if block.training and torch.is_grad_enabled():
            return checkpoint(block, x, use_reentrant=True)
        return block(x)

    runs = [_tracked(model, step_of(r), (idx, tgt))
            for r in (_plain_block, _ckpt(True), guarded)]
    return (*(_measured(s) for s in runs), CASE_CONFIG.as_dict())  # type: ignore[return-value]


def _warning_shows(m: Measured, plain: Measured) -> bool:
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


def _mismatch() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    cfg = CASE_CONFIG
    model = _model(cfg)
    idx, tgt = make_batch(cfg)
    half = cfg.seq_len // 2
    wrapped = [_Truncate(b, half) for b in model.blocks]

    def step_of(mode: str) -> Callable[[LiveTracker], torch.Tensor]:
        def step(tracker: LiveTracker) -> torch.Tensor:
            model.zero_grad(set_to_none=True)
            for w in wrapped:
                w.keep = half
            x = _embed(model, idx)
            for w in wrapped:
                x = w(x) if mode == "plain" else checkpoint(w, x, use_reentrant=False)
            loss = _head_loss(model, x, tgt)
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
        s = _tracked(model, step_of(mode), (idx, tgt))
        grads = _grads(model)
        plain_grads = plain_grads or grads
        out.append(_measured(s, max_grad_diff=_max_diff(grads, plain_grads)
                             if s.error is None else None))
    return out[0], out[1], out[2], cfg.as_dict()


class _Captured(logging.Handler):
    """Keeps the messages a library logs (transformers warns through logging)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _hf_cache() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
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
            s = _tracked(model, train, (idx, tgt))
        finally:
            library_logger.removeHandler(handler)
        if handler.messages and s.warning is None:
            s.warning = handler.messages[0]
        out.append(_measured(s, statistic=float(cached[0]) if cached else None))
    model.activation_checkpointing_disable()
    return out[0], out[1], out[2], {**cfg.as_dict(), "arch": "llama (transformers)"}


def _error_shows(m: Measured, plain: Measured) -> bool:
    return m.error_type == CheckpointError.__name__


S = Symptom
CASES: dict[str, Case] = {c.id: c for c in [
    Case("whole-model-one-segment", frozenset({S.PEAK_DID_NOT_DROP, S.SLOWER}),
         N_("The whole model as one segment"),
         N_("Backward rebuilds every activation of the segment at once, so the peak is the "
            "plain run's, and a whole extra forward is paid on top."),
         N_("Checkpoint each layer (or short runs of layers), not the whole stack."),
         "loss = checkpoint(model, idx, targets, use_reentrant=False)",
         "for block in blocks:\n    x = checkpoint(block, x, use_reentrant=False)",
         "how-many", _whole_model, _whole_model_shows, estimate_s=0.5),
    Case("reentrant-frozen-inputs", frozenset({S.GRADIENTS_NONE, S.WARNING}),
         N_("Reentrant checkpoint with inputs that need no gradient"),
         N_("The reentrant variant runs the layer under no_grad and builds its graph only "
            "from inputs that need a gradient; with a frozen embedding there is none, so the "
            "layers' weights get no gradient."),
         N_("Pass use_reentrant=False (or make the inputs require a gradient: "
            "enable_input_require_grads() in Hugging Face)."),
         "model.tok.requires_grad_(False)\nx = checkpoint(block, x, use_reentrant=True)",
         "model.tok.requires_grad_(False)\nx = checkpoint(block, x, use_reentrant=False)",
         "in-practice", _frozen_inputs, _none_shows, estimate_s=0.12),
    Case("dropout-without-rng", frozenset({S.RESULTS_DIFFER}),
         N_("Dropout without the RNG state"),
         N_("Without the saved random state the recomputation draws new dropout masks, so "
            "backward differentiates a different network than the forward ran."),
         N_("Keep the default preserve_rng_state=True."),
         "checkpoint(block, x, use_reentrant=False, preserve_rng_state=False)",
         "checkpoint(block, x, use_reentrant=False)",
         "cost-and-correctness", _dropout_rng, _differ_shows, estimate_s=0.18),
    Case("batchnorm-in-checkpoint", frozenset({S.RESULTS_DIFFER}),
         N_("Batch norm inside a checkpoint in training mode"),
         N_("The recomputation runs the batch norm again in training mode, so its running "
            "statistics are updated twice per step."),
         N_("Keep the batch norm outside the checkpointed function (or use LayerNorm)."),
         "x = checkpoint(block_with_batchnorm, x, use_reentrant=False)",
         "y = checkpoint(block.fc, x, use_reentrant=False)\nx = x + F.gelu(block.bn(y))",
         "cost-and-correctness", _batchnorm, _statistic_shows, Statistic.BATCHNORM_UPDATES,
         estimate_s=0.07),
    Case("side-effects-twice", frozenset({S.RESULTS_DIFFER}),
         N_("Side effects inside a checkpointed function"),
         N_("Everything the function does runs again in backward: a counter counts twice "
            "and an auxiliary loss is appended to the list twice."),
         N_("Do side effects outside the checkpointed function, or return the value from "
            "it."),
         "def fn(x):\n    calls += 1; aux.append(x.pow(2).mean())\n    return block(x)\n"
         "x = checkpoint(fn, x, use_reentrant=False)",
         "calls += 1; aux.append(x.pow(2).mean())\n"
         "x = checkpoint(block, x, use_reentrant=False)",
         "cost-and-correctness", _side_effects, _statistic_shows, Statistic.SIDE_EFFECTS,
         estimate_s=0.17),
    Case("activations-not-the-problem", frozenset({S.PEAK_DID_NOT_DROP}),
         N_("Activations are not the problem"),
         N_("Here weights, gradients and the optimizer's two moments set the peak; "
            "checkpointing only shrinks activations, which are a small part of it."),
         N_("Shrink what sets the peak: train fewer parameters (adapters, frozen embedding "
            "and head), a lighter optimizer state, or lower precision."),
         "for block in blocks:\n    x = checkpoint(block, x, use_reentrant=False)",
         "model.tok.weight.requires_grad_(False)\nmodel.head.weight.requires_grad_(False)",
         "why-memory", _not_activations, _state_shows, estimate_s=0.32),
    Case("no-grad-or-eval", frozenset({S.WARNING, S.PEAK_DID_NOT_DROP}),
         N_("Checkpointing under no_grad or in eval mode"),
         N_("Without autograd nothing is saved for a backward, so there is nothing to "
            "save memory on; the reentrant variant warns that gradients will be None."),
         N_("Checkpoint only when training: if self.training and torch.is_grad_enabled()."),
         "model.eval()\nwith torch.no_grad():\n    x = checkpoint(block, x, use_reentrant=True)",
         "if block.training and torch.is_grad_enabled():\n"
         "    x = checkpoint(block, x, use_reentrant=True)\nelse:\n    x = block(x)",
         "cost-and-correctness", _no_grad, _warning_shows, estimate_s=0.05),
    Case("recompute-mismatch", frozenset({S.WARNING}),
         N_("Recomputation that does not match"),
         N_("A setting that decides a shape changed between the forward and backward, so "
            "the recomputation saved tensors of other shapes and torch's determinism check "
            "stopped the backward."),
         N_("Change such settings only after backward, or pass them into the checkpointed "
            "function as arguments."),
         "loss = model(x)\nmodel.keep += 8  # before backward\nloss.backward()",
         "loss = model(x)\nloss.backward()\nmodel.keep += 8",
         "how-it-works", _mismatch, _error_shows, estimate_s=0.12),
    Case("use-cache-with-checkpointing", frozenset({S.WARNING}),
         N_("use_cache=True with checkpointing in Hugging Face"),
         N_("A key/value cache only speeds up generation; in training with checkpointing "
            "the library switches it off and says so, and without checkpointing it holds "
            "the keys and values of every layer for nothing."),
         N_("Set model.config.use_cache = False for training (turn it back on to "
            "generate)."),
         "model.activation_checkpointing_enable()\nmodel(input_ids, labels=labels, "
         "use_cache=True)",
         "model.config.use_cache = False\nmodel.activation_checkpointing_enable()\n"
         "model(input_ids, labels=labels)",
         "in-practice", _hf_cache, _warning_shows, Statistic.CACHED_TOKENS, estimate_s=0.4),
]}
del S


def cases_for(symptom: Symptom) -> list[Case]:
    """The cases that show a symptom, in the lab's order."""
    return [c for c in CASES.values() if symptom in c.symptoms]


def run_case(case_id: str) -> CaseResult:
    """Run one case (plain, wrong, fixed) on this CPU and measure it."""
    case = CASES[case_id]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small tensors: threads cost more than they give
    try:
        plain, wrong, fixed, config = case.run()
    finally:
        torch.set_num_threads(threads)
    return CaseResult(case_id, plain, wrong, fixed, case.shows(wrong, plain),
                      case.shows(fixed, plain), config)


def run_cases(case_ids: list[str] | None = None) -> list[CaseResult]:
    return [run_case(c) for c in (case_ids or list(CASES))]
