"""torch's FLOP counter against the theory: every strategy of the engine, early stop,
reentrant checkpoint and the attention kernels' formulas (memory.theory.counted_flops)."""

import pytest
import torch
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from demos.installed_torch import counter_counts_attention
from demos.measure import Step
from demos.model import build_model, make_batch
from memory import strategies, theory
from memory.config import ModelConfig
from memory.segments import Segment
from memory.strategies import parse_strategy

GPT = ModelConfig(layers=4, hidden=64, heads=4, seq_len=32, batch=2, vocab=500)
LLAMA = ModelConfig(arch="llama", layers=3, hidden=64, heads=4, seq_len=16, vocab=700)
aten = torch.ops.aten
ON_CPU = counter_counts_attention("cpu")  # torch 2.15's counter counts the CPU kernel


def rerun_attention(cfg: ModelConfig) -> int:
    """The attention forward the counter counts when a layer reruns: none where it has no
    formula for the CPU kernel (torch 2.13), the kernel formula's 4·b·a·s²·d (2.15)."""
    d = cfg.hidden // cfg.heads
    unit = cfg.batch * cfg.heads * cfg.seq_len ** 2 * d
    return theory.COUNTER_ATTENTION_FORWARD * unit if ON_CPU else 0
# the CPU's fused attention kernel with torch's own attention formulas (those of the CUDA
# kernels), so that a CPU run checks the prediction for a GPU's count too
CPU_ATTENTION = {
    aten._scaled_dot_product_flash_attention_for_cpu:
        lambda q, k, v, *args, out_shape=None, **kwargs: sdpa_flop_count(q, k, v),
    aten._scaled_dot_product_flash_attention_for_cpu_backward:
        lambda g, q, k, v, *args, out_shape=None, **kwargs: sdpa_backward_flop_count(g, q, k, v),
}


def engine_strategies(cfg: ModelConfig) -> list[str]:
    return ["none", "every-layer", "every-k:2", "sqrt", "budget:dp:40%", "budget:greedy:40%",
            *(f"selective:{p}" for p in strategies.SELECTIVE_POLICIES)]


def _count(cfg, model, idx, tgt, plan, mapping=None) -> int:
    model.zero_grad(set_to_none=True)
    with FlopCounterMode(display=False, custom_mapping=mapping) as counter:
        model(idx, tgt, plan).backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("cfg", [GPT, LLAMA], ids=["gpt", "llama"])
def test_the_counter_equals_the_prediction_for_every_strategy(cfg):
    model = build_model(cfg)
    idx, tgt = make_batch(cfg)
    step = Step(cfg, model, idx, tgt, torch.device("cpu"))
    for text in engine_strategies(cfg):
        spec = strategies.parse_strategy(text)
        plan = theory.plan_for(cfg, spec)
        counted = step.counted(spec, plan)
        predicted = theory.counted_flops(cfg, spec, attention_counted=ON_CPU)["total"]
        assert counted == pytest.approx(predicted, rel=0.01), text
        # with the attention kernel counted as on a GPU
        counted = _count(cfg, model, idx, tgt, plan, CPU_ATTENTION)
        predicted = theory.counted_flops(cfg, spec, "cuda")["total"]
        assert counted == pytest.approx(predicted, rel=0.01), text


def test_early_stop_skips_the_mlps_last_linear():
    """Non-reentrant checkpoint of every gpt layer reruns QKV, the attention projection and
    the MLP's first linear (16 of a layer's 24·b·s·h² linear FLOPs), never its last."""
    cfg = GPT
    b, s, h, n = cfg.batch, cfg.seq_len, cfg.hidden, cfg.layers
    model = build_model(cfg)
    idx, tgt = make_batch(cfg)
    none = _count(cfg, model, idx, tgt, theory.plan_for(cfg, parse_strategy("none")))
    every = _count(cfg, model, idx, tgt, theory.plan_for(cfg, parse_strategy("every-layer")))
    assert every - none == n * (16 * b * s * h * h + rerun_attention(cfg))
    assert theory.step_flops(cfg, parse_strategy("every-layer"))["recompute"] == pytest.approx(
        n * (16 * b * s * h * h + theory.attention_flops(theory.of_config(cfg), b, s)))
    # early stop off (torch.utils.checkpoint.set_checkpoint_early_stop): the whole layer
    with set_checkpoint_early_stop(False):
        whole = _count(cfg, model, idx, tgt, theory.plan_for(cfg, parse_strategy("every-layer")))
    assert whole - none == n * (24 * b * s * h * h + rerun_attention(cfg))
    assert whole == pytest.approx(theory.counted_flops(
        cfg, parse_strategy("every-layer"), reentrant=True,
        attention_counted=ON_CPU)["total"], rel=0.01)


def test_reentrant_checkpoint_reruns_the_whole_layer():
    cfg = GPT
    model = build_model(cfg)
    idx, tgt = make_batch(cfg)
    none = _count(cfg, model, idx, tgt, [Segment(0, cfg.layers)])
    x0 = model.tok(idx) + model.pos.weight[: cfg.seq_len]

    def step() -> None:
        x = x0
        for block in model.blocks:
            x = checkpoint(block, x, use_reentrant=True)
        loss = torch.nn.functional.cross_entropy(
            model.head(model.ln_f(x)).view(-1, cfg.vocab), tgt.view(-1))
        loss.backward(retain_graph=True)

    with FlopCounterMode(display=False) as counter:
        step()
    predicted = theory.counted_flops(cfg, parse_strategy("every-layer"), reentrant=True,
                                     attention_counted=ON_CPU)
    assert counter.get_total_flops() - none == pytest.approx(predicted["recompute"], rel=0.01)
    assert predicted["recompute"] > theory.counted_flops(cfg,
                                                         parse_strategy("every-layer"))["recompute"]


def test_the_default_demo_model_counts_sixteen_point_seven_percent():
    """The default demo model (L8 h256 s256 b4 V8192), as counted by torch on a CPU: the
    theory alone (no run): 51.54 GFLOP without checkpointing, 60.13 with every layer."""
    cfg = ModelConfig(layers=8, hidden=256, heads=4, seq_len=256, batch=4, vocab=8192)
    none = theory.counted_flops(cfg, parse_strategy("none"))["total"]
    every = theory.counted_flops(cfg, parse_strategy("every-layer"))
    assert none / 1e9 == pytest.approx(51.54, abs=0.01)
    assert every["total"] / 1e9 == pytest.approx(60.13, abs=0.01)
    assert every["overhead"] == pytest.approx(1.167, abs=0.001)


def _hf_step_flops(model, ids) -> tuple[int, int]:  # noqa: ANN001 - a transformers model
    """torch's FLOP count of one training step of a Hugging Face causal LM, plain and then
    with its own checkpointing on every layer."""
    import warnings

    def count() -> int:
        model.zero_grad(set_to_none=True)
        with FlopCounterMode(display=False) as counter:
            model(input_ids=ids, labels=ids).loss.backward()
        return counter.get_total_flops()

    none = count()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.activation_checkpointing_enable()
    return none, count()


def test_the_planner_counts_what_torch_counts_for_a_hugging_face_llama():
    """A tiny Llama from transformers (its own decoder layers, SDPA, full fine-tune, fp32):
    the planner's step FLOPs and its every-layer recomputation (early stop: no down
    projection rerun) equal torch's counter around one step."""

    from transformers import LlamaConfig, LlamaForCausalLM

    from memory import footprint, layer
    from memory.architectures import custom

    config = LlamaConfig(hidden_size=64, intermediate_size=160, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=300,
                         max_position_embeddings=64, tie_word_embeddings=False,
                         attn_implementation="sdpa", use_cache=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).train()
    ids = torch.randint(0, 300, (2, 16))

    none, every = _hf_step_flops(model, ids)
    arch = custom(3, 64, 4, 2, 160, "swiglu", "rmsnorm", 300, False)
    p = footprint.PlannerInputs(arch, seq=16, batch=2, precision="fp32", tuning="full",
                                device="cpu")
    # the planner's step less its (causal) attention, plus what the installed counter counts
    # for the fused kernel: nothing where it has no formula for it on the CPU (torch 2.13),
    # its full-square formula where it has one (torch 2.15)
    attention = layer.attention_flops(arch, 2, 16)
    unit = 2 * 4 * 16 * 16 * 16 if counter_counts_attention("cpu") else 0  # b·a·s²·d
    forward = theory.COUNTER_ATTENTION_FORWARD * unit
    backward = theory.COUNTER_ATTENTION_BACKWARD * unit
    assert none == pytest.approx(
        footprint.step_flops(p) - 3 * (3 * attention - forward - backward), rel=0.01)
    recompute = footprint.activations(p, "every-layer").recompute_flops
    assert every - none == pytest.approx(recompute - 3 * (attention - forward), rel=0.01)
    assert recompute < 3 * layer.layer_flops(arch, 2, 16)  # not a whole forward


def test_a_dropout_after_the_mlp_makes_its_last_linear_rerun():
    """Early stop as torch applies it: recomputation ends after the last op that saves
    something for backward. A residual dropout after the MLP saves its mask after the
    MLP's last linear has run, so that linear reruns: with dropout the counter counts a
    whole layer more per checkpointed segment, and the prediction follows it for every
    strategy (checkpointed segments and a selective policy that does not cache it)."""
    cfg = GPT.replace(dropout=0.1)
    b, s, h, n = cfg.batch, cfg.seq_len, cfg.hidden, cfg.layers
    model = build_model(cfg)
    idx, tgt = make_batch(cfg)
    none = _count(cfg, model, idx, tgt, theory.plan_for(cfg, parse_strategy("none")))
    every = _count(cfg, model, idx, tgt, theory.plan_for(cfg, parse_strategy("every-layer")))
    assert every - none == n * (24 * b * s * h * h + rerun_attention(cfg))
    assert theory.early_stop_skips(cfg) == 0
    assert theory.early_stop_skips(GPT) == 8 * b * s * h * h
    for text in engine_strategies(cfg):
        spec = parse_strategy(text)
        counted = _count(cfg, model, idx, tgt, theory.plan_for(cfg, spec))
        predicted = theory.counted_flops(cfg, spec, attention_counted=ON_CPU)["total"]
        assert counted == pytest.approx(predicted, rel=1e-9), text


def test_the_planner_reruns_gpt2s_last_linear_because_of_its_dropout():
    """memory.layer.rerun_flops for a segment's last layer: the whole layer for GPT-2
    (resid_pdrop 0.1 after c_proj), all but the down projection for Llama."""
    from memory import layer
    from memory.architectures import PRESETS

    gpt2 = PRESETS["gpt2"]
    assert gpt2.dropout
    assert layer.rerun_flops(gpt2, 2, 64) == layer.layer_flops(gpt2, 2, 64)
    plain = gpt2.with_(dropout=False)
    assert layer.rerun_flops(plain, 2, 64) == (
        layer.layer_flops(plain, 2, 64) - layer.linear_flops(plain, 2, 64, "proj"))


@pytest.mark.parametrize("dropout", [0.1, 0.0])
def test_the_planner_counts_what_torch_counts_for_a_hugging_face_gpt2(dropout):
    """A tiny GPT-2 from transformers (SDPA, full fine-tune, fp32) with every layer
    checkpointed: at GPT-2's dropout 0.1 the rebuild reruns each whole layer (the dropout
    after c_proj saves its mask after that matmul), at 0 it skips c_proj, and the planner's
    recomputation (memory.layer.rerun_flops) says so."""

    from transformers import GPT2Config, GPT2LMHeadModel

    from memory import footprint, layer
    from memory.architectures import custom

    config = GPT2Config(n_embd=64, n_layer=3, n_head=4, vocab_size=300, n_positions=64,
                        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=0.0,
                        attn_implementation="sdpa", use_cache=False)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).train()
    ids = torch.randint(0, 300, (2, 16))

    none, every = _hf_step_flops(model, ids)
    arch = custom(3, 64, 4, 4, 256, "gelu", "layernorm", 300, True).with_(
        dropout=dropout > 0, positions=64)
    p = footprint.PlannerInputs(arch, seq=16, batch=2, precision="fp32", tuning="full",
                                device="cpu")
    recompute = footprint.activations(p, "every-layer").recompute_flops
    unit = 2 * 4 * 16 * 16 * 16  # b·a·s²·d: the counter's attention formula, when it has one
    attention = theory.COUNTER_ATTENTION_FORWARD * unit if ON_CPU else 0
    assert every - none == pytest.approx(
        recompute - 3 * layer.attention_flops(arch, 2, 16) + 3 * attention, rel=0.01)
    whole = 3 * layer.layer_flops(arch, 2, 16)
    assert (recompute == pytest.approx(whole)) is (dropout > 0)
