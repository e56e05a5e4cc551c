"""The FLOP terms the planner and the engine's theory share (memory.layer owns them)."""

from memory import layer as layer_model
from memory import theory
from memory.architectures import of_config
from memory.config import ModelConfig
from memory.strategies import parse_strategy


def test_head_flops_is_two_b_s_h_vocab():
    arch = of_config(ModelConfig(hidden=64, heads=4, vocab=1000, layers=3))
    assert layer_model.head_flops(arch, 2, 16) == 2 * 2 * 16 * 64 * 1000


def test_theory_and_planner_count_the_same_forward():
    for cfg in (ModelConfig(layers=3, hidden=64, heads=4, seq_len=32, batch=2, vocab=500),
                ModelConfig(arch="llama", layers=2, hidden=64, heads=4, seq_len=16, vocab=700)):
        arch, b, s = of_config(cfg), cfg.batch, cfg.seq_len
        flops = theory.step_flops(cfg)
        assert flops["head_forward"] == layer_model.head_flops(arch, b, s)
        assert flops["forward"] == layer_model.forward_flops(arch, b, s)
        assert flops["forward"] == (cfg.layers * layer_model.layer_flops(arch, b, s)
                                    + 2 * b * s * cfg.hidden * cfg.vocab)


def test_gpt_selective_recompute_covers_the_engine_matmuls():
    # save-attention reruns QKV, the output projection and the MLP's first matmul: 8h² of
    # the gpt block's 12h² (memory.strategies), and never the attention products
    cfg = ModelConfig(layers=2, hidden=64, heads=4, seq_len=32, batch=2, vocab=500)
    arch, b, s = of_config(cfg), cfg.batch, cfg.seq_len
    block = layer_model.layer_flops(arch, b, s)
    recompute = theory.step_flops(cfg, parse_strategy("selective:save-attention"))["recompute"]
    assert recompute == cfg.layers * (2 * b * s * 8 * cfg.hidden ** 2)
    assert 0 < recompute < cfg.layers * block
