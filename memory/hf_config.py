"""A Hugging Face config.json as an Architecture the planner knows (pure: a dict in, an
Architecture out, or ConfigJsonError naming the missing field).

Families: GPT-2 (`model_type` "gpt2": n_layer, n_embd, n_head, n_inner or 4·n_embd,
vocab_size, n_positions) and the Llama kind (llama, mistral, qwen2, gemma, gemma2:
num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads (default: the
heads), intermediate_size, vocab_size, tie_word_embeddings, head_dim where it differs from
hidden / heads, as in Gemma 7B).

Before anything is built, `parse` refuses what no real config.json is: a text longer than
MAX_TEXT_CHARS, JSON nested deeper than MAX_DEPTH, and sizes no real model has
(`SIZE_LIMITS`, each well above the largest published models: 1,000 layers against
Llama 3.1 405B's 126, hidden 65,536 against its 16,384 ...), each refusal naming its field;
an image model's config.json, its own sizes too (`check_image_sizes`: channels, levels,
blocks, sides and patches).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
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

    def __init__(self, problem: str, message: str, field: str = "", value: object = None,
                 limit: int = 0) -> None:
        super().__init__(message)
        self.problem = problem
        self.field = field
        self.value = value
        self.limit = limit


# What no real config.json is: refused before anything is built (a pasted text, a file of
# the command line read up to this many characters; nesting; each size below).
MAX_TEXT_CHARS = 1_000_000  # published config.json files are a few KB
MAX_DEPTH = 64  # objects and arrays inside each other (published ones: 3 or 4)


@dataclass(frozen=True)
class SizeLimit:
    """One size of a model (`what`: an id the pages word), the config.json keys that give
    it in the families transformers builds, and the range a real model's value is in."""

    what: str
    keys: tuple[str, ...]
    limit: int
    least: int = 0


# Each well above the largest published model's (in brackets), far below what would take
# a server's memory or time to build: a real model is never refused.
SIZE_LIMITS: tuple[SizeLimit, ...] = (
    SizeLimit("layers", ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
              1_000, 1),  # (Llama 3.1 405B: 126)
    SizeLimit("hidden", ("hidden_size", "n_embd", "d_model", "kv_lora_rank", "q_lora_rank"),
              65_536, 1),  # (16,384; DeepSeek-V3's latent ranks 512 and 1,536)
    SizeLimit("intermediate", ("intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim",
                               "moe_intermediate_size", "shared_expert_intermediate_size"),
              1_048_576),  # (Llama 3.1 405B: 53,248)
    SizeLimit("heads", ("num_attention_heads", "n_head", "num_heads", "n_heads"),
              4_096, 1),  # (128)
    SizeLimit("kv-heads", ("num_key_value_heads", "num_kv_heads", "n_head_kv",
                           "multi_query_group_num"), 4_096),  # (128)
    SizeLimit("experts", ("num_experts", "num_local_experts", "n_routed_experts",
                          "n_shared_experts", "moe_num_experts", "n_group"),
              65_536),  # (DeepSeek-V3: 256; transformers' Doge: 16,384 small ones)
    SizeLimit("top-k", ("num_experts_per_tok", "moe_topk", "topk_group"), 4_096),  # (Doge: 64)
    SizeLimit("vocab", ("vocab_size", "padded_vocab_size"), 4_194_304, 1),  # (Gemma 3: 262,208)
    SizeLimit("head-dim", ("head_dim", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                           "kv_channels"), 16_384),  # (Gemma 2: 256)
    SizeLimit("window", ("sliding_window",), 16_777_216),  # (Qwen2.5's 131,072)
    SizeLimit("positions", ("max_position_embeddings", "n_positions", "n_ctx"),
              16_777_216),  # (Llama 4 Scout: 10,485,760)
)
# An image model's config.json (a diffusers UNet or diffusion transformer, a transformers
# vision encoder) gives other sizes: each bounded the same way (check_image_sizes), well
# above the largest published model's (in brackets) and where a measurement on the
# server stays within its time and memory.
IMAGE_SIZE_LIMITS: tuple[SizeLimit, ...] = (
    SizeLimit("channels", ("block_out_channels", "in_channels", "out_channels",
                           "num_channels", "norm_num_groups"),
              16_384, 1),  # (SDXL's UNet: 1,280 channels; Flux: 64 in)
    SizeLimit("embedding", ("cross_attention_dim", "joint_attention_dim",
                            "pooled_projection_dim", "caption_projection_dim",
                            "projection_class_embeddings_input_dim",
                            "addition_time_embed_dim", "encoder_hid_dim",
                            "time_embedding_dim", "projection_dim"),
              65_536, 1),  # (Flux's T5 width: 4,096)
    SizeLimit("head-dim", ("attention_head_dim", "axes_dims_rope"), 16_384),  # (128)
    SizeLimit("blocks", ("layers_per_block",), 16, 1),  # (SD 1.5, SDXL: 2)
    SizeLimit("blocks", ("transformer_layers_per_block",
                         "reverse_transformer_layers_per_block"), 64),  # (SDXL: 10)
    SizeLimit("blocks", ("num_single_layers",), 1_000),  # (Flux: 38)
    SizeLimit("side", ("sample_size", "pos_embed_max_size"), 1_024, 1),  # (SDXL: 128 latents)
    SizeLimit("side", ("image_size",), 8_192, 1),  # (DINOv2: 518 pixels)
    SizeLimit("patch", ("patch_size",), 64, 1),  # (ViT: 16; SD3: 2)
)
# the lists of a UNet's levels (each halves the side: 8 levels make its side unit 1,024
# pixels, the largest the planner offers a grid for)
MAX_LEVELS = 8  # (SD 1.5: 4)
LEVEL_KEYS = ("block_out_channels", "down_block_types", "up_block_types")
# the experts of a layer, and how many of them (or of their groups) a token picks
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
PICKS = (("num_experts_per_tok", EXPERT_KEYS), ("moe_topk", EXPERT_KEYS),
         ("topk_group", ("n_group",)))


def _depth(value: Any) -> int:
    """How deep objects and arrays nest in a parsed JSON value (without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in item
                         if isinstance(child, (dict, list)))
    return deepest


def _check_size(key: str, value: Any, size: SizeLimit) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < size.least:
        raise ConfigJsonError(
            "bad-value", f"{key!r} must be a whole number of at least {size.least}, got "
            f"{str(value)[:40]!r}", field=key,
            value=value if isinstance(value, (int, float)) else None, limit=size.least)
    if value > size.limit:
        raise ConfigJsonError(
            "too-large", f"{key!r} is {value:,}: no real model has more than {size.limit:,} "
            f"({size.what})", field=key, value=value, limit=size.limit)


def check_sizes(cfg: dict[str, Any]) -> dict[str, Any]:
    """`cfg` if every size it gives (and its text_config's: the part built) is a whole
    number in its SizeLimit's range (a list of them, one per layer, as Gemma 3n's widths)
    and no token picks more experts than a layer has; else ConfigJsonError naming the
    field ("bad-value", "too-large", "top-k")."""
    parts = [cfg] + ([cfg["text_config"]] if isinstance(cfg.get("text_config"), dict) else [])
    for part in parts:
        for size in SIZE_LIMITS:
            for key in size.keys:
                value = part.get(key)
                for item in value if isinstance(value, list) and value else [value]:
                    if item is not None:
                        _check_size(key, item, size)
        for key, pool_keys in PICKS:
            picks = part.get(key)
            pool = next((part[k] for k in pool_keys if part.get(k)), None)
            if isinstance(picks, int) and isinstance(pool, int) and 0 < pool < picks:
                raise ConfigJsonError(
                    "top-k", f"{key!r} is {picks:,}, more than the {pool:,} there are to "
                    "pick from", field=key, value=picks, limit=pool)
    return cfg


def check_image_sizes(cfg: dict[str, Any]) -> dict[str, Any]:
    """`cfg`, an image model's config.json, if its sizes and its vision_config's (the part
    built) are in the ranges of SIZE_LIMITS and IMAGE_SIZE_LIMITS (lists item by item, one
    level deep inside a list of lists) and its UNet has at most MAX_LEVELS levels; else
    ConfigJsonError naming the field ("bad-value", "too-large", "too-many")."""
    parts = [cfg] + ([cfg["vision_config"]] if isinstance(cfg.get("vision_config"), dict)
                     else [])
    for part in parts:
        for key in LEVEL_KEYS:
            value = part.get(key)
            if isinstance(value, list) and len(value) > MAX_LEVELS:
                raise ConfigJsonError(
                    "too-many", f"{key!r} lists {len(value):,} levels: no real model has "
                    f"more than {MAX_LEVELS}", field=key, value=len(value), limit=MAX_LEVELS)
        for size in SIZE_LIMITS + IMAGE_SIZE_LIMITS:
            for key in size.keys:
                value = part.get(key)
                items = value if isinstance(value, list) and value else [value]
                for item in items:
                    for one in item if isinstance(item, list) and item else [item]:
                        if one is not None:
                            _check_size(key, one, size)
    return cfg


def _int(cfg: dict[str, Any], name: str, default: int | None = None) -> int:
    value = cfg.get(name, default)
    if value is None:
        raise ConfigJsonError("missing", f"config.json has no {name!r}", field=name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigJsonError("bad-value", f"{name!r} must be a positive integer, got "
                              f"{value!r}", field=name, value=value)
    return value


def parse(text: str) -> dict[str, Any]:
    """A config.json's text as a dict, its sizes checked (check_sizes); ConfigJsonError for
    a text that is too long, not a JSON object, nested too deep or sized as no model is."""
    if len(text) > MAX_TEXT_CHARS:
        raise ConfigJsonError("too-long", f"longer than {MAX_TEXT_CHARS:,} characters: "
                              "no config.json is", limit=MAX_TEXT_CHARS)
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigJsonError("not-json", f"not JSON: {error}") from None
    except RecursionError:  # deeper than Python's own limit: far deeper than MAX_DEPTH
        cfg = None
    except ValueError as error:  # an integer of more digits than Python converts
        raise ConfigJsonError("not-json", f"not JSON: {str(error).split(':')[0]}") from None
    if cfg is None or _depth(cfg) > MAX_DEPTH:
        raise ConfigJsonError("too-deep", f"nested more than {MAX_DEPTH} levels deep: no "
                              "config.json is", limit=MAX_DEPTH)
    if not isinstance(cfg, dict):
        raise ConfigJsonError("not-json", "not a JSON object")
    return check_sizes(cfg)


def architecture(cfg: dict[str, Any] | str) -> Architecture:
    """The Architecture of a config.json (its text or the parsed dict)."""
    cfg = parse(cfg) if isinstance(cfg, str) else check_sizes(cfg)
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
