"""Every number the lesson text states, computed from its formula and formatted.

The Markdown writes ``{{value:name}}``; `lesson_values()` supplies the text for each name.
Typed-in numbers are limited to the inputs of the worked examples and to published
results (lessons/facts.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from functools import cache

from i18n import DEFAULT, N_, format_decimal, format_percent, gettext, language
from lessons import facts
from lessons.catalog import lesson_count_text
from lessons.checkpoint_math import (
    LLAMA3_8B_SHAPE,
    best_segment_length,
    every_layer_best_up_to,
    extra_share_of_new_step,
    format_gb,
    internals_ratio,
    layer_activation_bytes,
    layer_constant,
    layer_input_bytes,
    llama_layer_constant,
    llama_layer_parts,
    logits_bytes,
    minimum_memory,
    offload_hidden_from,
    optimal_segment_length,
    percent_change,
    recompute_overhead,
    recursive_cost,
    score_term_dominates_from,
    segment_memory,
    selective_saving,
    transformer_activations,
    uniform_segments_memory,
)
from lessons.memory_calculator import PRESETS, breakdown, bytes_per_parameter
from lessons.picture_values import picture_values
from lessons.stepper import simulate
from lessons.toolbox_values import toolbox_values
from memory.architectures import PRESETS as ARCHITECTURES
from memory.config import ModelConfig, demo_default, slider_ranges
from memory.parallel import (
    Layout,
    activations_per_gpu,
    in_flight,
    interleave_factor,
    layer_bytes,
    layer_transfers,
)
from memory.precisions import PRECISIONS
from memory.strategies import StrategySpec
from memory.theory import counted_flops, early_stop_skips, predicted_peak_where
from memory.worked_examples import SEED_EXAMPLE, course_examples

# The worked example of the source pages: a 2B-class model (written once, in memory.theory).
SEED = SEED_EXAMPLE
STEPPER_EXAMPLE_LAYERS = 8
CHUNK_TOKENS = 256
# Lesson 5's live demo (the model of its demo link, the vocabulary aside): where its peak
# under every-layer checkpointing moves from the layers to the loss.
LOGITS_DEMO = ModelConfig(layers=4, hidden=256, heads=4, seq_len=256, batch=4)
# The quiz's "apply it to a new shape" items: a depth for Llama-style layers (lesson 4's
# constant), and lesson 5's demo model widened, at a vocabulary between the two crossovers.
APPLY_DEPTH = 64
APPLY_SHALLOW_DEPTH = 40  # deeper than GPT's every-layer limit, within Llama's
APPLY_HIDDEN = 512
APPLY_VOCAB = 4_096

EVERY_LAYER = StrategySpec("every-layer")


def loss_peak_vocab(cfg: ModelConfig = LOGITS_DEMO, device: str = "cpu") -> int:
    """The smallest vocabulary on the demo's slider (its steps on `device`) at which the
    theory (memory.theory.predicted_peak_where) puts `cfg`'s every-layer peak at the loss."""
    low, high, step = slider_ranges(device)["vocab"]
    return next(vocab for vocab in range(low, high + 1, step)
                if predicted_peak_where(cfg.replace(vocab=vocab), EVERY_LAYER,
                                        device) == "loss")

# A fraction the text says in words ("adds a third"), by its value.
_FRACTION_WORDS = {Fraction(1, 2): N_("half"), Fraction(1, 3): N_("a third"),
                   Fraction(1, 4): N_("a quarter"), Fraction(1, 5): N_("a fifth"),
                   Fraction(2, 3): N_("two thirds")}


def counted_demo_flops(cfg: ModelConfig | None = None,
                       attention_counted: bool = False) -> dict[str, float]:
    """Lesson 6's count: what torch's FLOP counter counts around one training step of the
    Compare demo's default model on a CPU (memory.theory.counted_flops; a test runs the
    counter): without checkpointing, every layer checkpointed (non-reentrant: early stop),
    every layer rerun whole (reentrant), and every layer at GPT-2's dropout 0.1 (a dropout
    after the MLP: nothing skipped). `attention_counted`: the counter of torch 2.15, which
    has a formula for the CPU's fused attention kernel (torch 2.13's has none)."""
    cfg = cfg or demo_default("cpu")
    dropout = cfg.replace(dropout=DEMO_DROPOUT)
    kw = {"attention_counted": attention_counted}
    return {"none": counted_flops(cfg, **kw)["total"],
            "every": counted_flops(cfg, EVERY_LAYER, **kw)["total"],
            "reentrant": counted_flops(cfg, EVERY_LAYER, reentrant=True, **kw)["total"],
            "every_dropout": counted_flops(dropout, EVERY_LAYER, **kw)["total"]}


# the head dimension of most large models (Llama, the worked example's 2,048 / 16), for the
# sequence length from which the attention-score term outweighs the rest of a layer
SCORE_HEAD_DIM = 128

# GPT-2's residual dropout (resid_pdrop), for the count with dropout
DEMO_DROPOUT = 0.1


def fraction_in_words(value: float, code: str = DEFAULT) -> str:
    """A simple fraction as words in language `code`: 1/3 -> "a third" ("ein Drittel")."""
    words = _FRACTION_WORDS.get(Fraction(value).limit_denominator(12))
    if words is None:
        raise ValueError(f"no words for the fraction {value}")
    return gettext(code, words)


@cache
def lesson_values(code: str = DEFAULT) -> dict[str, str]:
    """Every {{value:name}} of the lessons, worded and formatted for language `code`."""
    locale = language(code).babel_locale

    def number(value: float) -> str:
        return format_decimal(value, code, 0)

    def one_decimal(value: float) -> str:
        return format_decimal(value, code, 1)

    def plain(value: float) -> str:  # as many decimals as it needs: 3.5, 0.25, 41
        return format_decimal(value, code)

    def percent(fraction: float, digits: int = 0) -> str:
        return format_percent(fraction, code, digits)

    def gb(size: float) -> str:
        return format_gb(size, locale=locale)

    def unit(value: float, digits: int, symbol: str) -> str:
        return f"{format_decimal(value, code, digits)} {symbol}"

    v: dict[str, str] = {}
    b, s, h, L, a, V = (SEED[key] for key in ("batch", "seq", "hidden", "layers", "heads",
                                              "vocab"))

    # Lesson 1: what memory is made of.
    v["hf_bytes_per_param"] = number(bytes_per_parameter("mixed", "adamw"))
    v["fp32_adamw_bytes_per_param"] = number(bytes_per_parameter("fp32", "adamw"))
    seed = PRESETS["seed-2b"].setup
    seed_memory = breakdown(seed)
    v["seed_params_b"] = gettext(code, "{count:.1f} billion", count=seed.params / 1e9)
    v["seed_weights_gb"] = gb(seed_memory.weights)
    v["seed_grads_gb"] = gb(seed_memory.gradients)
    v["seed_optimizer_gb"] = gb(seed_memory.optimizer)
    v["seed_state_gb"] = gb(seed_memory.per_parameter_state)
    v["seed_total_gb"] = gb(seed_memory.total)
    long_seed = seed.with_(tokens=8 * seed.tokens)
    v["seed_long_tokens"] = number(long_seed.tokens)
    v["seed_long_activations_gb"] = gb(breakdown(long_seed).activations)
    gpt2 = PRESETS["gpt2-small"].setup
    gpt2_memory = breakdown(gpt2)
    v["gpt2_weights_gb"] = gb(gpt2_memory.weights)
    v["gpt2_activations_gb"] = gb(gpt2_memory.activations)
    v["gpt2_activation_ratio"] = one_decimal(gpt2_memory.activations / gpt2_memory.weights)
    v["gpt2_batch"] = number(gpt2.batch)
    v["gpt2_tokens"] = number(gpt2.tokens)

    # Lesson 2: the stepper's worked example.
    n = STEPPER_EXAMPLE_LAYERS
    v["step_n"] = number(n)
    for key, strategy in (("keep_all", "keep-all"), ("poor", "recompute-all"),
                          ("every", "every-layer"), ("sqrt", "sqrt")):
        result = simulate(strategy, n, 1.0)
        v[f"step_{key}_forwards"] = number(result.forwards)
        v[f"step_{key}_peak"] = number(result.peak)
    v["step_poor_extra"] = number(simulate("recompute-all", n, 1.0).recomputations)

    # Lesson 3: how many checkpoints.
    v["k16_sqrt"] = number(math.isqrt(16))
    v["k16_memory"] = number(segment_memory(16, 4))
    v["k1000_min"] = number(minimum_memory(1_000))
    v["k1000_sqrt"] = one_decimal(math.sqrt(1_000))
    v["chen_layers"] = number(facts.CHEN_LAYERS)
    v["chen_before_gb"] = unit(facts.CHEN_MEMORY_BEFORE_GB, 0, "GB")
    v["chen_after_gb"] = unit(facts.CHEN_MEMORY_AFTER_GB, 0, "GB")
    v["chen_factor"] = one_decimal(facts.CHEN_MEMORY_BEFORE_GB / facts.CHEN_MEMORY_AFTER_GB)
    v["chen_slowdown"] = percent(facts.CHEN_EXTRA_RUNTIME)
    v["internals_ratio"] = number(internals_ratio())
    v["layer_units"] = number(internals_ratio() + 1)
    v["score_term_head_dim"] = number(SCORE_HEAD_DIM)
    v["score_term_from_tokens"] = number(score_term_dominates_from(SCORE_HEAD_DIM))
    v["seed_segment_length"] = one_decimal(optimal_segment_length(L, 2, 34))
    v["seed_best_length"] = number(best_segment_length(L, 2, 34))
    v["every_layer_max_depth"] = number(every_layer_best_up_to(2, 34))
    v["two_layer_from_depth"] = number(every_layer_best_up_to(2, 34) + 1)
    for key, depth in (("gpt3", facts.GPT3["layers"]), ("l80", 80), ("seed", L)):
        one = uniform_segments_memory(depth, 1, 2, 34)
        two = uniform_segments_memory(depth, 2, 2, 34)
        v[f"{key}_depth"] = number(depth)
        v[f"{key}_every_units"] = number(one)
        v[f"{key}_pairs_units"] = number(two)
        v[f"{key}_pairs_saving"] = percent(1 - two / one)
        v[f"{key}_best_length"] = number(best_segment_length(depth, 2, 34))
    v["proto_peak_config"] = gettext(
        code,
        "{layers} layers, hidden {hidden}, {seq:,} tokens, batch {batch}, vocabulary {vocab:,}",
        **facts.PROTOTYPE_PEAK_CONFIG)
    for key, mib in facts.PROTOTYPE_PEAK_MIB.items():
        v[f"proto_peak_{key.replace('-', '_')}"] = unit(mib, 0, "MiB")
    v["proto_time_config"] = gettext(
        code,
        "{layers} layers, hidden {hidden}, {heads} heads, {seq:,} tokens, batch {batch}, "
        "vocabulary {vocab:,}", **facts.PROTOTYPE_TIME_CONFIG)
    low, high = facts.PROTOTYPE_EVERY_LAYER_SLOWDOWN
    v["proto_slowdown_low"] = f"{format_decimal(low, code, 2)}×"
    v["proto_slowdown_high"] = f"{format_decimal(high, code, 2)}×"
    for layers in (16, 1_024):
        rec = recursive_cost(layers)
        v[f"rec{layers}_peak"] = number(rec.peak_boundaries)
        v[f"rec{layers}_forwards"] = number(rec.forwards)
        v[f"rec{layers}_per_layer"] = one_decimal(rec.forwards / layers)
        v[f"sqrt{layers}_min"] = number(minimum_memory(layers))

    # Lesson 4: a language model.
    worked = transformer_activations(b, s, h, L)
    gpt3_config = facts.GPT3
    v["seed_batch"] = number(b)
    v["seed_seq"] = number(s)
    v["seed_hidden"] = number(h)
    v["seed_heads"] = number(a)
    v["seed_layers"] = number(L)
    v["seed_all_kept_formula"] = " × ".join(number(x) for x in (34, b, s, h, L))
    v["seed_inputs_formula"] = " × ".join(number(x) for x in (2, b, s, h, L))
    v["seed_one_layer_formula"] = " × ".join(number(x) for x in (34, b, s, h))
    v["seed_logits_formula"] = " × ".join(number(x) for x in (b, s, V, 4))
    v["gpt3_heads"] = number(gpt3_config["heads"])
    v["gpt3_seq"] = number(gpt3_config["seq"])
    v["gpt3_hidden"] = number(gpt3_config["hidden"])
    v["seed_all_kept_gb"] = gb(worked.all_kept)
    v["seed_inputs_gb"] = gb(worked.checkpoint_inputs)
    v["seed_one_layer_gb"] = gb(worked.one_layer_rebuilt)
    v["seed_checkpointed_gb"] = gb(worked.checkpointed)
    v["seed_saving"] = percent(worked.saving)
    full = layer_activation_bytes(b, s, h, a, efficient_attention=False)
    v["seed_layer_full_attention_gb"] = gb(full)
    v["seed_scores_share"] = percent(1 - layer_activation_bytes(b, s, h, a) / full)
    gpt3 = facts.GPT3
    v["gpt3_score_term"] = number(5 * gpt3["heads"] * gpt3["seq"] / gpt3["hidden"])
    v["gpt3_selective_saving"] = percent(selective_saving(gpt3["seq"], gpt3["hidden"],
                                                          gpt3["heads"]))
    v["gpt3_selective_flops"] = percent(facts.KORTHIKANTI_SELECTIVE_EXTRA_FLOPS, 1)
    v["korthikanti_full_low"] = percent(facts.KORTHIKANTI_FULL_RECOMPUTE_OVERHEAD[0])
    v["korthikanti_full_high"] = percent(facts.KORTHIKANTI_FULL_RECOMPUTE_OVERHEAD[1])
    ms = facts.KORTHIKANTI_22B_MS
    v["l22b_baseline_ms"] = unit(ms["baseline"], 1, "ms")
    v["l22b_full_ms"] = unit(ms["full"], 1, "ms")
    v["l22b_selective_ms"] = unit(ms["selective"], 1, "ms")
    v["l22b_full_extra"] = percent(percent_change(ms["baseline"], ms["full"]))
    v["l22b_selective_extra"] = percent(percent_change(ms["baseline"], ms["selective"]))

    inputs_larger = worked.checkpoint_inputs > worked.one_layer_rebuilt
    v["seed_larger_part"] = (gettext(code, "the kept layer inputs") if inputs_larger
                             else gettext(code, "the one layer being rebuilt"))
    v["gpt_constant"] = number(layer_constant())
    v["gpt_constant_no_dropout"] = number(layer_constant(dropout=False))
    llama = LLAMA3_8B_SHAPE
    v["llama_hidden"] = number(llama["hidden"])
    v["llama_mlp"] = number(llama["mlp"])
    v["llama_mlp_ratio"] = plain(llama["mlp"] / llama["hidden"])
    v["llama_heads"] = number(llama["heads"])
    v["llama_kv_heads"] = number(llama["kv_heads"])
    v["llama_kv_fraction"] = plain(llama["kv_heads"] / llama["heads"])
    v["llama_layers"] = number(llama["layers"])
    llama_parts = llama_layer_parts()
    v["llama_attention_units"] = plain(llama_parts["attention"])
    v["llama_mlp_units"] = plain(llama_parts["mlp"])
    v["llama_norm_units"] = plain(llama_parts["norms"])
    v["llama_constant"] = plain(llama_layer_constant())
    v["llama_every_layer_max_depth"] = number(every_layer_best_up_to(2, llama_layer_constant()))

    # Lesson 5: logits.
    logits = logits_bytes(b, s, V)
    v["seed_vocab"] = number(V)
    v["seed_logits_gb"] = gb(logits)
    v["seed_logits_with_grad_gb"] = gb(2 * logits)
    v["seed_loss_peak_gb"] = gb(3 * logits)
    v["logits_vs_checkpointed"] = one_decimal(logits / worked.checkpointed)
    v["gpt2_vocab"] = number(PRESETS["gpt2-small"].setup.vocab)
    v["seed_logits_gpt2_vocab_gb"] = gb(logits_bytes(b, s, PRESETS["gpt2-small"].setup.vocab))
    v["vocab_low"] = number(facts.COMMON_VOCAB_RANGE[0])
    v["vocab_high"] = number(facts.COMMON_VOCAB_RANGE[1])
    v["loss_peak_vocab"] = number(loss_peak_vocab())
    v["chunk_tokens"] = number(CHUNK_TOKENS)
    v["chunk_logits_gb"] = gb(logits_bytes(1, CHUNK_TOKENS, V))
    v["chunk_count"] = number(b * s // CHUNK_TOKENS)
    v["seed_layer_input_mb"] = unit(layer_input_bytes(b, s, h) / 1e6, 1, "MB")

    # Lesson 6: cost.
    v["max_overhead"] = percent(recompute_overhead())
    v["max_overhead_fraction"] = fraction_in_words(recompute_overhead(), code)
    v["extra_share_of_new_step"] = percent(extra_share_of_new_step())
    # with frozen weights (LoRA, QLoRA) backward is about one forward: a step of about 2
    v["frozen_overhead"] = percent(recompute_overhead(backward_ratio=1.0))
    v["frozen_overhead_fraction"] = fraction_in_words(recompute_overhead(backward_ratio=1.0),
                                                      code)
    demo = demo_default("cpu")
    counted = counted_demo_flops(demo)
    v["demo_model"] = gettext(code, "{layers} layers, hidden {hidden}, {seq} tokens × batch "
                                    "{batch}, vocabulary {vocab}", layers=demo.layers,
                              hidden=demo.hidden, seq=number(demo.seq_len), batch=demo.batch,
                              vocab=number(demo.vocab))
    v["demo_counted_none"] = format_decimal(counted["none"] / 1e9, code, 2)
    v["demo_counted_every"] = format_decimal(counted["every"] / 1e9, code, 2)
    v["demo_counted_overhead"] = percent(counted["every"] / counted["none"] - 1, 1)
    v["demo_counted_reentrant"] = percent(counted["reentrant"] / counted["none"] - 1, 1)
    v["demo_counted_every_dropout"] = format_decimal(counted["every_dropout"] / 1e9, code, 2)
    v["demo_counted_overhead_dropout"] = percent(counted["every_dropout"] / counted["none"] - 1,
                                                 1)
    v["demo_dropout"] = format_decimal(DEMO_DROPOUT, code, 1)
    # the same counts by torch 2.15's counter, which counts the CPU's fused attention
    counted = counted_demo_flops(demo, attention_counted=True)
    v["demo_counted_none_attention"] = format_decimal(counted["none"] / 1e9, code, 2)
    v["demo_counted_every_attention"] = format_decimal(counted["every"] / 1e9, code, 2)
    v["demo_counted_overhead_attention"] = percent(counted["every"] / counted["none"] - 1, 1)
    # the share of a GPT layer's linear-layer work early stop reruns without dropout: all
    # but the MLP's last linear (8 of 24 b·s·h²)
    linears = 24 * demo.batch * demo.seq_len * demo.hidden ** 2
    v["gpt_rerun_share"] = fraction_in_words(1 - early_stop_skips(demo) / linears, code)
    v["practice_low"] = percent(facts.PRACTICE_SLOWDOWN[0])
    v["practice_high"] = percent(facts.PRACTICE_SLOWDOWN[1])
    v["hf_slowdown"] = percent(facts.HF_SLOWDOWN)
    v["openai_factor"] = number(facts.OPENAI_LARGER_MODELS)
    v["openai_compute"] = percent(facts.OPENAI_EXTRA_COMPUTE)
    v["hf_version"] = facts.HF_TRANSFORMERS_VERSION
    v["hf_old_version"] = facts.HF_TRANSFORMERS_OLD_VERSION
    flops, link = facts.EXAMPLE_ACCELERATOR_FLOPS, facts.EXAMPLE_LINK_BYTES_PER_S
    v["example_tflops"] = number(flops / 1e12)
    v["example_link_gbs"] = number(link / 1e9)
    v["offload_all_from_hidden"] = number(offload_hidden_from(34, flops, link))
    v["offload_inputs_from_hidden"] = number(offload_hidden_from(2, flops, link))
    # Offloading beats one recomputed forward once the copies' exposed time (the copy out
    # beyond the forward, the copy back beyond the ~2x longer backward) is below one
    # forward: a copy of up to twice the forward's time, the threshold at twice the link.
    v["offload_all_beats_recompute_from"] = number(offload_hidden_from(34, flops, 2 * link))
    plan = course_examples()  # lesson 7's quiz: plans from the planner
    v["plan_layers"] = number(plan["layers"])
    v["plan_layer_gb"] = gb(plan["layer_bytes"])
    v["plan_none_gb"] = gb(plan["none_bytes"])
    v["plan_every_gb"] = gb(plan["every_bytes"])
    v["plan_half_none_gb"] = gb(plan["none_bytes"] / 2)
    v["plan_state_gb"] = gb(plan["state_bytes"])
    v["lora_bf16_layer_gb"] = gb(plan["lora_bf16_layer_bytes"])
    v["lora_autocast_layer_gb"] = gb(plan["lora_autocast_layer_bytes"])
    v["plan_some_layers"] = number(plan["lora_some_layers"])
    v["plan_some_extra"] = percent(plan["lora_some_extra"])
    v["plan_every_extra"] = percent(plan["lora_every_extra"])
    # Quiz items that apply an idea to a shape no lesson works through (tag `apply`).
    layer = llama_layer_constant()
    for key, depth in (("apply", APPLY_DEPTH), ("apply_shallow", APPLY_SHALLOW_DEPTH)):
        v[f"{key}_depth"] = number(depth)
        v[f"{key}_best_length"] = number(best_segment_length(depth, 2, layer))
        for length in (1, 2, 3):
            v[f"{key}_units_{length}"] = number(uniform_segments_memory(depth, length, 2, layer))
        v[f"{key}_sqrt_length"] = number(math.isqrt(depth))
    v["apply_frozen_overhead"] = percent(recompute_overhead(backward_ratio=1.0))
    v["apply_frozen_overhead_fraction"] = fraction_in_words(
        recompute_overhead(backward_ratio=1.0), code)
    v["apply_hidden"] = number(APPLY_HIDDEN)
    v["apply_vocab"] = number(APPLY_VOCAB)
    v["apply_wide_loss_peak_vocab"] = number(
        loss_peak_vocab(LOGITS_DEMO.replace(hidden=APPLY_HIDDEN)))
    _many_gpus(v, code, number, plain, percent, gb)
    v.update(picture_values(code, number, plain, percent, gb))
    v.update(toolbox_values(code, number, plain, percent, gb))
    v["lesson_count"] = lesson_count_text(code)
    v["further_reading"] = "\n".join(
        f"{number(place)}. [{source.title}]({source.url}), {gettext(code, source.authors)} — "
        f"{gettext(code, source.note)}."
        for place, source in enumerate(facts.SOURCES, start=1))
    return v


# Lesson 8's quiz: a shape and layout no lesson works through (tag `apply`).
APPLY_PARALLEL = {"hidden": 8_192, "heads": 64, "seq": 4_096, "layers": 80, "tp": 4, "pp": 4,
                  "microbatches": 16, "chunks": 2}
# Lesson 8's long-context example: Llama 3.1 70B's attention over context parallel ranks.
CP_MODEL = "llama-3.1-70b"
CP_SEQ = 131_072
CP_SIZE = 8
# Lesson 8's opening: the GPU whose memory the training state outgrows.
ONE_GPU_BYTES = 80e9


def parameters_that_fill(gpu_bytes: float, bytes_per_param: float) -> float:
    """How many parameters' state fills a GPU's memory by itself."""
    return gpu_bytes / bytes_per_param


def _many_gpus(v: dict[str, str], code: str, number: Callable[[float], str],
               plain: Callable[[float], str], percent: Callable[..., str],
               gb: Callable[[float], str]) -> None:
    """Lesson 8: Korthikanti et al.'s GPT-3 175B run (their Table 3, p. 10) across GPUs, from
    memory.parallel."""
    g, run = facts.GPT3, facts.GPT3_RUN
    s, h, a, layers, b = g["seq"], g["hidden"], g["heads"], g["layers"], run["micro_batch"]
    t, p, m, chunks = run["tp"], run["pp"], run["microbatches"], run["chunks"]
    v["par_layers"] = number(layers)
    v["par_t"] = number(t)
    v["par_p"] = number(p)
    v["par_m"] = number(m)
    v["par_chunks"] = number(chunks)
    v["par_stage_layers"] = number(layers // p)
    full_state = parameters_that_fill(ONE_GPU_BYTES, bytes_per_parameter("mixed", "adamw"))
    lora_base = parameters_that_fill(ONE_GPU_BYTES, PRECISIONS["bf16"].weight_bytes)
    v["par_gpu_full_billions"] = format_decimal(full_state / 1e9, code, 1)
    v["par_gpu_lora_billions"] = number(lora_base / 1e9)
    per_layer = {
        "none": layer_bytes(s, b, h, a), "tp": layer_bytes(s, b, h, a, t),
        "sp": layer_bytes(s, b, h, a, t, True),
        "sp_torch": layer_bytes(s, b, h, a, t, True, regather=False),
        "tp_selective": layer_bytes(s, b, h, a, t, recompute="selective"),
        "sp_selective": layer_bytes(s, b, h, a, t, True, "selective"),
        "full": layer_bytes(s, b, h, a, t, recompute="full"),
        "sp_full": layer_bytes(s, b, h, a, t, True, "full"),
    }
    for key, size in per_layer.items():
        v[f"par_layer_{key}_gb"] = gb(size)
    v["par_all_layers_gb"] = gb(per_layer["none"] * layers)
    v["par_sp_vs_tp"] = percent(1 - per_layer["sp"] / per_layer["tp"])
    v["par_present_share"] = percent(per_layer["sp_selective"] / per_layer["tp"])
    v["par_full_share"] = percent(per_layer["full"] / per_layer["tp"])
    for schedule in ("1f1b", "interleaved", "gpipe"):
        layout = Layout(tp=t, sp=True, pp=p, microbatches=m, schedule=schedule,
                        chunks=chunks if schedule == "interleaved" else 1)
        v[f"par_{schedule}_in_flight"] = plain(round(in_flight(layout), 2))
        for recompute in ("none", "selective", "full"):
            kept = activations_per_gpu(layout, layers=layers, s=s, b=b, h=h, a=a,
                                       recompute=recompute)
            v[f"par_{schedule}_{recompute}_gb"] = gb(kept)
    v["par_interleave_factor"] = format_decimal(interleave_factor(p, chunks), code, 2)
    v["par_bubble"] = percent((p - 1) / m)
    tp_sends = {x.collective: x for x in layer_transfers(Layout(tp=t), s=s, b=b, h=h)}
    message = 2 * tp_sends["all-reduce"].elements  # 16-bit values
    v["par_message_mb"] = number(message / 1e6)
    v["par_tp_collectives"] = number(tp_sends["all-reduce"].count)
    v["par_tp_layer_mb"] = number(tp_sends["all-reduce"].count * message / 1e6)
    sp_sends = {x.collective: x for x in layer_transfers(Layout(tp=t, sp=True), s=s, b=b, h=h)}
    regathers = sp_sends["all-gather"].count - sp_sends["reduce-scatter"].count
    v["par_sp_regathers"] = number(regathers)
    v["par_sp_regather_mb"] = number(regathers * 2 * sp_sends["all-gather"].elements / 1e6)
    q = APPLY_PARALLEL
    qs, qh, qa, ql, qt, qp = (q[k] for k in ("seq", "hidden", "heads", "layers", "tp", "pp"))
    for key in ("hidden", "heads", "seq", "layers", "tp", "pp", "microbatches", "chunks"):
        v[f"apply_par_{key}"] = number(q[key])
    v["apply_par_stage_layers"] = number(ql // qp)
    one = layer_bytes(qs, 1, qh, qa, qt, True, "selective")
    v["apply_par_layer_gb"] = gb(one)
    v["apply_par_layer_tp_gb"] = gb(layer_bytes(qs, 1, qh, qa, qt, False, "selective"))
    v["apply_par_layer_whole_gb"] = gb(layer_bytes(qs, 1, qh, qa, 1, False, "selective"))
    v["apply_par_layer_full_gb"] = gb(layer_bytes(qs, 1, qh, qa, qt, True, "full"))
    v["apply_par_stage_once_gb"] = gb(one * (ql // qp))
    for schedule in ("1f1b", "interleaved", "gpipe"):
        layout = Layout(tp=qt, sp=True, pp=qp, microbatches=q["microbatches"],
                        schedule=schedule, chunks=q["chunks"] if schedule == "interleaved"
                        else 1)
        v[f"apply_par_{schedule}_gb"] = gb(activations_per_gpu(
            layout, layers=ql, s=qs, b=1, h=qh, a=qa, recompute="selective"))
    v["apply_par_interleave_factor"] = format_decimal(interleave_factor(qp, q["chunks"]),
                                                      code, 3)
    # context parallelism: Llama 3.1 70B (grouped-query attention) at a long context
    arch = ARCHITECTURES[CP_MODEL]
    kv_hidden = arch.kv_heads * arch.hidden // arch.heads
    cp = {x.collective: x for x in layer_transfers(Layout(cp=CP_SIZE, dp=1), s=CP_SEQ, b=1,
                                                   h=arch.hidden, kv_hidden=kv_hidden)}
    v["cp_model"] = arch.label
    v["cp_seq"] = number(CP_SEQ)
    v["cp_size"] = number(CP_SIZE)
    v["cp_local_seq"] = number(CP_SEQ // CP_SIZE)
    v["cp_steps"] = number(CP_SIZE - 1)
    v["cp_kv_heads"] = number(arch.kv_heads)
    v["cp_heads"] = number(arch.heads)
    v["cp_step_mb"] = number(2 * cp["send/recv"].elements / 1e6)
    v["cp_kv_all_mb"] = number(2 * cp["send/recv"].elements * CP_SIZE / 1e6)
    v["cp_layer_forward_mb"] = number(2 * cp["send/recv"].elements * (CP_SIZE - 1) / 1e6)
    v["cp_layer_input_mb"] = number(2 * CP_SEQ // CP_SIZE * arch.hidden / 1e6)
