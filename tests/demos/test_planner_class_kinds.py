"""The measured class beyond 16-bit weights and uniform layers (planner.class_memory): QLoRA
measured with bitsandbytes' 4-bit layers under fake tensors, held to the byte against real
NF4 steps (the model saved and loaded back with transformers' quantizer, as the planner's
code loads it); and models that mix dense and MoE decoder layers (DeepSeek's
first_k_dense_replace), typed layer by layer by kind (their fits against real CPU steps:
test_planner_classes, whose families include DeepSeek-V2-Lite and V3); then the CLI on the
full-size config.json files."""

from __future__ import annotations

import warnings

import pytest
import torch

from model_classes import causal_lm as CL
from model_classes import causal_lm_config as CC
from model_classes import causal_lm_step as CS
from model_classes import variant as V
from planner import class_fit as CF
from tests.demos.class_fixtures import load, tiny
from tests.demos.test_planner_classes import (  # noqa: F401  (_cache: an autouse fixture)
    CLI_GROUP,
    POINTS,
    _cache,
    _plan,
    _predicted,
    _real_per_slot,
)

torch.set_num_threads(1)
warnings.filterwarnings("ignore")
pytest.importorskip("bitsandbytes")

# (family, variant): QLoRA in fp32 and under bf16 autocast (the Trainer's bf16=True), LoRA
# on every linear and on the attention, each kernel the class supports; a family the
# course's formula covers (Llama), two it does not (Qwen3's q/k norms, Gemma 2's
# post-norms and soft-caps), GPT-2's Conv1D and Qwen3-MoE's experts (3-D parameters,
# which transformers' quantizer leaves unquantized and peft casts to fp32)
QLORA = [("llama-3.1-8b", V.Variant("fp32", "sdpa", 8, "all-linear", quantized=True)),
         ("llama-3.1-8b", V.Variant("mixed", "eager", 8, "attention", quantized=True)),
         ("qwen3-8b", V.Variant("mixed", "sdpa", 16, "all-linear", quantized=True)),
         ("gemma-2-9b", V.Variant("mixed", "eager", 8, "all-linear", quantized=True)),
         ("gpt2", V.Variant("fp32", "sdpa", 8, "all-linear", quantized=True)),
         ("qwen3-235b-a22b", V.Variant("mixed", "sdpa", 16, "all-linear", quantized=True))]


def _real_equals_fit(name: str, variant: V.Variant) -> None:
    conf = CC.hf_config(tiny(load(name)))
    fit = CF.fit_variant(conf, variant, check=True)
    torch.manual_seed(0)
    model = CL.build(conf, variant, layers=conf.num_hidden_layers)
    for b, s in POINTS:
        real = _real_per_slot(model, conf, b, s, variant.precision)
        assert real == _predicted(fit, CC.layer_types(conf), b, s), (name, variant, b, s)


@pytest.mark.heavy
@pytest.mark.parametrize("name,variant", QLORA, ids=[f"{n}-{v.precision}-{v.kernel}"
                                                     for n, v in QLORA])
def test_qlora_fit_equals_a_real_4bit_step(name: str, variant: V.Variant) -> None:
    """Per decoder layer and outside them, to the byte: real bitsandbytes NF4 layers
    (Linear4bit, MatMul4Bit, PEFT's 4-bit LoRA layer) against the fake-tensor fit."""
    _real_equals_fit(name, variant)


def test_the_real_build_has_4bit_layers_and_fp32_norms() -> None:
    """What the test above compares against is QLoRA as the planner's code loads it."""
    import bitsandbytes as bnb

    conf = CC.hf_config(tiny(load("llama-3.1-8b"), layers=2))
    model = CL.build(conf, V.Variant("mixed", "sdpa", 8, quantized=True), layers=2)
    layer = CS.decoder_layers(model)[1]
    assert isinstance(layer.self_attn.q_proj.base_layer, bnb.nn.Linear4bit)
    assert layer.input_layernorm.weight.dtype == torch.float32  # prepare_model_for_kbit_training


def test_under_qlora_a_layer_input_is_fp32() -> None:
    """prepare_model_for_kbit_training makes the embeddings and norms fp32, so the residual
    stream is fp32 and a QLoRA layer keeps its input itself (4 bytes a number: its first
    norm computes in fp32 on it); under 16-bit LoRA over the same bf16 base and autocast
    the input is bf16 and the norm keeps an fp32 copy of it instead, not the input."""
    conf = CC.hf_config(tiny(load("qwen3-8b")))
    b, s = 2, 64
    for quantized, size in ((True, 4), (False, 0)):
        fit = CF.fit_variant(conf, V.Variant("mixed", "sdpa", 8, quantized=quantized))
        kept = [h for h in fit.held("full_attention", b, s) if h.kind == "input"]
        assert sum(h.bytes for h in kept) == b * s * conf.hidden_size * size, quantized


# ---------------------------------------------------------------- dense and MoE layers


def test_deepseek_layers_are_typed_by_their_mlp() -> None:
    v3 = CC.hf_config(load("deepseek-v3"))
    types = CC.layer_types(v3)
    assert types[:3] == ("full_attention" + CC.DENSE_MLP,) * 3
    assert set(types[3:]) == {"full_attention"} and len(types) == 61
    lite = CC.layer_types(CC.hf_config(load("deepseek-v2-lite")))
    # its one dense layer is layer 0: the measured model repeats it at layer 1
    assert CC.reduced_layers(lite) == ("full_attention" + CC.DENSE_MLP,) * 2 + (
        "full_attention",)
    qwen = CC.hf_config({**load("qwen3-235b-a22b"), "mlp_only_layers": [0, 5],
                        "decoder_sparse_step": 2})
    dense = {i for i, t in enumerate(CC.layer_types(qwen)) if t.endswith(CC.DENSE_MLP)}
    assert dense == {0, 5} | {i for i in range(qwen.num_hidden_layers) if (i + 1) % 2}
    assert CC.layer_types(CC.hf_config(load("qwen3-235b-a22b"))) == ("full_attention",) * 94


@CLI_GROUP
@pytest.mark.heavy
def test_deepseek_v2_lite_is_planned_by_layer_kind(capsys) -> None:
    data = _plan(capsys, "deepseek-v2-lite", "--seq", "2048")
    cls = data["class"]
    assert cls["layer_types"] == {"full_attention" + CC.DENSE_MLP: 1, "full_attention": 26}
    sizes = cls["layer_type_bytes"]
    assert sizes["full_attention"] != sizes["full_attention" + CC.DENSE_MLP]
    assert cls["experts"]["count"] == 64 and cls["experts"]["top_k"] == 6
    # 15.7B parameters (the model card's), the experts counted in the 26 MoE layers only
    assert 15.5e9 < data["model"]["params"] < 16e9


@CLI_GROUP
def test_a_pasted_configs_qlora_plan_measures_the_4bit_class(capsys) -> None:
    cfg = load("qwen3-8b")
    lora = _plan(capsys, "qwen3-8b", "--tuning", "lora")
    qlora = _plan(capsys, "qwen3-8b", "--tuning", "qlora", "--precision", "bf16")
    assert qlora["class"] is not None and qlora["class"]["family"] == "qwen3"
    assert qlora["layer_activation_bytes"] != lora["layer_activation_bytes"]
    # a checkpoint is a layer's input: fp32 under QLoRA, bf16 under 16-bit LoRA
    assert qlora["checkpoint_bytes"] == 2 * lora["checkpoint_bytes"] == 4096 * 4096 * 4
    # peft leaves the frozen output head in fp32; autocast's bf16 cast of it is kept for
    # the gradient of the head's input: V·h·2 bytes beyond the course's loss
    assert qlora["class"]["logit_extra_bytes"] == cfg["vocab_size"] * cfg["hidden_size"] * 2
    assert lora["class"]["logit_extra_bytes"] == 0
    assert qlora["class"]["logit_extra_causes"] == ["qlora-head"]
    assert lora["class"]["logit_extra_causes"] == []
