"""The GPT layer the lab's model stacks by default (nanoGPT's shape): pre-LayerNorm, fused
QKV and fused attention, a 4h GELU MLP, dropout after attention and after the MLP.

Shapes: b batch, s sequence length, h hidden size, a heads."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from demos.block import ProbedBlock
from memory.config import ModelConfig


class GPTBlock(ProbedBlock):
    """Pre-LayerNorm GPT layer: x + proj(attn(ln1(x))), then + out(gelu(fc(ln2(x))))."""

    def __init__(self, cfg: ModelConfig, index: int, mlp_width: int | None = None) -> None:
        super().__init__(index)
        h = cfg.hidden
        m = mlp_width or 4 * h  # the MLP's width: 4h, or a layer's own (memory.lab_chain)
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.proj = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.fc = nn.Linear(h, m)
        self.out = nn.Linear(m, h)
        # one module, used twice (after attention and after the MLP); Identity at 0, so
        # no masks are drawn or kept
        self.drop = nn.Dropout(cfg.dropout) if cfg.dropout > 0 else nn.Identity()

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
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))  # (b, s, m) -> (b, s, h)
