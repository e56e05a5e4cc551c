"""A Hugging Face config.json as an Architecture the planner knows (pure: a dict in, an
Architecture out, or ConfigJsonError naming the missing field).

Families: GPT-2 (`model_type` "gpt2": n_layer, n_embd, n_head, n_inner or 4·n_embd,
vocab_size, n_positions) and the Llama kind (llama, mistral, qwen2, gemma, gemma2:
num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads (default: the
heads), intermediate_size, vocab_size, tie_word_embeddings, head_dim where it differs from
hidden / heads, as in Gemma 7B).
"""

from __future__ import annotations

import json
from typing import Any

from memory.architectures import Architecture, ShapeError

LLAMA_KIND = ("llama", "mistral", "qwen2", "gemma", "gemma2")
FAMILIES = ("gpt2", *LLAMA_KIND)
# tie_word_embeddings when a config.json leaves it out (each family's config class default,
# transformers 5.24.0: GPT2Config, LlamaConfig, MistralConfig, Qwen2Config, GemmaConfig)
TIED_DEFAULT = {"gpt2": True, "llama": False, "mistral": False, "qwen2": False,
                "gemma": True, "gemma2": True}


class ConfigJsonError(ValueError):
    """`problem` (an id: not-json, family, missing, bad-value, shape) and `field`, for the
    page to word; str() is the English sentence."""

    def __init__(self, problem: str, message: str, field: str = "", value: object = None
                 ) -> None:
        super().__init__(message)
        self.problem = problem
        self.field = field
        self.value = value


def _int(cfg: dict[str, Any], name: str, default: int | None = None) -> int:
    value = cfg.get(name, default)
    if value is None:
        raise ConfigJsonError("missing", f"config.json has no {name!r}", field=name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigJsonError("bad-value", f"{name!r} must be a positive integer, got "
                              f"{value!r}", field=name, value=value)
    return value


def parse(text: str) -> dict[str, Any]:
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigJsonError("not-json", f"not JSON: {error}") from None
    if not isinstance(cfg, dict):
        raise ConfigJsonError("not-json", "not a JSON object")
    return cfg


def architecture(cfg: dict[str, Any] | str) -> Architecture:
    """The Architecture of a config.json (its text or the parsed dict)."""
    if isinstance(cfg, str):
        cfg = parse(cfg)
    family = cfg.get("model_type")
    if family is None:
        raise ConfigJsonError("missing", "config.json has no 'model_type'", field="model_type")
    if family not in FAMILIES:
        raise ConfigJsonError("family", f"model_type {family!r} is not one of "
                              f"{', '.join(FAMILIES)}", field="model_type", value=family)
    tied = cfg.get("tie_word_embeddings", TIED_DEFAULT[family])
    label = str(cfg.get("_name_or_path") or f"{family} (config.json)")
    try:
        if family == "gpt2":
            hidden = _int(cfg, "n_embd")
            inner = cfg.get("n_inner")
            return Architecture(
                "config", label, layers=_int(cfg, "n_layer"), hidden=hidden,
                heads=_int(cfg, "n_head"), kv_heads=_int(cfg, "n_head"),
                mlp_width=_int(cfg, "n_inner") if inner is not None else 4 * hidden,
                mlp="gelu", norm="layernorm", vocab=_int(cfg, "vocab_size"), tied=bool(tied),
                positions=_int(cfg, "n_positions"), qkv_bias=True, linear_bias=True,
                dropout=float(cfg.get("resid_pdrop", 0.1) or 0) > 0, family=family,
                act=str(cfg.get("activation_function", "gelu_new"))).check()
        hidden, heads = _int(cfg, "hidden_size"), _int(cfg, "num_attention_heads")
        head_dim = cfg.get("head_dim")
        head_size = _int(cfg, "head_dim") if head_dim is not None else 0
        if head_size * heads == hidden:
            head_size = 0
        return Architecture(
            "config", label, layers=_int(cfg, "num_hidden_layers"), hidden=hidden, heads=heads,
            kv_heads=_int(cfg, "num_key_value_heads", heads),
            mlp_width=_int(cfg, "intermediate_size"), mlp="swiglu", norm="rmsnorm",
            vocab=_int(cfg, "vocab_size"), tied=bool(tied),
            qkv_bias=bool(cfg.get("attention_bias", family == "qwen2")), family=family,
            head_size=head_size).check()
    except ShapeError as error:
        raise ConfigJsonError("shape", str(error), field=str(error.params.get("field", "")),
                              value=error.params) from None
