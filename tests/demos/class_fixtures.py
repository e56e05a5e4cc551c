"""The families' config.json files (tests/demos/hf_configs, and the planner's presets in
planner/presets: the keys and values of each family's public config.json, written out by
hand) and tiny versions of them: every key
kept, the widths, layer counts, vocabulary and window shrunk so that one real CPU step
takes milliseconds while each feature (window, soft-caps, q/k norms, experts, fused
projections, one KV head) still runs."""

from __future__ import annotations

import json
from pathlib import Path

from planner.preset_classes import FOLDER as PRESET_FOLDER

FOLDER = Path(__file__).with_name("hf_configs")
FAMILIES = ("llama-3.1-8b", "mistral-7b-v0.1", "mistral-7b-v0.3", "mixtral-8x7b",
            "qwen2.5-7b", "qwen3-8b", "qwen3-235b-a22b", "gemma-7b", "gemma-2b",
            "gemma-2-9b", "gemma-3-1b", "phi-3-mini-4k", "phi-4", "olmo2-7b", "gpt2",
            "pythia-1b", "falcon-7b", "deepseek-v2-lite", "deepseek-v3")
TINY_WINDOW = 16  # a window the tests' sequences cross
TINY_HIDDEN, TINY_HEADS, TINY_HEAD_DIM = 64, 4, 16


def path(name: str) -> Path:
    """A family's config.json: a preset's as the planner ships it, else the tests' own."""
    shipped = PRESET_FOLDER / f"{name}.json"
    return shipped if shipped.exists() else FOLDER / f"{name}.json"


def load(name: str) -> dict:
    return json.loads(path(name).read_text(encoding="utf-8"))


def tiny(cfg: dict, layers: int = 4) -> dict:
    """The same config at a tiny size: hidden 64, 4 query heads of 16 (KV heads: 1 where
    the model has one, all where it has as many as query heads, else 2), MLP and expert
    widths kept in proportion, at most 4 experts (top-2), a 16-token window, a 256-word
    vocabulary; Gemma 3 keeps its local:global pattern (layers ≥ its period)."""
    out = dict(cfg)
    heads = cfg.get("num_attention_heads", cfg.get("n_head"))
    kv = cfg.get("num_key_value_heads", heads)
    if cfg.get("multi_query"):
        kv = 1
    tiny_kv = 1 if kv == 1 else TINY_HEADS if kv == heads else 2
    hidden = cfg.get("hidden_size", cfg.get("n_embd"))
    ratio = (cfg.get("intermediate_size") or 4 * hidden) / hidden
    sizes = {"hidden_size": TINY_HIDDEN, "n_embd": TINY_HIDDEN,
             "num_attention_heads": TINY_HEADS, "n_head": TINY_HEADS,
             "num_hidden_layers": layers, "n_layer": layers,
             "intermediate_size": 8 * round(ratio * TINY_HIDDEN / 8),
             "moe_intermediate_size": 32, "vocab_size": 256,
             "max_position_embeddings": 512, "n_positions": 512, "n_ctx": 512,
             "original_max_position_embeddings": 512, "max_window_layers": layers,
             "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
    for key, value in sizes.items():
        if key in out:
            out[key] = value
    if "num_key_value_heads" in cfg or cfg.get("model_type") != "gpt2":
        out["num_key_value_heads"] = tiny_kv
    if "head_dim" in cfg:
        out["head_dim"] = TINY_HEAD_DIM
    if cfg.get("query_pre_attn_scalar"):
        out["query_pre_attn_scalar"] = TINY_HEAD_DIM
    if cfg.get("sliding_window"):
        out["sliding_window"] = TINY_WINDOW
    for key in ("num_experts", "num_local_experts", "n_routed_experts"):
        if key in cfg:
            out[key] = min(cfg[key], 4)
    for key in ("n_group", "topk_group"):  # DeepSeek's expert groups: one of the 4
        if key in cfg:
            out[key] = 1
    if "num_experts_per_tok" in cfg:
        out["num_experts_per_tok"] = min(cfg["num_experts_per_tok"], 2)
    if cfg.get("sliding_window_pattern"):
        out["num_hidden_layers"] = max(layers, cfg["sliding_window_pattern"] + 1)
    return out
