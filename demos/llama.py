"""A Llama-style block (RMSNorm, rotary positions, grouped-query attention, SwiGLU MLP),
a sibling of demos.gpt.GPTBlock over the same base (demos.block.ProbedBlock):
same constructor arguments, same forward(x) -> x and probe hooks, so the engine measures it.

The layers follow Hugging Face's LlamaDecoderLayer op by op, because the bytes a layer
keeps for backward depend on the ops it runs: RMSNorm computes in fp32 and keeps its fp32
input, the reciprocal RMS and the normalised value; q and k are rotated outside the
attention kernel; the MLP is down(silu(gate(x)) * up(x)). No biases, no dropout.
memory.layer.layer_tensors (for an RMSNorm/SwiGLU architecture) lists what it keeps; a
test checks the two agree to the byte.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from demos.block import ProbedBlock
from memory.architectures import default_kv_heads, swiglu_width
from memory.config import ModelConfig

ROPE_THETA = 500_000.0  # Llama 3's base frequency


class RMSNorm(nn.Module):
    """Hugging Face's LlamaRMSNorm: normalise in fp32, scale in the input's dtype."""

    def __init__(self, hidden: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotary_tables(seq_len: int, head_dim: int, theta: float = ROPE_THETA
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of shape (seq_len, head_dim), the halves repeated (rotate_half layout)."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + _rotate_half(x) * sin


class LlamaBlock(ProbedBlock):
    """Pre-norm decoder layer: x + attn(norm(x)), then + mlp(norm(x)).

    kv_heads and mlp_width default to cfg.kv_heads / cfg.mlp_width when the config has
    them, else to half the heads (grouped-query attention, when heads is even) and
    Llama's 8h/3 rounded up to a multiple of 32."""

    def __init__(self, cfg: ModelConfig, index: int, kv_heads: int | None = None,
                 mlp_width: int | None = None) -> None:
        super().__init__(index)
        h, a = cfg.hidden, cfg.heads
        kv = kv_heads or getattr(cfg, "kv_heads", None) or default_kv_heads(a)
        m = mlp_width or getattr(cfg, "mlp_width", None) or swiglu_width(h)
        if a % kv:
            raise ValueError(f"heads={a} must be a multiple of kv_heads={kv}")
        d = h // a
        self.heads, self.kv_heads, self.head_dim = a, kv, d
        self.ln1 = RMSNorm(h)
        self.q = nn.Linear(h, a * d, bias=False)
        self.k = nn.Linear(h, kv * d, bias=False)
        self.v = nn.Linear(h, kv * d, bias=False)
        self.proj = nn.Linear(a * d, h, bias=False)
        self.ln2 = RMSNorm(h)
        self.gate = nn.Linear(h, m, bias=False)
        self.up = nn.Linear(h, m, bias=False)
        self.down = nn.Linear(m, h, bias=False)
        cos, sin = rotary_tables(cfg.seq_len, d)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def _body(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        a, kv, d = self.heads, self.kv_heads, self.head_dim
        y = self.ln1(x)
        q = self.q(y).view(b, s, a, d).transpose(1, 2)
        k = self.k(y).view(b, s, kv, d).transpose(1, 2)
        v = self.v(y).view(b, s, kv, d).transpose(1, 2)
        cos, sin = self.cos[:s], self.sin[:s]  # views of constant buffers
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv != a)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, a * d))
        y = self.ln2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))
