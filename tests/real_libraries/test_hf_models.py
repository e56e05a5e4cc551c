"""The planner against the libraries practitioners run: tiny random-init models of every
preset family built from the real transformers classes (GPT-2, Llama 3.x, Qwen2.5), with
checkpointing switched on through transformers' own switch and LoRA through PEFT, one
training step on the CPU. The bytes each decoder layer keeps for backward (saved-tensor
hooks, each storage once, parameters apart) must be the planner's, to the byte, and their
sum the planner's activations for the strategy."""

from __future__ import annotations

import importlib.util
import inspect

import pytest

from demos.real_models import (
    PLANNER_STRATEGIES,
    Setup,
    measure,
    planner_inputs,
    predicted_layers,
    uses_autocast,
)
from memory import footprint as F
from memory import layer as L
from memory.precisions import PRECISIONS
from model_classes.causal_lm import apply_checkpointing
from model_classes.quantized import QLORA_SKIP
from model_classes.tiny import build_model, tiny_architecture

FAMILIES = {"gpt2": "gpt2", "llama": "llama-3.1-8b", "qwen2": "qwen2.5-7b"}



def check(setup: Setup) -> None:
    m = measure(setup)
    assert m.per_layer == predicted_layers(setup, m.checkpointed)
    # autocast's 16-bit weight copies: what mixed precision's 6 bytes per parameter count
    # beyond the fp32 weights, for the trainable weights of each layer that runs plainly
    copy = PRECISIONS["mixed"].weight_bytes - 4 if uses_autocast(setup) else 0
    p = planner_inputs(setup)
    per_layer = F.adapter_params(p) // setup.arch.layers if setup.lora_rank else sum(
        i * o for i, o in setup.arch.linears().values())
    for i, copies in enumerate(m.weight_copies):
        if i in m.checkpointed:
            assert copies == 0
        elif i > 0 or m.checkpointed or not setup.lora_rank:
            assert copies == copy * per_layer
    strategy = PLANNER_STRATEGIES[setup.strategy]
    if strategy is not None:
        assert m.layers_total == F.activations(planner_inputs(setup), strategy).kept


@pytest.mark.parametrize("lora", [0, 16], ids=["full", "lora16"])
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("dtype", ["fp32", "bf16", "mixed"])
@pytest.mark.parametrize("strategy", list(PLANNER_STRATEGIES))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_layers_keep_what_the_planner_says(family, strategy, dtype, attention, lora) -> None:
    setup = Setup(tiny_architecture(FAMILIES[family]), dtype=dtype, attention=attention,
                  strategy=strategy, n=2, k=2, lora_rank=lora)
    check(setup)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_lora_on_attention_only_and_a_padding_mask(family, attention) -> None:
    """LoRA on q, k, v, o only (GPT-2: c_attn and the attention's c_proj), batches with a
    padding mask (with SDPA transformers then repeats k and v to every head)."""
    for dtype in ("fp32", "bf16", "mixed"):
        check(Setup(tiny_architecture(FAMILIES[family]), dtype=dtype, attention=attention,
                    lora_rank=8, lora_targets="attention", padding=True))
        check(Setup(tiny_architecture(FAMILIES[family]), dtype=dtype, attention=attention,
                    padding=True))


def test_the_terms_the_libraries_add_are_in_the_formula() -> None:
    """Each Hugging Face term changes the prediction in the direction the library does."""
    gpt, llama = tiny_architecture("gpt2"), tiny_architecture("llama-3.1-8b")
    size = L.layer_bytes

    def held(arch, **kw):
        return size(L.layer_tensors(arch, 2, 32, kw.pop("e", 2), device="cpu", **kw))
    # gelu_new keeps three more MLP-wide tensors than a fused GELU
    assert held(gpt) - held(gpt.with_(act="")) == 3 * 2 * 32 * gpt.mlp_width * 2
    # eager attention in 16-bit keeps the probabilities in fp32 and in 16-bit
    probs = llama.heads * 32 * 32 * 2  # numbers in the s×s probabilities
    assert held(llama, attention="eager") - held(llama) > probs * (4 + 2)
    # a padding mask with SDPA repeats k and v (2 KV heads of 8 here)
    assert held(llama, padding=True) > held(llama)
    # LoRA: frozen linears keep nothing of their own; fp32 adapter inputs in 16-bit
    targets = F.LORA_TARGETS["all-linear"]
    lora16 = held(llama, lora_rank=16, lora_targets=targets)
    lora32 = held(llama, lora_rank=16, lora_targets=targets, e=4)
    assert lora16 > held(llama) and lora32 < held(llama, e=4)
    # autocast over fp32 weights: an fp32 residual stream and norms, 16-bit casts per linear
    assert held(llama, autocast=True) > held(llama)
    # GPT-2's eager softmax after the fp32 causal mask: fp32 probabilities
    gpt_probs = gpt.heads * 32 * 32 * 2
    assert (held(gpt, attention="eager", autocast=True) - held(gpt, attention="eager")
            >= gpt_probs * (4 - 2))
    # under LoRA each adapter casts its input back to 16-bit: one copy per adapter
    assert (held(llama, lora_rank=16, lora_targets=targets, lora_bytes=2, autocast=True)
            > held(llama, lora_rank=16, lora_targets=targets, lora_bytes=2))


def test_checkpointing_is_switched_on_as_transformers_does() -> None:
    """transformers 5.x: activation_checkpointing_enable(activation_checkpointing_kwargs,
    every_n_layers, offload), use_reentrant=False by default; first k layers by switching
    a layer's gradient_checkpointing flag off."""
    arch = tiny_architecture("llama-3.1-8b", layers=4)
    model = build_model(arch)
    params = inspect.signature(model.activation_checkpointing_enable).parameters
    assert {"activation_checkpointing_kwargs", "every_n_layers", "offload"} <= set(params)
    assert apply_checkpointing(model, "every-n", n=3) == (0, 3)
    assert model.model.layers[0]._gradient_checkpointing_func.keywords == {
        "use_reentrant": False}
    assert apply_checkpointing(build_model(arch), "first-k", k=3) == (0, 1, 2)
    assert apply_checkpointing(build_model(arch), "none") == ()


QLORA_CASES = [(f, d, a, st) for f in FAMILIES for d in ("fp32", "bf16")
               for a in ("sdpa", "eager") for st in ("none", "every-layer", "first-k")]


@pytest.mark.parametrize("family,dtype,attention,strategy", QLORA_CASES,
                         ids=["-".join(c) for c in QLORA_CASES])
def test_qlora(family, dtype, attention, strategy) -> None:
    """QLoRA as the planner's code runs it: the base in 4-bit NF4 through bitsandbytes,
    prepare_model_for_kbit_training, LoRA r=16 on every linear; in bf16 under autocast
    (the Trainer's bf16=True)."""
    if importlib.util.find_spec("bitsandbytes") is None:
        pytest.skip(QLORA_SKIP)
    check(Setup(tiny_architecture(FAMILIES[family]), dtype=dtype, attention=attention,
                strategy=strategy, k=2, lora_rank=16, qlora=True))


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_qlora_with_a_padding_mask(family) -> None:
    if importlib.util.find_spec("bitsandbytes") is None:
        pytest.skip(QLORA_SKIP)
    for dtype in ("fp32", "bf16"):
        check(Setup(tiny_architecture(FAMILIES[family]), dtype=dtype, padding=True,
                    lora_rank=8, lora_targets="attention", qlora=True))


@pytest.mark.parametrize("preset", ["llama-3.2-1b", "llama-3.1-70b"])
def test_the_other_llama_presets(preset) -> None:
    """Llama 3.2 1B (tied embeddings, 4 query heads per KV head) and 3.1 70B (8 per KV
    head: one KV head when scaled down, so repeat_kv makes views, not copies)."""
    arch = tiny_architecture(preset)
    check(Setup(arch, dtype="bf16", attention="sdpa", lora_rank=16, padding=True))
    check(Setup(arch, dtype="bf16", attention="eager", strategy="first-k", k=1))
    check(Setup(arch, dtype="fp32", attention="sdpa", strategy="every-n", n=3))
    check(Setup(arch, dtype="mixed", attention="sdpa", padding=True))
    check(Setup(arch, dtype="mixed", attention="eager", lora_rank=16))


@pytest.mark.parametrize("act", ["gelu_pytorch_tanh", "gelu"])
def test_fused_gelu_variants_keep_what_a_fused_gelu_keeps(act) -> None:
    """transformers' "gelu_pytorch_tanh" (GELUTanh) and "gelu" call torch's fused GELU:
    none of gelu_new's extra tensors."""
    arch = tiny_architecture("gpt2").with_(act=act)
    assert arch.activation not in L.PYTHON_GELUS
    for dtype in ("fp32", "bf16"):
        check(Setup(arch, dtype=dtype, attention="eager"))
