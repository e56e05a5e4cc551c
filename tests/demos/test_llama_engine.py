"""The Llama-style block in the demo engine (ModelConfig.arch="llama"): every strategy
gives the gradients of none, and the theory (memory.layer's per-layer formula, through
memory.theory) predicts the bytes held for backward to the byte on the CPU."""

from __future__ import annotations

import pytest

from demos.measure import compare
from demos.model import build_model
from memory import theory
from memory.config import ConfigError, ModelConfig
from memory.strategies import parse_strategy

ALL = ["none", "every-layer", "every-k:2", "sqrt", "selective:save-matmuls",
       "selective:save-attention", "selective:save-all-but-attention", "budget:dp:1MiB"]
SHAPES = [
    ModelConfig(layers=3, hidden=64, heads=4, seq_len=32, batch=2, vocab=128, arch="llama"),
    ModelConfig(layers=2, hidden=96, heads=6, seq_len=24, batch=3, vocab=200, arch="llama",
                kv_heads=2),
    ModelConfig(layers=3, hidden=64, heads=4, seq_len=32, batch=2, vocab=128, arch="llama",
                dtype="bfloat16"),
    ModelConfig(layers=4, hidden=64, heads=4, seq_len=64, batch=2, vocab=2048, arch="llama",
                dropout=0.1),
]


@pytest.mark.parametrize("cfg", SHAPES, ids=lambda c: f"L{c.layers}h{c.hidden}kv{c.kv_heads}"
                                                      f"{c.dtype[0]}{c.dropout}")
def test_llama_held_bytes_equal_the_prediction_and_gradients_equal_none(cfg):
    comp = compare(cfg, [parse_strategy(s) for s in ALL], device="cpu", time_steps=False)
    none = comp.result("none")
    for r in comp.results:
        assert r.fits, r.error
        assert r.activation_bytes == r.predicted_activation_bytes, r.strategy
        assert r.loss == pytest.approx(none.loss, abs=1e-6), r.strategy
        assert r.max_grad_diff is not None and r.max_grad_diff <= 1e-6, r.strategy
        if cfg.dtype == "float32":
            assert r.peak_bytes == r.predicted_peak_bytes, r.strategy
        else:  # RMSNorm's fp32 backward in the final norm (see predicted_peak_bytes)
            assert r.peak_bytes == pytest.approx(r.predicted_peak_bytes, rel=0.03), r.strategy


def test_llama_model_has_rotary_positions_rmsnorm_and_the_predicted_parameters():
    cfg = ModelConfig(layers=2, hidden=64, heads=4, seq_len=16, batch=1, vocab=96,
                      arch="llama")
    model = build_model(cfg)
    assert model.pos is None and type(model.ln_f).__name__ == "RMSNorm"
    assert sum(p.numel() for p in model.parameters()) == theory.parameter_count(cfg)
    assert model.blocks[0].kv_heads == 2  # grouped-query attention by default
    gpt = cfg.replace(arch="gpt")
    assert sum(p.numel() for p in build_model(gpt).parameters()) == theory.parameter_count(gpt)


def test_llama_layer_keeps_more_than_gpt_and_the_policies_order_the_same_way():
    gpt = ModelConfig(layers=4, hidden=64, heads=4, seq_len=64, batch=2, vocab=64)
    llama = gpt.replace(arch="llama")
    assert theory.predicted_block_bytes(llama) > theory.predicted_block_bytes(gpt)
    pred = {s: theory.predicted_activation_bytes(llama, parse_strategy(s)) for s in ALL[:7]}
    assert pred["every-layer"] < pred["selective:save-attention"] < pred[
        "selective:save-matmuls"] < pred["none"] < pred["selective:save-all-but-attention"]
    # save-attention reruns q, k, v, o, gate and up: more than save-matmuls' attention only
    attention = theory.step_flops(llama, parse_strategy("selective:save-attention"))
    matmuls = theory.step_flops(llama, parse_strategy("selective:save-matmuls"))
    assert attention["recompute"] > matmuls["recompute"]


def test_arch_and_kv_heads_are_checked_and_part_of_the_config_key():
    with pytest.raises(ConfigError, match="arch"):
        ModelConfig(arch="mamba").validated()
    with pytest.raises(ConfigError, match="kv_heads=3"):
        ModelConfig(heads=4, kv_heads=3, arch="llama").validated()
    assert ModelConfig(arch="llama") != ModelConfig()
    assert ModelConfig(arch="llama").as_dict()["arch"] == "llama"
