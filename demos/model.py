"""A small decoder whose layers can be checkpointed in segments, fully or selectively, and
its synthetic training data. cfg.arch picks the layer: "gpt" (pre-LayerNorm, fused
attention, 4h GELU MLP, learned positions) or "llama" (demos.llama: RMSNorm, rotary
positions, grouped-query attention, SwiGLU; the model then has no position table and an
RMSNorm before the head).

Shapes in the comments: b batch, s sequence length, h hidden size, a heads, V vocabulary.
The layers come from `BLOCKS` (a block factory keyed by architecture): another kind of
layer plugs in there without touching GPT."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

from demos.config import ModelConfig
from demos.segments import Segment, sqrt_k
from demos.strategies import SavedOps, policy

__all__ = ["BLOCKS", "GPT", "Block", "Probe", "Segment", "build_model", "make_batch",
           "policy_fn", "sqrt_k"]

aten = torch.ops.aten
TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _ops(*names: str) -> frozenset:
    found = []
    for name in names:
        packet = getattr(aten, name, None)
        if packet is not None:
            found.append(packet.default)
    return frozenset(found)


MATMUL_OPS = _ops("mm", "addmm", "bmm", "baddbmm")
ATTENTION_OPS = _ops(
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_fused_attention_overrideable",
)
_SAVE, _RECOMPUTE = CheckpointPolicy.MUST_SAVE, CheckpointPolicy.PREFER_RECOMPUTE


def policy_fn(name: str) -> Callable:
    """The per-op decision function for one selective-checkpointing policy (its record in
    demos.strategies says which ops' outputs it saves)."""
    saves = policy(name).saves
    if saves is SavedOps.ALL_BUT_ATTENTION:
        return _all_but_attention
    saved = MATMUL_OPS if saves is SavedOps.MATMULS else ATTENTION_OPS
    return lambda ctx, func, *a, **kw: _SAVE if func in saved else _RECOMPUTE


def _all_but_attention(ctx, func, *args, **kwargs) -> CheckpointPolicy:
    # Outputs that are filled in place afterwards (dropout's empty_like + bernoulli_) must
    # not be cached: SAC refuses a cached tensor that was mutated.
    if func in ATTENTION_OPS or func._schema.is_mutable or func.__name__.startswith("empty"):
        return _RECOMPUTE
    return _SAVE


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


def _mark(x: torch.Tensor, probe: Probe | None, event: str, layer: int | None) -> torch.Tensor:
    return x if probe is None else _BackwardMark.apply(x, probe, event, layer)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, index: int) -> None:
        super().__init__()
        h = cfg.hidden
        self.index, self.heads = index, cfg.heads
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.proj = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.fc = nn.Linear(h, 4 * h)
        self.out = nn.Linear(4 * h, h)
        # one module, used twice (after attention and after the MLP); Identity at 0, so
        # no masks are drawn or kept
        self.drop = nn.Dropout(cfg.dropout) if cfg.dropout > 0 else nn.Identity()
        self.probe: Probe | None = None

    def _body(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape  # (b, s, h)
        a = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=2)  # (b, s, 3h) -> 3 x (b, s, h)
        q, k, v = (t.view(b, s, a, h // a).transpose(1, 2) for t in (q, k, v))  # (b, a, s, h/a)
        # fused attention: the (b, a, s, s) scores are never stored, only the output and
        # a log-sum-exp per head and token
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (b, a, s, h/a)
        y = y.transpose(1, 2).reshape(b, s, h)  # (b, s, h)
        x = x + self.drop(self.proj(y))  # (b, s, h)
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))  # (b, s, 4h) -> (b, s, h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probe = self.probe
        if probe is None:
            return self._body(x)
        token = probe.enter_layer(self.index)
        try:  # a checkpoint's recomputation may stop early by raising; restore the state
            x = _mark(x, probe, "leave", self.index)
            return _mark(self._body(x), probe, "enter", self.index)
        finally:
            probe.restore(token)


# Architecture -> the layer it stacks. GPT builds its layers through this table, so a
# different block (one with the same forward(x) and probe attribute) is one entry here.
def _llama_block(cfg: ModelConfig, index: int) -> nn.Module:
    from demos.llama import LlamaBlock  # demos.llama imports Block from this module

    return LlamaBlock(cfg, index)


BLOCKS: dict[str, Callable[[ModelConfig, int], nn.Module]] = {"gpt": Block,
                                                              "llama": _llama_block}


def final_norm(cfg: ModelConfig, arch: str) -> nn.Module:
    """The norm before the LM head: the same kind as the layers'."""
    if arch == "llama":
        from demos.llama import RMSNorm

        return RMSNorm(cfg.hidden)
    return nn.LayerNorm(cfg.hidden)


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig, arch: str | None = None) -> None:
        super().__init__()
        arch = arch or cfg.arch
        self.cfg, self.arch = cfg, arch
        self.tok = nn.Embedding(cfg.vocab, cfg.hidden)
        # learned positions, one per token (gpt); llama layers rotate q and k instead
        self.pos = nn.Embedding(cfg.seq_len, cfg.hidden) if arch == "gpt" else None
        self.drop = nn.Dropout(cfg.dropout) if cfg.dropout > 0 else nn.Identity()
        self.blocks = nn.ModuleList(BLOCKS[arch](cfg, i) for i in range(cfg.layers))
        self.ln_f = final_norm(cfg, arch)
        # untied from the embedding: the head's V·h weights and gradient are counted apart
        self.head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        self.probe: Probe | None = None
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear | nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def set_probe(self, probe: Probe | None) -> None:
        self.probe = probe
        for block in self.blocks:
            block.probe = probe

    def param_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.parameters())

    def _run(self, start: int, stop: int, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks[start:stop]:
            x = block(x)
        return x

    def _segment(self, seg: Segment, x: torch.Tensor) -> torch.Tensor:
        fn = partial(self._run, seg.start, seg.stop)
        if seg.mode == "keep":
            return fn(x)
        if seg.mode == "checkpoint":
            return checkpoint(fn, x, use_reentrant=False)
        if seg.mode == "selective":
            ctx = partial(create_selective_checkpoint_contexts, policy_fn(seg.policy))
            return checkpoint(fn, x, use_reentrant=False, context_fn=ctx)
        raise ValueError(f"unknown segment mode {seg.mode!r}")

    def forward(self, idx: torch.Tensor, targets: torch.Tensor,
                plan: list[Segment] | None = None) -> torch.Tensor:
        """Mean next-token cross-entropy; plan says how layers are checkpointed."""
        probe = self.probe
        if probe is not None:
            probe.set_phase("forward", None)
        s = idx.shape[1]  # idx, targets: (b, s) token ids
        x = self.tok(idx)  # (b, s, h)
        if self.pos is not None:
            x = x + self.pos.weight[:s]
        x = self.drop(x)
        for seg in plan or [Segment(0, len(self.blocks))]:
            x = self._segment(seg, x)
        x = self.ln_f(x)
        if probe is not None:
            probe.set_phase("loss", None)
        logits = _mark(self.head(x), probe, "loss-done", None)  # (b, s, V)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def build_model(cfg: ModelConfig, device: str | torch.device = "cpu") -> GPT:
    """Weights from cfg.seed, so every strategy trains the same network."""
    device = torch.device(device)
    cuda = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda), device:  # built in place: no CPU copy first
        torch.manual_seed(cfg.seed)
        model = GPT(cfg)
    return model.to(dtype=TORCH_DTYPES[cfg.dtype]).train()


def make_batch(cfg: ModelConfig, step: int = 0, device: str | torch.device = "cpu"
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """A learnable synthetic task: each row counts up from a random start with a random
    stride (mod vocab), so the next token follows from the previous two."""
    g = torch.Generator().manual_seed(cfg.seed * 100_003 + step + 1)
    start = torch.randint(0, cfg.vocab, (cfg.batch, 1), generator=g)
    stride = torch.randint(1, max(2, min(17, cfg.vocab // 4)), (cfg.batch, 1), generator=g)
    seq = (start + stride * torch.arange(cfg.seq_len + 1)) % cfg.vocab
    return seq[:, :-1].contiguous().to(device), seq[:, 1:].contiguous().to(device)
