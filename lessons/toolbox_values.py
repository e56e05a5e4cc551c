"""Lesson 10's numbers (the practitioner's toolbox), computed by memory/toolbox.py, memory/layer.py
and memory/parallel.py and worded for a language: lessons/values.py merges them into
`lesson_values`."""

from __future__ import annotations

from collections.abc import Callable

from i18n import format_decimal
from lessons.checkpoint_math import logits_bytes
from memory.architectures import PRESETS as ARCHITECTURES
from memory.layer import layer_bytes, layer_tensors
from memory.toolbox import (
    causal_work_per_rank,
    dispatch_bytes,
    dropped_assignments,
    expert_capacity,
    hardware_to_model_flops,
    lora_kept_numbers,
    lora_own_inputs,
    packed_tokens,
    padded_tokens,
    pipeline_table,
    router_probability_bytes,
    score_bytes,
)

# The caching allocator's sizes, from the installed torch's header
# (torch/include/c10/core/AllocatorConfig.h; tests/lessons/test_toolbox.py reads it).
ALLOCATOR = {
    "kMinBlockSize": 512,
    "kSmallSize": 1_048_576,
    "kSmallBuffer": 2_097_152,
    "kMinLargeAlloc": 10_485_760,
    "kRoundLarge": 2_097_152,
}
# FlexAttention's default block (torch/nn/attention/flex_attention.py,
# _DEFAULT_SPARSE_BLOCK_SIZE; tests/lessons/test_toolbox.py reads it).
FLEX_BLOCK = 128
# Pipelines: stages, micro-batches, chunks per GPU of the interleaved schedule.
PIPE = {"p": 8, "m": 32, "v": 2}
# Mixture of experts: Qwen3-235B-A22B's config.json (tests/demos/hf_configs, checked by
# tests/lessons/test_toolbox.py), one micro-batch of 4,096 tokens.
MOE = {"label": "Qwen3-235B-A22B", "hidden": 4_096, "experts": 128, "top_k": 8, "tokens": 4_096}
MIXTRAL = {"label": "Mixtral 8x7B", "hidden": 4_096, "experts": 8, "top_k": 2}
CAPACITY_FACTOR = 1.25
HOT_EXPERT_SHARE = 2  # an expert that receives twice its balanced share
# Long context: Llama 3.1 70B at 128k tokens, context parallel over 8.
LONG_MODEL = "llama-3.1-70b"
LONG_SEQ = 131_072
LONG_CP = 8
# Packing: four sequences of a fine-tuning batch.
PACK_LENGTHS = (2_048, 700, 350, 1_000)
# MFU/HFU: Llama 3.1 70B at 8,192 tokens per micro-batch, and a measured MFU to convert.
FLOP_MODEL = "llama-3.1-70b"
FLOP_SEQ = 8_192
EXAMPLE_MFU = 0.40
# LoRA on every linear of Llama 3.1 8B: the inputs of q, k, v, o, gate, up (hidden) and down.
LORA_MODEL = "llama-3.1-8b"


def toolbox_values(
    code: str,
    number: Callable[[float], str],
    plain: Callable[[float], str],
    percent: Callable[..., str],
    gb: Callable[[float], str],
) -> dict[str, str]:
    """Every {{value:tb_...}} of lesson 10 and its quiz items, in language `code`."""
    v: dict[str, str] = {}

    def times(value: float, digits: int = 2) -> str:
        return f"{format_decimal(value, code, digits)}×"

    def mb(size: float) -> str:  # decimal MB with one decimal
        return f"{format_decimal(size / 1e6, code, 1)} MB"

    def tb(size: float) -> str:  # decimal TB with one decimal
        return f"{format_decimal(size / 1e12, code, 1)} TB"

    # The allocator.
    v["tb_min_block"] = number(ALLOCATOR["kMinBlockSize"])
    v["tb_small_size_mib"] = number(ALLOCATOR["kSmallSize"] / 2**20)
    v["tb_small_buffer_mib"] = number(ALLOCATOR["kSmallBuffer"] / 2**20)
    v["tb_min_large_mib"] = number(ALLOCATOR["kMinLargeAlloc"] / 2**20)
    v["tb_round_large_mib"] = number(ALLOCATOR["kRoundLarge"] / 2**20)

    v["tb_flex_block"] = number(FLEX_BLOCK)

    # Pipelines.
    p, m, chunks = PIPE["p"], PIPE["m"], PIPE["v"]
    v["tb_p"], v["tb_m"], v["tb_v"] = number(p), number(m), number(chunks)
    for row in pipeline_table(p, m, chunks):
        key = row.schedule
        v[f"tb_{key}_bubble"] = percent(row.bubble, 1)
        v[f"tb_{key}_units"] = plain(row.bubble_units)
        v[f"tb_{key}_units_rc"] = plain(row.bubble_units_recompute)
        v[f"tb_{key}_in_flight"] = plain(row.in_flight)
    rows = {row.schedule: row for row in pipeline_table(p, m, chunks)}
    v["tb_recompute_bubble_growth"] = times(
        rows["1f1b"].bubble_units_recompute / rows["1f1b"].bubble_units, 2
    )
    # the quiz's shape: the same pipeline with half the micro-batches
    half = {row.schedule: row for row in pipeline_table(p, m // 2, chunks)}
    v["tb_half_m"] = number(m // 2)
    v["tb_half_1f1b_bubble"] = percent(half["1f1b"].bubble, 1)
    v["tb_half_1f1b_in_flight"] = plain(half["1f1b"].in_flight)
    v["tb_half_gpipe_in_flight"] = plain(half["gpipe"].in_flight)

    # Mixture of experts.
    tokens, h, experts, k = MOE["tokens"], MOE["hidden"], MOE["experts"], MOE["top_k"]
    layer_input = 2 * tokens * h
    v["tb_moe_model"] = MOE["label"]
    v["tb_moe_tokens"] = number(tokens)
    v["tb_moe_hidden"] = number(h)
    v["tb_moe_experts"] = number(experts)
    v["tb_moe_top_k"] = number(k)
    v["tb_moe_router_mb"] = mb(router_probability_bytes(tokens, experts))
    v["tb_moe_router_share"] = percent(router_probability_bytes(tokens, experts) / layer_input, 2)
    v["tb_moe_input_mb"] = mb(layer_input)
    v["tb_moe_dispatch_mb"] = mb(dispatch_bytes(tokens, k, h))
    v["tb_moe_dispatch_factor"] = number(dispatch_bytes(tokens, k, h) / layer_input)
    v["tb_mixtral_top_k"] = number(MIXTRAL["top_k"])
    v["tb_mixtral_experts"] = number(MIXTRAL["experts"])
    v["tb_capacity_factor"] = plain(CAPACITY_FACTOR)
    capacity = expert_capacity(tokens, experts, k, CAPACITY_FACTOR)
    balanced = tokens * k // experts
    hot = HOT_EXPERT_SHARE * balanced
    v["tb_capacity"] = number(capacity)
    v["tb_balanced_load"] = number(balanced)
    v["tb_hot_load"] = number(hot)
    v["tb_hot_dropped"] = number(dropped_assignments([hot], capacity))

    # Long context.
    arch = ARCHITECTURES[LONG_MODEL]
    s = LONG_SEQ
    v["tb_long_model"] = arch.label
    v["tb_long_seq"] = number(s)
    v["tb_long_vocab"] = number(arch.vocab)
    v["tb_long_heads"] = number(arch.heads)
    v["tb_long_kv_heads"] = number(arch.kv_heads)
    v["tb_long_logits_gb"] = gb(logits_bytes(1, s, arch.vocab))
    v["tb_long_scores_tb"] = tb(score_bytes(s, arch.heads))
    one_layer = layer_bytes(layer_tensors(arch, 1, s, 2))
    v["tb_long_layer_gb"] = gb(one_layer)
    v["tb_long_inputs_gb"] = gb(2 * s * arch.hidden * arch.layers)
    v["tb_long_layers"] = number(arch.layers)
    v["tb_cp"] = number(LONG_CP)
    v["tb_cp_layer_gb"] = gb(one_layer / LONG_CP)
    v["tb_cp_contiguous_max"] = times(max(causal_work_per_rank(LONG_CP, balanced=False)), 3)
    v["tb_cp_contiguous_min"] = times(min(causal_work_per_rank(LONG_CP, balanced=False)), 3)
    v["tb_cp_chunks"] = number(2 * LONG_CP)
    v["tb_cp_last_chunk"] = number(2 * LONG_CP - 1)

    # Packing.
    lengths = list(PACK_LENGTHS)
    v["tb_pack_lengths"] = ", ".join(number(n) for n in lengths)
    v["tb_pack_count"] = number(len(lengths))
    v["tb_pack_padded"] = number(padded_tokens(lengths))
    v["tb_pack_real"] = number(packed_tokens(lengths))
    v["tb_pack_waste"] = percent(1 - packed_tokens(lengths) / padded_tokens(lengths))

    # MFU and HFU.
    flop_arch = ARCHITECTURES[FLOP_MODEL]
    full = hardware_to_model_flops(flop_arch, 1, FLOP_SEQ)
    early = hardware_to_model_flops(flop_arch, 1, FLOP_SEQ, early_stop=True)
    v["tb_flop_model"] = flop_arch.label
    v["tb_flop_seq"] = number(FLOP_SEQ)
    v["tb_hfu_ratio_full"] = times(full, 3)
    v["tb_hfu_ratio_early"] = times(early, 3)
    v["tb_example_mfu"] = percent(EXAMPLE_MFU)
    v["tb_example_hfu_full"] = percent(EXAMPLE_MFU * full)
    v["tb_example_hfu_early"] = percent(EXAMPLE_MFU * early)

    # LoRA on every linear: the widths its adapters read, per layer.
    lora = ARCHITECTURES[LORA_MODEL]
    widths = [lora.hidden] * 6 + [lora.mlp_width]
    v["tb_lora_model"] = lora.label
    v["tb_lora_hidden"] = number(lora.hidden)
    v["tb_lora_mlp"] = number(lora.mlp_width)
    numbers = sum(widths)
    v["tb_lora_numbers"] = number(numbers)
    v["tb_lora_per_h"] = plain(numbers / lora.hidden)
    for key, cast, dropout, copy_bytes in (
        ("fp32", True, False, 4),
        ("fp32_drop", True, True, 4),
        ("same", False, False, 2),
        ("same_drop", False, True, 2),
    ):
        kept = [lora_kept_numbers(w, cast, dropout) for w in widths]
        per_token = sum(x["copy"] * copy_bytes + x["mask"] for x in kept)  # 1-byte masks
        v[f"tb_lora_{key}_sbh"] = plain(per_token / lora.hidden)
    # without dropout, 16-bit adapters keep the inputs themselves (2 bytes each)
    v["tb_lora_same_x_sbh"] = plain(2 * lora_own_inputs(lora.hidden, lora.mlp_width) / lora.hidden)
    return v
