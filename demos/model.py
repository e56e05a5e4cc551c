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

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

from demos.block import Probe, ProbedBlock, mark
from demos.gpt import GPTBlock
from demos.llama import LlamaBlock, RMSNorm
from memory.config import ModelConfig
from memory.segments import Segment, sqrt_k
from memory.strategies import SavedOps, policy

__all__ = ["BLOCKS", "GPT", "Probe", "Segment", "build_model", "make_batch", "policy_fn", "sqrt_k"]

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
    memory.strategies says which ops' outputs it saves)."""
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


def _contexts(policy: str | Callable) -> Callable:
    """A selective segment's context_fn: a named policy (memory.strategies), or a factory
    that makes a fresh policy function for each checkpointed call (a policy that counts the
    ops it sees: demos.sac_placement)."""
    if isinstance(policy, str):
        return partial(create_selective_checkpoint_contexts, policy_fn(policy))
    return lambda: create_selective_checkpoint_contexts(policy())


# Architecture -> the layer it stacks. GPT builds its layers through this table, so a
# different block (a ProbedBlock with the same constructor) is one entry here.
BLOCKS: dict[str, Callable[[ModelConfig, int], nn.Module]] = {"gpt": GPTBlock, "llama": LlamaBlock}


def final_norm(cfg: ModelConfig, arch: str) -> nn.Module:
    """The norm before the LM head: the same kind as the layers'."""
    if arch == "llama":
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
        """The probe of the model and of every layer, also inside a wrapper around
        layers (demos.compiler_budget's checkpointed segments)."""
        self.probe = probe
        for module in self.modules():
            if isinstance(module, ProbedBlock):
                module.probe = probe

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
            return checkpoint(fn, x, use_reentrant=False, context_fn=_contexts(seg.policy))
        raise ValueError(f"unknown segment mode {seg.mode!r}")

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor, plan: list[Segment] | None = None
    ) -> torch.Tensor:
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
        logits = mark(self.head(x), probe, "loss-done", None)  # (b, s, V)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def build_model(cfg: ModelConfig, device: str | torch.device = "cpu") -> GPT:
    """Weights from cfg.seed, so every strategy trains the same network."""
    device = torch.device(device)
    cuda = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda), device:  # built in place: no CPU copy first
        torch.manual_seed(cfg.seed)
        model = GPT(cfg)
    return model.to(dtype=TORCH_DTYPES[cfg.dtype]).train()


def make_batch(
    cfg: ModelConfig, step: int = 0, device: str | torch.device = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """A learnable synthetic task: each row counts up from a random start with a random
    stride (mod vocab), so the next token follows from the previous two."""
    g = torch.Generator().manual_seed(cfg.seed * 100_003 + step + 1)
    start = torch.randint(0, cfg.vocab, (cfg.batch, 1), generator=g)
    stride = torch.randint(1, max(2, min(17, cfg.vocab // 4)), (cfg.batch, 1), generator=g)
    seq = (start + stride * torch.arange(cfg.seq_len + 1)) % cfg.vocab
    return seq[:, :-1].contiguous().to(device), seq[:, 1:].contiguous().to(device)
