"""The course's model families (memory.architectures.PRESETS) as tiny real transformers
models: a preset scaled down to a few layers and a hidden size of about a hundred, built
from the real class of its family with random weights (GPT-2: GPT2LMHeadModel, Llama:
LlamaForCausalLM, Qwen2.5: Qwen2ForCausalLM; nothing is downloaded) through the causal-LM
kind (model_classes.causal_lm), with PEFT LoRA on the planner's target sets."""

from __future__ import annotations

import warnings

import torch

from memory.architectures import PRESETS, Architecture
from model_classes.causal_lm import CausalLM
from model_classes.variant import Variant

ATTENTIONS = ("sdpa", "eager")
TINY_HEAD_DIM = 16
TINY_VOCAB = 256
# PEFT's target module names per family for the planner's two LoRA target sets.
LORA_MODULES = {
    "gpt2": {"attention": ["c_attn", "attn.c_proj"], "all-linear": "all-linear"},
    "llama": {"attention": ["q_proj", "k_proj", "v_proj", "o_proj"],
              "all-linear": "all-linear"},
}
KIND = CausalLM()


def family(arch: Architecture) -> str:
    """The transformers family of an architecture: gpt2, qwen2 (q/k/v biases) or llama."""
    if arch.kind == "gpt":
        return "gpt2"
    return "qwen2" if arch.qkv_bias else "llama"


def tiny_architecture(preset: str, layers: int = 4, vocab: int = TINY_VOCAB,
                      positions: int = 128) -> Architecture:
    """A preset scaled down: the same layer kind, activation, biases, dropout, tying and
    query-heads-per-KV-head ratio, the same MLP width ÷ hidden (rounded to 8), heads of 16
    numbers; `layers` layers and a small vocabulary."""
    big = PRESETS[preset]
    group = big.heads // big.kv_heads
    kv = 4 if group == 1 else (2 if group <= 4 else 1)
    heads = group * kv
    hidden = heads * TINY_HEAD_DIM
    width = 8 * round(big.mlp_width / big.hidden * hidden / 8)
    return big.with_(key=f"{preset}-tiny", label=f"{big.label} (tiny)", layers=layers,
                     hidden=hidden, heads=heads, kv_heads=kv, mlp_width=width, vocab=vocab,
                     positions=positions if big.positions else 0, published_params=None)


def config_of(arch: Architecture, attention: str = "sdpa"):
    """The transformers config of an architecture (random init, nothing downloaded)."""
    import transformers

    common = {"vocab_size": arch.vocab, "tie_word_embeddings": arch.tied}
    if family(arch) == "gpt2":
        p = 0.1 if arch.dropout else 0.0
        cfg = transformers.GPT2Config(
            n_layer=arch.layers, n_embd=arch.hidden, n_head=arch.heads,
            n_inner=arch.mlp_width, n_positions=arch.positions or 1024,
            activation_function=arch.activation, resid_pdrop=p, embd_pdrop=p, attn_pdrop=p,
            bos_token_id=arch.vocab - 1, eos_token_id=arch.vocab - 1, **common)
    else:
        cls = transformers.Qwen2Config if family(arch) == "qwen2" else transformers.LlamaConfig
        cfg = cls(hidden_size=arch.hidden, intermediate_size=arch.mlp_width,
                  num_hidden_layers=arch.layers, num_attention_heads=arch.heads,
                  num_key_value_heads=arch.kv_heads, hidden_act=arch.activation,
                  max_position_embeddings=max(arch.positions, 4096), **common)
    cfg._attn_implementation = attention
    return cfg


def build_model(arch: Architecture, dtype: str = "fp32", attention: str = "sdpa",
                seed: int = 0, quantized: bool = False) -> torch.nn.Module:
    """The tiny model of an architecture with random weights (`seed`), in `dtype` (fp32 or
    bf16), in training mode; `quantized`: QLoRA's 4-bit base, loaded as the planner's code
    loads it (model_classes.quantized.load_in_4bit)."""
    torch.manual_seed(seed)
    return KIND.build(config_of(arch, attention),
                      Variant(precision=dtype, kernel=attention, quantized=quantized),
                      blocks=arch.layers)


def apply_lora(model: torch.nn.Module, arch: Architecture, rank: int, targets: str
               ) -> torch.nn.Module:
    """PEFT LoRA with its defaults (alpha 8, no dropout, adapters in fp32:
    autocast_adapter_dtype=True) on the planner's target set."""
    from peft import LoraConfig, get_peft_model

    fam = "gpt2" if family(arch) == "gpt2" else "llama"
    cfg = LoraConfig(r=rank, target_modules=LORA_MODULES[fam][targets],
                     fan_in_fan_out=fam == "gpt2", task_type="CAUSAL_LM")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return get_peft_model(model, cfg)

