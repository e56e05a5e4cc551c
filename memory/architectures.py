"""Decoder architectures the planner knows: shapes of widely used open models, from their
published config.json files (cited per preset), and a custom one built from the same fields.

Two layer kinds:
* "gpt": LayerNorm, one fused QKV projection, GELU MLP (usually 4h), biases, learned
  positions, dropout (GPT-2).
* "llama": RMSNorm, separate q/k/v projections with rotary positions, grouped-query
  attention, SwiGLU MLP (gate, up, down), no dropout (Llama, Qwen, Mistral ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from memory.config import ModelConfig

KINDS = ("gpt", "llama")
MLP_KINDS = ("gelu", "swiglu")
NORMS = ("layernorm", "rmsnorm")


def swiglu_width(hidden: int, multiple: int = 32) -> int:
    """Llama's SwiGLU width for a hidden size: 8h/3 rounded up to a multiple."""
    return multiple * math.ceil(8 * hidden / 3 / multiple)


def default_kv_heads(heads: int) -> int:
    """Grouped-query attention with two query heads per key/value head when possible."""
    return heads // 2 if heads % 2 == 0 else heads


@dataclass(frozen=True)
class Architecture:
    key: str
    label: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    mlp_width: int
    mlp: str  # gelu | swiglu
    norm: str  # layernorm | rmsnorm
    vocab: int
    tied: bool
    positions: int = 0  # rows of a learned position table (0: rotary positions)
    qkv_bias: bool = False
    linear_bias: bool = False  # biases on the attention output and the MLP
    dropout: bool = False  # residual dropout, and dropout on the attention probabilities
    source: str = ""  # where the numbers come from
    published_params: int | None = None  # the parameter count its publisher states
    family: str = ""  # Hugging Face model_type (gpt2, llama, mistral, qwen2, gemma ...)
    head_size: int = 0  # a config's own head_dim where it is not hidden / heads (Gemma 7B)
    # the MLP's activation as transformers names it (config hidden_act/activation_function);
    # "": the fused one of the MLP kind (gelu: torch's GELU, swiglu: SiLU)
    act: str = ""
    # parameters counted on the real class (planner.class_memory), where the shapes above
    # do not say them all (experts, q/k norms, post-norms): every parameter, one layer's
    counted_params: int = 0
    counted_block: int = 0
    # a mixture-of-experts model's expert weights (counted on the class): in the whole model
    # and in its largest layer; 0 for a dense model
    expert_params: int = 0
    expert_block: int = 0

    @property
    def activation(self) -> str:
        return self.act or ("gelu" if self.mlp == "gelu" else "silu")

    @property
    def kind(self) -> str:
        return "llama" if self.norm == "rmsnorm" else "gpt"

    @property
    def head_dim(self) -> int:
        return self.head_size or self.hidden // self.heads

    def with_(self, **changes: object) -> Architecture:
        return replace(self, **changes)

    def linears(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each linear layer of one block (worked out once per
        architecture and kept: the planner's searches ask for them many thousand times;
        the dict is shared, so callers read it and never change it)."""
        cached = self.__dict__.get("_linears")
        if cached is not None:
            return cached
        h, d = self.hidden, self.head_dim
        q, kv, m = self.heads * d, self.kv_heads * d, self.mlp_width
        out = {"q": (h, q), "k": (h, kv), "v": (h, kv), "o": (q, h)}
        if self.mlp == "swiglu":
            out |= {"gate": (h, m), "up": (h, m), "down": (m, h)}
        else:
            out |= {"fc": (h, m), "proj": (m, h)}
        object.__setattr__(self, "_linears", out)  # a cache, not a field: eq/hash unchanged
        return out

    def block_params(self) -> int:
        if self.counted_block:
            return self.counted_block
        h, d = self.hidden, self.head_dim
        weights = sum(i * o for i, o in self.linears().values())
        biases = (self.heads + 2 * self.kv_heads) * d if self.qkv_bias else 0
        if self.linear_bias:
            biases += h + sum(o for name, (_, o) in self.linears().items()
                              if name not in ("q", "k", "v", "o"))
        norms = 2 * (2 * h if self.norm == "layernorm" else h)
        return weights + biases + norms

    def embedding_params(self) -> int:
        """Token table, position table, final norm and (untied) output head."""
        h = self.hidden
        final = 2 * h if self.norm == "layernorm" else h
        head = 0 if self.tied else self.vocab * h
        return self.vocab * h + self.positions * h + final + head

    def params(self) -> int:
        if self.counted_params:
            return self.counted_params
        return self.layers * self.block_params() + self.embedding_params()

    def check(self) -> Architecture:
        """Self if the shapes are consistent, else ShapeError naming the field."""
        for name in ("layers", "hidden", "heads", "kv_heads", "mlp_width", "vocab"):
            if getattr(self, name) < 1:
                raise ShapeError("at-least-one", f"{name} must be at least 1", field=name)
        if self.hidden % self.heads and not self.head_size:
            raise ShapeError("hidden-heads", f"hidden={self.hidden} must be a multiple of "
                             f"heads={self.heads}", hidden=self.hidden, heads=self.heads)
        if self.heads % self.kv_heads:
            raise ShapeError("heads-kv", f"heads={self.heads} must be a multiple of "
                             f"kv_heads={self.kv_heads}", heads=self.heads,
                             kv_heads=self.kv_heads)
        if self.mlp not in MLP_KINDS or self.norm not in NORMS:
            raise ShapeError("kind", f"unknown mlp {self.mlp!r} or norm {self.norm!r}",
                             mlp=self.mlp, norm=self.norm)
        return self


class ShapeError(ValueError):
    """An inconsistent architecture: `problem` (an id) and the numbers involved (`params`),
    for the page to word; str() is the English sentence."""

    def __init__(self, problem: str, message: str, **params: object) -> None:
        super().__init__(message)
        self.problem = problem
        self.params = params


PRESETS: dict[str, Architecture] = {
    "gpt2": Architecture(
        "gpt2", "GPT-2 small (124M)", layers=12, hidden=768, heads=12, kv_heads=12,
        mlp_width=3072, mlp="gelu", norm="layernorm", vocab=50_257, tied=True,
        positions=1024, qkv_bias=True, linear_bias=True, dropout=True, act="gelu_new",
        source="https://huggingface.co/openai-community/gpt2/blob/main/config.json "
               "(n_layer 12, n_embd 768, n_head 12, n_positions 1024, vocab_size 50257, "
               "dropout 0.1, activation_function gelu_new)",
        published_params=124_439_808, family="gpt2"),
    "llama-3.2-1b": Architecture(
        "llama-3.2-1b", "Llama 3.2 1B", layers=16, hidden=2048, heads=32, kv_heads=8,
        mlp_width=8192, mlp="swiglu", norm="rmsnorm", vocab=128_256, tied=True,
        source="https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json "
               "(hidden_size 2048, intermediate_size 8192, 16 layers, 32 heads, 8 KV heads, "
               "vocab 128256, tie_word_embeddings true)",
        published_params=1_235_814_400, family="llama"),
    "llama-3.1-8b": Architecture(
        "llama-3.1-8b", "Llama 3.1 8B", layers=32, hidden=4096, heads=32, kv_heads=8,
        mlp_width=14_336, mlp="swiglu", norm="rmsnorm", vocab=128_256, tied=False,
        source="https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json "
               "(hidden_size 4096, intermediate_size 14336, 32 layers, 32 heads, 8 KV heads, "
               "vocab 128256)",
        published_params=8_030_261_248, family="llama"),
    "llama-3.1-70b": Architecture(
        "llama-3.1-70b", "Llama 3.1 70B", layers=80, hidden=8192, heads=64, kv_heads=8,
        mlp_width=28_672, mlp="swiglu", norm="rmsnorm", vocab=128_256, tied=False,
        source="https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json "
               "(hidden_size 8192, intermediate_size 28672, 80 layers, 64 heads, 8 KV heads, "
               "vocab 128256)",
        published_params=70_553_706_496, family="llama"),
    "qwen2.5-7b": Architecture(
        "qwen2.5-7b", "Qwen2.5 7B", layers=28, hidden=3584, heads=28,
        kv_heads=4, mlp_width=18_944, mlp="swiglu", norm="rmsnorm", vocab=152_064,
        tied=False, qkv_bias=True,
        source="https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json "
               "(hidden_size 3584, intermediate_size 18944, 28 layers, 28 heads, 4 KV heads, "
               "vocab 152064, biases on q/k/v)",
        published_params=7_615_616_512, family="qwen2"),
}
DEFAULT_PRESET = "llama-3.1-8b"


def custom(layers: int, hidden: int, heads: int, kv_heads: int, mlp_width: int, mlp: str,
           norm: str, vocab: int, tied: bool) -> Architecture:
    """A model from its shapes; a LayerNorm model gets GPT-2's biases and dropout, an
    RMSNorm model Llama's none (positions: rotary, no table)."""
    gpt = norm == "layernorm"
    return Architecture("custom", "Custom model", layers, hidden, heads, kv_heads, mlp_width,
                        mlp, norm, vocab, tied, qkv_bias=gpt, linear_bias=gpt,
                        dropout=gpt).check()


def of_config(cfg: ModelConfig) -> Architecture:
    """The architecture of the demo engine's model for a config (demos.model.GPT): its
    layers (cfg.arch), an untied head, learned positions for gpt, dropout if cfg has it."""
    h, a = cfg.hidden, cfg.heads
    if cfg.arch == "llama":
        return custom(cfg.layers, h, a, cfg.kv_heads or default_kv_heads(a), swiglu_width(h),
                      "swiglu", "rmsnorm", cfg.vocab, False)
    return custom(cfg.layers, h, a, a, 4 * h, "gelu", "layernorm", cfg.vocab, False).with_(
        positions=cfg.seq_len, dropout=cfg.dropout > 0)
