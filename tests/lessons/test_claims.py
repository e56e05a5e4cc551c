"""Claims a review of the lessons found wrong or misleading: each test fails on the old text."""

from __future__ import annotations

import re

import pytest

from lessons import catalog
from lessons.checkpoint_math import (
    best_segment_length,
    every_layer_best_up_to,
    layer_constant,
    layer_constant_parts,
    llama_layer_constant,
    llama_layer_parts,
    uniform_segments_memory,
)
from lessons.decision import recommend
from lessons.document import DocumentError, content_file, parse
from lessons.values import lesson_values
from tests.lessons.test_documents import all_text


def test_every_layer_is_best_only_up_to_a_depth():
    assert every_layer_best_up_to(2, 34) == 35
    assert best_segment_length(28, 2, 34) == 1
    assert best_segment_length(96, 2, 34) == 2 and best_segment_length(80, 2, 34) == 2
    assert (uniform_segments_memory(96, 1, 2, 34), uniform_segments_memory(96, 2, 2, 34)) == (
        226, 164)
    assert (uniform_segments_memory(80, 1, 2, 34), uniform_segments_memory(80, 2, 2, 34)) == (
        194, 148)


def test_how_many_states_the_depth_condition():
    text = all_text("how-many")
    values = lesson_values()
    assert "the best segment is a single layer: checkpoint every layer boundary" not in text
    assert f"up to {values['every_layer_max_depth']} layers" in text
    assert values["gpt3_pairs_units"] in text and values["gpt3_every_units"] in text
    takeaways = " ".join(parse("how-many", content_file("how-many").read_text(),
                               values).takeaways)
    assert values["every_layer_max_depth"] in takeaways


def test_language_models_compares_the_two_parts_by_their_values():
    """It once said the one rebuilt layer outweighs all checkpoints (0.14 vs 0.23 GB)."""
    text = all_text("language-models")
    assert "bigger share than all the checkpoints" not in text
    values = lesson_values()
    assert values["seed_larger_part"] == "the kept layer inputs"
    assert f"the larger part is {values['seed_larger_part']}" in text


def test_selective_recomputation_is_taught_the_right_way_round():
    text = all_text("language-models")
    assert "*recomputes* the scores" in text
    assert "that is a slip" in text


def test_a_gpt_layer_keeps_34_and_a_llama_layer_49():
    assert layer_constant() == 34
    assert layer_constant_parts() == {"attention": 11, "mlp": 19, "norms": 4}
    assert layer_constant(dropout=False) == 32
    # Llama-3-8B (the planner's tensor list): GQA 8 of 32 heads, SwiGLU width 14,336 = 3.5 h,
    # no dropout, RMSNorm in fp32 (its fp32 input 4, normalised value 2, output 2, twice).
    assert llama_layer_parts() == {"attention": 2 + 4 * 0.25 + 2, "mlp": 8 * 3.5,
                                   "norms": 2 * (4 + 2 + 2)}
    assert llama_layer_constant() == 49
    # Llama-2-7B: full multi-head attention, width 11,008.
    assert llama_layer_constant(4_096, 11_008, 32, 32) == pytest.approx(16 + 8 + 8 * 2.6875)
    assert lesson_values()["llama_constant"] in all_text("language-models")


def test_cost_says_a_third_is_a_flop_count_not_a_bound():
    text = all_text("cost-and-correctness")
    assert "at most" not in text
    assert "usually a little lower" not in text
    assert "not a bound on time" in text
    assert lesson_values()["extra_share_of_new_step"] == "25%"


def test_cost_teaches_early_stop_reentrant_and_frozen_weights():
    """Lesson 6 follows what torch does: non-reentrant checkpoint stops early, reentrant
    reruns whole layers, and with frozen weights one more forward is about half a step."""
    values = lesson_values()
    text = all_text("cost-and-correctness")
    for needle in ("early stop", "use_reentrant=True", "FlopCounterMode",
                   values["demo_counted_overhead"], values["demo_counted_reentrant"],
                   values["frozen_overhead"], "+" + values["plan_every_extra"]):
        assert needle in text, needle
    assert values["frozen_overhead"] == "50%"
    assert "exactly **one extra forward pass**" not in all_text("how-it-works")
    assert "set_checkpoint_early_stop" in all_text("how-it-works")


def test_the_lessons_count_is_torchs_count():
    """The counts lesson 6 states for the Compare demo's default model are what torch's
    FLOP counter counts around one real step: without checkpointing, every layer
    checkpointed (non-reentrant, early stop), and early stop off (a whole rerun, as
    reentrant checkpoint does)."""
    import torch
    from torch.utils.checkpoint import set_checkpoint_early_stop
    from torch.utils.flop_counter import FlopCounterMode

    from demos.model import build_model, make_batch
    from lessons.values import counted_demo_flops
    from memory.config import demo_default
    from memory.strategies import parse_strategy
    from memory.theory import plan_for

    torch.set_num_threads(1)
    cfg = demo_default("cpu")
    model = build_model(cfg)
    idx, tgt = make_batch(cfg)

    def count(strategy: str) -> int:
        model.zero_grad(set_to_none=True)
        with FlopCounterMode(display=False) as counter:
            model(idx, tgt, plan_for(cfg, parse_strategy(strategy))).backward()
        return counter.get_total_flops()

    from demos.installed_torch import counter_counts_attention

    # torch 2.15's counter counts the CPU's fused attention too (lesson 6 names both)
    predicted = counted_demo_flops(cfg, attention_counted=counter_counts_attention("cpu"))
    assert count("none") == pytest.approx(predicted["none"], rel=0.01)
    assert count("every-layer") == pytest.approx(predicted["every"], rel=0.01)
    with set_checkpoint_early_stop(False):
        assert count("every-layer") == pytest.approx(predicted["reentrant"], rel=0.01)


def test_cost_does_not_recommend_mixed_precision_for_state():
    text = all_text("cost-and-correctness")
    assert "For them, use mixed precision" not in text
    assert "8-bit optimizers" in text and "from 4 to 6 bytes" in text


def test_large_vocabularies_counts_three_tensors_at_the_loss():
    text = all_text("large-vocabularies")
    values = lesson_values()
    assert values["seed_loss_peak_gb"] == "6.1 GB"
    assert values["seed_loss_peak_gb"] in text
    assert "Why checkpointing cannot help here" not in text
    assert "chunk-wise recomputation" in text.lower() or "recomputation applied to the logits" \
        in text


def test_sdpa_stores_no_scores_only_with_a_fused_kernel():
    text = all_text("language-models")
    assert "only when it picks a fused kernel" in text


@pytest.mark.parametrize("path", catalog.LESSON_PATHS)
def test_no_typed_lesson_numbers_remain(path):
    source = content_file(path).read_text(encoding="utf-8")
    assert not re.search(r"\([Ll]esson \d\)|[Ll]esson \d\b", source), path


def test_lesson_links_render_from_the_catalog_and_unknown_ones_fail():
    document = parse("x", "See {{lesson:how-many}}.", {})
    assert document.blocks[0].text == ("See [lesson 3, *Where to put checkpoints*]"
                                       "(/how-many?lang=en).")
    with pytest.raises(DocumentError, match="unknown lesson"):
        parse("x", "See {{lesson:nowhere}}.", {})


def test_the_lesson_count_comes_from_the_catalog():
    assert catalog.lesson_count_text() == "ten lessons"
    assert catalog.count_in_words(12) == "twelve"
    assert catalog.count_in_words(1_024, "de") == "1.024"


def test_decision_procedure_orders_the_tools():
    tools = [step.tool for step in recommend("layers", "little", 80)]
    assert tools[0] == "Measure first"
    assert tools.index("Checkpoint some layers") < tools.index("Checkpoint every layer")
    assert "Segments of two layers" in tools
    assert "Segments of two layers" not in [s.tool for s in recommend("layers", "lot", 28)]
    assert "Chunked or fused linear + cross-entropy" in [s.tool for s in recommend("loss")]
    assert "Checkpoint every layer" not in [s.tool for s in recommend("state")]
    with pytest.raises(ValueError):
        recommend("nowhere")


# ---------------------------------------------------------------- the independent review

def _reentrant_chain() -> tuple[list[str], list[bool]]:
    """A frozen embedding, three reentrant-checkpointed blocks and a head (as in LoRA)."""
    import warnings

    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    embedding = nn.Embedding(10, 8).requires_grad_(False)
    blocks = [nn.Linear(8, 8) for _ in range(3)]
    head = nn.Linear(8, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hidden = embedding(torch.tensor([1, 2, 3]))
        for block in blocks:
            hidden = checkpoint(block, hidden, use_reentrant=True)
    head(hidden).sum().backward()  # the head trains: its weight requires grad
    return [str(w.message) for w in caught], [b.weight.grad is not None for b in blocks]


def test_reentrant_mode_warns_and_no_checkpointed_block_trains():
    messages, trained = _reentrant_chain()
    assert any("requires_grad" in m for m in messages)  # a warning, not silence
    assert trained == [False, False, False]  # not only the first block
    text = all_text("in-practice")
    assert "silently" not in text
    assert "the first block's input does not" not in text
    assert "no checkpointed block gets gradients" in text
    assert "(torch only warns)" in text and "with only a warning" in text


def test_use_cache_is_state_a_recomputed_forward_would_extend():
    text = all_text("in-practice")
    assert "A recomputed forward would append them again" in text
    # nothing fails: transformers' comment, and the measurement in test_claims_newest
    assert "the checkpoint stops with a `CheckpointError`" not in text
    assert "each position twice" in text


def test_activation_memory_budget_is_placed_between_inputs_only_and_the_default():
    assert "keep that fraction of the activations" not in all_text("language-models")
    assert "at 0 it saves only the compiled graph's inputs" in all_text("language-models")
    assert "keep about half" not in all_text("in-practice")
    assert "region_activation_memory_budget" in all_text("language-models")


def test_megatron_recompute_method_always_comes_with_full_granularity():
    for path in catalog.LESSON_PATHS:
        text = all_text(path)
        assert text.count("--recompute-method") == text.count(
            "--recompute-granularity full --recompute-method"), path
    assert "--recompute-granularity full --recompute-method block" in all_text("how-many")
    language_models = all_text("language-models")
    assert "Hugging Face Transformers and Megatron-LM put the checkpoints" not in \
        language_models
    assert "`--recompute-activations` is the selective recomputation" in language_models


def test_fsdp_nesting_not_call_order_and_both_fsdp_versions():
    text = all_text("in-practice")
    assert "Wrap in this order" not in text
    assert "The nesting matters, not the order of the calls" in text
    assert "(FSDP1)" in text and "(FSDP2)" in text and "no second gather" in text


def test_recursion_rebuilds_each_layer_about_half_log2_n_plus_one_times():
    from lessons.checkpoint_math import recursive_cost

    layers = 1_024
    rebuilt_per_layer = recursive_cost(layers).forwards / layers - 1  # minus the first pass
    assert rebuilt_per_layer == pytest.approx(0.5 * 10 + 1)
    text = all_text("how-many")
    assert "recomputed about ½·log₂N + 1 times" in text
    assert "recomputed about log N times" not in text


def test_offloading_is_weighed_against_a_recomputed_forward_and_needs_a_side_stream():
    values = lesson_values()
    text = all_text("in-practice")
    assert "`save_on_cpu` by itself hides nothing" in text
    assert f"from about **{values['offload_all_beats_recompute_from']}**" in text
    # Break-even where the copy takes twice the forward: half the width at which it hides.
    assert float(values["offload_all_beats_recompute_from"].replace(",", "")) == pytest.approx(
        float(values["offload_all_from_hidden"].replace(",", "")) / 2, abs=1)


def test_smaller_review_points_are_worded_as_the_sources_say():
    in_practice = all_text("in-practice")
    assert "Megatron's sequence parallelism, ring attention" not in in_practice
    assert "`--context-parallel-size`" in in_practice
    assert "nested checkpoints" not in in_practice
    assert "treats these kernels as compute-intensive" not in in_practice
    assert "one matrix multiply and a softmax" not in all_text("language-models")
    assert "pushed Korthikanti" not in all_text("cost-and-correctness")
    assert "do exactly this" not in all_text("large-vocabularies")
    assert "(16-bit activations, efficient attention)" in all_text("why-memory")
    assert "`every_n_layers`" in all_text("how-many")


def test_the_openai_source_links_to_the_openai_repository():
    from lessons import facts

    source = next(s for s in facts.SOURCES if s.key == "openai2018")
    assert source.url == "https://github.com/openai/gradient-checkpointing"


def test_llama_count_names_its_gqa_kernel_and_policies_can_offload():
    from torch.utils.checkpoint import CheckpointPolicy

    assert "`enable_gqa=True`" in all_text("language-models")
    assert {"MUST_CPU_OFFLOAD", "PREFER_CPU_OFFLOAD"} <= set(CheckpointPolicy.__members__)
    assert "`MUST_CPU_OFFLOAD` and `PREFER_CPU_OFFLOAD`" in all_text("in-practice")
