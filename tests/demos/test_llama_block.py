"""The planner's per-layer activation formula against the bytes a real block keeps for
backward: the Llama-style block (demos.llama) and the engine's GPT block
(demos.model), fused and math attention, fp32 and bf16, on the CPU, to the byte.

What a block keeps is read with saved_tensors_hooks, counting each storage once and
leaving out the parameters and constant buffers (rotary tables)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.checkpoint import checkpoint

from demos.gpt import GPTBlock
from demos.llama import LlamaBlock, apply_rotary, rotary_tables
from memory.architectures import custom, swiglu_width
from memory.config import ModelConfig
from memory.layer import layer_bytes, layer_tensors

DTYPES = {"float32": (torch.float32, 4), "bfloat16": (torch.bfloat16, 2)}


def saved_bytes(block: torch.nn.Module, x: torch.Tensor) -> int:
    constant = {t.untyped_storage().data_ptr()
                for t in [*block.parameters(), *block.buffers()]}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in constant:
            storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        block(x)
    return sum(storages.values())


def _run(block: torch.nn.Module, cfg: ModelConfig, fused: bool, device: str = "cpu") -> int:
    dtype, _ = DTYPES[cfg.dtype]
    torch.manual_seed(0)
    block = block.to(device=device, dtype=dtype)
    x = torch.randn(cfg.batch, cfg.seq_len, cfg.hidden, dtype=dtype, device=device,
                    requires_grad=True)
    if fused:
        return saved_bytes(block, x)
    with sdpa_kernel(SDPBackend.MATH):
        return saved_bytes(block, x)


SHAPES = [  # (batch, seq, hidden, heads, kv heads, MLP width)
    (2, 32, 64, 4, 2, 96),
    (1, 48, 96, 6, 3, 256),
    (3, 16, 64, 8, 8, 160),  # multi-head (no grouping)
    (2, 40, 128, 4, 1, swiglu_width(128)),  # multi-query
]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "math"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "b{}-s{}-h{}-a{}-kv{}-m{}".format(*s))
def test_llama_block_keeps_what_the_planner_says(shape, fused, dtype) -> None:
    b, s, h, a, kv, m = shape
    cfg = ModelConfig(layers=1, hidden=h, heads=a, seq_len=s, batch=b, vocab=256, dtype=dtype)
    measured = _run(LlamaBlock(cfg, 0, kv_heads=kv, mlp_width=m), cfg, fused)
    arch = custom(1, h, a, kv, m, "swiglu", "rmsnorm", 256, True)
    predicted = layer_bytes(layer_tensors(arch, b, s, DTYPES[dtype][1], fused=fused,
                                          device="cpu"))
    assert measured == predicted


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "math"])
@pytest.mark.parametrize("shape", [(2, 32, 64, 4), (1, 64, 128, 2), (3, 24, 96, 6)],
                         ids=lambda s: "b{}-s{}-h{}-a{}".format(*s))
def test_engine_gpt_block_keeps_what_the_planner_says(shape, fused, dtype) -> None:
    b, s, h, a = shape
    cfg = ModelConfig(layers=1, hidden=h, heads=a, seq_len=s, batch=b, vocab=256, dtype=dtype)
    measured = _run(GPTBlock(cfg, 0), cfg, fused)
    arch = custom(1, h, a, a, 4 * h, "gelu", "layernorm", 256, True).with_(dropout=False)
    predicted = layer_bytes(layer_tensors(arch, b, s, DTYPES[dtype][1], fused=fused,
                                          device="cpu"))
    assert measured == predicted
    if fused and dtype == "float32":  # the figure the engine measures today
        assert measured == 64 * s * b * h + 4 * (4 * b * s + a * b * s)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_engine_gpt_block_with_dropout_keeps_its_masks(dtype) -> None:
    """Dropout after attention and after the MLP: two masks (the input's dtype on the CPU)."""
    cfg = ModelConfig(layers=1, hidden=64, heads=4, seq_len=32, batch=2, vocab=256,
                      dropout=0.1, dtype=dtype)
    measured = _run(GPTBlock(cfg, 0), cfg, fused=True)
    arch = custom(1, 64, 4, 4, 256, "gelu", "layernorm", 256, True)
    assert arch.dropout
    tensors = layer_tensors(arch, 2, 32, DTYPES[dtype][1], device="cpu")
    assert measured == layer_bytes(tensors)
    masks = sum(t.bytes for t in tensors if t.kind == "dropout")
    assert masks == 2 * (2 * 32 * 64) * DTYPES[dtype][1]


def test_grouped_query_attention_equals_repeated_heads() -> None:
    """enable_gqa gives the same result as repeating each key/value head."""
    torch.manual_seed(1)
    q = torch.randn(2, 8, 16, 8)
    k, v = torch.randn(2, 2, 16, 8), torch.randn(2, 2, 16, 8)
    grouped = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    repeated = F.scaled_dot_product_attention(q, k.repeat_interleave(4, 1),
                                              v.repeat_interleave(4, 1), is_causal=True)
    torch.testing.assert_close(grouped, repeated)


def test_rotary_rotates_pairs_by_position() -> None:
    """Position 0 is unchanged; each (i, i + d/2) pair keeps its length; relative
    positions decide the dot product of q and k."""
    cos, sin = rotary_tables(8, 4, theta=10.0)
    x = torch.randn(1, 1, 8, 4)
    y = apply_rotary(x, cos, sin)
    torch.testing.assert_close(y[..., 0, :], x[..., 0, :])
    torch.testing.assert_close(y[..., :2] ** 2 + y[..., 2:] ** 2, x[..., :2] ** 2 + x[..., 2:] ** 2)
    q = torch.randn(4)
    qs = apply_rotary(q.expand(1, 1, 8, 4), cos, sin)[0, 0]
    ks = apply_rotary(q.expand(1, 1, 8, 4), cos, sin)[0, 0]
    torch.testing.assert_close(qs[3] @ ks[1], qs[5] @ ks[3])


def test_llama_block_gradients_equal_under_checkpointing() -> None:
    cfg = ModelConfig(layers=1, hidden=64, heads=4, seq_len=16, batch=2, vocab=256)
    torch.manual_seed(2)
    block = LlamaBlock(cfg, 0)
    assert (block.kv_heads, block.down.in_features) == (2, swiglu_width(64))
    x = torch.randn(2, 16, 64, requires_grad=True)
    block(x).square().mean().backward()
    plain = [p.grad.clone() for p in block.parameters()] + [x.grad.clone()]
    block.zero_grad()
    x.grad = None
    checkpoint(block, x, use_reentrant=False).square().mean().backward()
    again = [p.grad for p in block.parameters()] + [x.grad]
    for a, b in zip(plain, again, strict=True):
        assert torch.equal(a, b)


def test_llama_block_refuses_heads_not_divisible_by_kv_heads() -> None:
    cfg = ModelConfig(layers=1, hidden=64, heads=4, seq_len=16, batch=1, vocab=256)
    with pytest.raises(ValueError, match="kv_heads=3"):
        LlamaBlock(cfg, 0, kv_heads=3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "math"])
@pytest.mark.parametrize("kind", ["gpt", "llama"])
def test_on_cuda_blocks_keep_what_the_planner_says(kind, fused, dtype) -> None:
    """The planner's GPU rules (1-byte masks, fp32 norm statistics, the kernels' log-sum-exp)
    against a real GPU."""
    b, s, h, a, kv, m = 2, 64, 128, 4, 2, 352
    cfg = ModelConfig(layers=1, hidden=h, heads=a, seq_len=s, batch=b, vocab=256, dtype=dtype,
                      dropout=0.1 if kind == "gpt" else 0.0)
    if kind == "gpt":
        block, arch = GPTBlock(cfg, 0), custom(1, h, a, a, 4 * h, "gelu", "layernorm", 256, True)
        if not fused:  # the engine's block has no dropout on the attention probabilities
            pytest.skip("the GPT block drops out after attention, not inside it")
    else:
        block = LlamaBlock(cfg, 0, kv_heads=kv, mlp_width=m)
        arch = custom(1, h, a, kv, m, "swiglu", "rmsnorm", 256, True)
    measured = _run(block, cfg, fused, device="cuda")
    predicted = layer_bytes(layer_tensors(arch, b, s, DTYPES[dtype][1], fused=fused,
                                          device="cuda"))
    assert measured == predicted
