"""Lesson 10 (the practitioner's toolbox): its numbers come from memory/toolbox.py and the
installed libraries' own constants, and the facts a CPU can show are measured by the
engine the lesson's page runs on this server (demos/toolbox.py, demos/toolbox_runs.py),
checked here: autocast's kept dtypes, LoRA's kept inputs, a packed row against a padded
batch, HFU/MFU from counted FLOPs, a CheckpointError with debug=True; and with saved-tensor
hooks here, the checkpoint wrapper's names and the MoE router's fp32 probabilities."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from demos.toolbox import autocast_dtypes, lora_saved, once, packing, saved_while, storages_of
from demos.toolbox_runs import checkpoint_error, flop_utilization, hfu_over_mfu
from i18n.languages import SUPPORTED
from lessons.catalog import lesson, number
from lessons.document import ANY_PLACEHOLDER, content_file, load
from lessons.toolbox_values import ALLOCATOR, FLEX_BLOCK, MIXTRAL, MOE
from lessons.values import lesson_values
from memory.toolbox import (
    bubble_fraction,
    bubble_units,
    causal_work_per_rank,
    dropped_assignments,
    expert_capacity,
    first_stage_in_flight,
    lora_kept_numbers,
    lora_own_inputs,
)
from tests.lessons.test_documents import all_text, document_text

PATH = "toolbox"
CODES = [language.code for language in SUPPORTED]
TORCH = Path(torch.__file__).parent
CONFIGS = Path(__file__).parents[1] / "demos" / "hf_configs"


def test_it_is_lesson_ten_and_the_last():
    assert number(PATH) == 10
    assert lesson(PATH).title == "The practitioner's toolbox"


@pytest.mark.parametrize("code", CODES)
def test_it_renders_in_every_language(code):
    document = load(PATH, lesson_values(code), code)
    text = document_text(document)
    assert not ANY_PLACEHOLDER.search(text)
    assert len(document.takeaways) == 5
    assert text.count("\n## ") >= 9
    assert lesson_values(code)["tb_hfu_ratio_full"] in text


def test_no_figure_is_typed_in():
    source = content_file(PATH).read_text(encoding="utf-8")
    for typed in ("21.9%", "1.329", "67.2 GB", "52.1 GB", "268.4 MB", "4,098", "38,912"):
        assert typed not in source, typed


def test_the_allocator_sizes_are_the_installed_headers():
    header = (TORCH / "include/c10/core/AllocatorConfig.h").read_text()
    for name, size in ALLOCATOR.items():
        assert re.search(rf"constexpr size_t {name} = {size};", header), name
    assert "use_expandable_segments_{false}" in header  # off by default
    from torch.nn.attention import flex_attention

    assert flex_attention._DEFAULT_SPARSE_BLOCK_SIZE == FLEX_BLOCK


def test_bubbles_and_what_recomputation_does_to_them():
    assert bubble_fraction(8, 32) == 7 / 32 and bubble_fraction(8, 32, 2) == 7 / 64
    assert bubble_units(8, recompute=True) / bubble_units(8) == pytest.approx(4 / 3)
    assert first_stage_in_flight("gpipe", 8, 32) == 32
    assert first_stage_in_flight("1f1b", 8, 32) == 8
    source = (TORCH / "distributed/pipelining/schedules.py").read_text()
    assert "class ScheduleZBVZeroBubble" in source
    assert "class ScheduleInterleavedZeroBubble" in source
    assert "time forward == time backward input == time backward weights" in source
    backward = (TORCH / "distributed/pipelining/_backward.py").read_text()
    assert (
        "retain_graph=True"
        in backward.split("def stage_backward_input")[1].split("def stage_backward_weight")[0]
    )


def test_capacity_and_load_balance():
    assert expert_capacity(4_096, 128, 8, 1.25) == 320
    assert dropped_assignments([512, 100], 320) == 192
    assert causal_work_per_rank(8, balanced=True) == pytest.approx([1.0] * 8)
    contiguous = causal_work_per_rank(8, balanced=False)
    assert contiguous[-1] == pytest.approx(15 / 8) and contiguous[0] == pytest.approx(1 / 8)
    from torch.distributed.tensor.experimental._context_parallel import (
        _attention,
        _load_balancer,
    )

    options = _attention._ContextParallelOptions()
    assert options.enable_load_balance and options.rotate_method.name == "ALL_GATHER"
    balancer = _load_balancer._HeadTailLoadBalancer(16, 2, "cpu")
    # 4 chunks of 4: rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2
    assert balancer._generate_indices()[0].tolist() == [
        0,
        1,
        2,
        3,
        12,
        13,
        14,
        15,
        4,
        5,
        6,
        7,
        8,
        9,
        10,
        11,
    ]


def test_the_moe_examples_are_the_families_configs():
    qwen = json.loads((CONFIGS / "qwen3-235b-a22b.json").read_text())
    assert (qwen["hidden_size"], qwen["num_experts"], qwen["num_experts_per_tok"]) == (
        MOE["hidden"],
        MOE["experts"],
        MOE["top_k"],
    )
    mixtral = json.loads((CONFIGS / "mixtral-8x7b.json").read_text())
    assert (mixtral["num_local_experts"], mixtral["num_experts_per_tok"]) == (
        MIXTRAL["experts"],
        MIXTRAL["top_k"],
    )


def test_mixtral_keeps_fp32_router_probabilities_and_drops_no_token():
    from transformers import MixtralConfig
    from transformers.models.mixtral import modeling_mixtral

    cfg = MixtralConfig(
        hidden_size=16,
        intermediate_size=32,
        num_local_experts=4,
        num_experts_per_tok=2,
        router_jitter_noise=0.0,
    )
    torch.manual_seed(0)
    block = modeling_mixtral.MixtralSparseMoeBlock(cfg).to(torch.bfloat16)
    for p in block.parameters():
        torch.nn.init.normal_(p, std=0.5)
    x = torch.randn(1, 12, 16, dtype=torch.bfloat16, requires_grad=True)
    saved, out = saved_while(lambda: block(x))
    assert ("float32", (12, 4)) in [(item.dtype, item.shape) for item in saved]  # softmax's
    assert bool((out.abs().sum(-1) > 0).all())  # every token reached its experts
    for module in ("mixtral/modeling_mixtral.py", "qwen3_moe/modeling_qwen3_moe.py"):
        source = (Path(modeling_mixtral.__file__).parents[1] / module).read_text()
        assert "capacity" not in source.lower()


def test_autocast_on_the_cpu_keeps_what_the_lesson_says():
    kept: dict[str, set[tuple[str, str]]] = {}
    outputs = {}
    for row in autocast_dtypes("bfloat16"):
        kept.setdefault(row["op"], set()).add((row["role"], row["dtype"]))
        outputs[row["op"]] = row["output_dtype"]
    assert kept["linear"] == {("input-copy", "bfloat16"), ("weight-copy", "bfloat16")}
    assert kept["softmax"] == {("output", "bfloat16")}
    assert ("input", "bfloat16") in kept["layer_norm"] and ("input", "bfloat16") in kept["gelu"]
    assert {dtype for _, dtype in kept["rms_norm"]} == {"float32"}
    assert outputs["cross_entropy"] == "float32"
    assert "float32" in {dtype for _, dtype in kept["cross_entropy"]}
    lists = (TORCH / "testing/_internal/autocast_test_lists.py").read_text()
    cuda_fp32 = lists.split("class AutocastCPUTestLists")[0].split("self.torch_fp32")[1]
    for op in ("softmax", "log_softmax", "layer_norm", "rms_norm", "group_norm"):
        assert f'("{op}"' in cuda_fp32, op


def test_lora_keeps_what_lora_kept_numbers_counts():
    rows = lora_saved()
    for case in ("base", "fp32", "fp32-dropout", "same", "same-dropout"):
        kept = [row for row in rows if row["case"] == case]
        roles = [row["role"] for row in kept]
        width = kept[0]["width"]
        if case == "base":  # the frozen linear keeps its weight, not its input
            assert roles == ["weight"]
            continue
        counted = lora_kept_numbers(width, case.startswith("fp32"), "dropout" in case)
        assert roles.count("copy") == (counted["copy"] > 0), case
        assert roles.count("mask") == (counted["mask"] > 0), case
        assert ("input" in roles) == (case == "same"), case  # lora_A keeps x itself
        if case.startswith("fp32"):
            assert {row["dtype"] for row in kept if row["role"] in ("copy", "mask")} == {"float32"}


def test_16_bit_lora_without_dropout_makes_a_frozen_layer_keep_its_inputs():
    """A frozen bf16 Llama layer against the same layer with 16-bit LoRA on every linear
    and no dropout: the difference is lora_own_inputs (x itself, once per distinct input)
    plus lora_A's rank-wide outputs, which lora_B keeps."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    hidden, mlp, rank, tokens = 64, 224, 4, 64
    config = LlamaConfig(
        hidden_size=hidden,
        intermediate_size=mlp,
        num_attention_heads=4,
        num_key_value_heads=4,
        num_hidden_layers=1,
        vocab_size=64,
    )
    config._attn_implementation = "sdpa"

    class Layer(torch.nn.Module):  # peft wants a model around the layer
        def __init__(self):
            super().__init__()
            self.layer = LlamaDecoderLayer(config, 0)

        def forward(self, x, position_embeddings):
            return self.layer(x, position_embeddings=position_embeddings, attention_mask=None)

    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = Layer().to(torch.bfloat16).requires_grad_(False)
        x = torch.randn(1, tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    rope = LlamaRotaryEmbedding(config)
    position = tuple(t.to(torch.bfloat16) for t in rope(x, torch.arange(tokens)[None]))

    def kept_bytes(module):  # each storage once, the weights left out
        saved, _ = saved_while(lambda: module(x, position))
        return sum(item.nbytes for item in once(saved, storages_of(list(module.parameters()))))

    frozen = kept_bytes(model)
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    lora = get_peft_model(
        model,
        LoraConfig(r=rank, target_modules=targets, lora_dropout=0.0),
        autocast_adapter_dtype=False,
    )
    extra = kept_bytes(lora) - frozen
    assert extra == 2 * tokens * (lora_own_inputs(hidden, mlp) + len(targets) * rank)


def test_a_packed_row_keeps_what_a_padded_batch_keeps_for_its_real_tokens():
    rows = {row["layout"]: row for row in packing("two")}
    padded, packed = rows["padded"], rows["packed"]
    assert packed["slots"] == packed["real_tokens"] == 37 and padded["slots"] == 60
    # what grows with the tokens, per slot: the same but for rotary's per-position tables
    assert packed["token_bytes"] / padded["token_bytes"] == pytest.approx(37 / 60, rel=0.05)
    assert padded["max_diff"] < 1e-4 and packed["max_diff"] < 1e-4  # documents kept apart
    assert packed["square_bytes"] > 0  # the document mask, s × s
    for leak in ("packed-cache", "packed-no-positions"):  # no document mask: they mix
        assert rows[leak]["max_diff"] > 1e-2 and rows[leak]["square_bytes"] == 0, leak
    from transformers import TrainingArguments, masking_utils, trainer

    positions = torch.tensor([list(range(12)) + list(range(4))])
    assert masking_utils.find_packed_sequence_indices(positions).tolist() == [[0] * 12 + [1] * 4]
    # packed documents are looked for only without a mask and without a cache; the Trainer
    # sets the model's use_cache from its arguments, False by default
    source = Path(masking_utils.__file__).read_text()
    assert "if position_ids is not None and attention_mask is None and cache is None:" in source
    assert "self.model.config.use_cache = self.args.use_cache" in Path(trainer.__file__).read_text()
    assert TrainingArguments.__dataclass_fields__["use_cache"].default is False


def test_checkpointing_counts_hardware_flops_beyond_the_model_flops():
    rows = flop_utilization(2, repeats=1)
    for row in rows:
        assert row["flops"] == row["predicted_flops"], row["strategy"]
    assert 1.0 < hfu_over_mfu(rows) < 4 / 3  # early stop reruns less than a whole forward


def test_a_checkpoint_error_with_debug_shows_both_runs():
    from torch.utils.checkpoint import checkpoint

    rows = checkpoint_error()
    debug = {}
    for row in rows:
        debug.setdefault((row["message"], row["part"]), []).append(row["line"])
    forward = " ".join(debug[("debug", "forward")])
    recompute = " ".join(debug[("debug", "recompute")])
    assert "aten.cos" in forward and "aten.cos" not in recompute  # the op the rerun skipped
    assert "debug=True" in " ".join(debug[("debug", "head")])
    assert debug[("debug", "error")][0].startswith("ERROR: Detected non-determinism")
    assert "A different number of tensors was saved" in debug[("plain", "head")][0]
    with pytest.raises(ValueError, match="incompatible with non-default context_fn"):
        checkpoint(
            torch.sin,
            torch.randn(4, requires_grad=True),
            use_reentrant=False,
            debug=True,
            context_fn=lambda: (torch.no_grad(), torch.no_grad()),
        )


def test_the_wrapper_hides_its_prefix_from_state_dict_not_from_named_modules():
    from torch.distributed._composable import checkpoint as composable
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    def model():
        return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))

    wrapped = torch.nn.Sequential(checkpoint_wrapper(model()))
    assert "0.0.weight" in wrapped.state_dict()
    assert "0.weight" in dict(wrapped[0].named_parameters())  # the wrapper's own override
    assert "0._checkpoint_wrapped_module.0.weight" in dict(wrapped.named_parameters())
    assert "0._checkpoint_wrapped_module.0" in dict(wrapped.named_modules())
    assert "0._checkpoint_wrapped_module.1.running_mean" in dict(wrapped.named_buffers())
    plain = torch.nn.Sequential(model())
    composable(plain[0])
    assert "0.0" in dict(plain.named_modules()) and "0.0.weight" in plain.state_dict()


def test_the_lesson_cites_what_the_sources_name():
    text = all_text(PATH)
    for name in (
        "max_memory_reserved",
        "expandable_segments:True",
        "_record_memory_history",
        "ScheduleZBVZeroBubble",
        "ScheduleInterleavedZeroBubble",
        'set_rotate_method("alltoall")',
        "_HeadTailLoadBalancer",
        "DataCollatorWithFlattening",
        "find_packed_sequence_indices",
        "cu_seqlens",
        "create_block_mask",
        "CheckpointError",
        "set_checkpoint_debug_enabled",
        "_checkpoint_wrapped_module",
        "torch.distributed._composable.checkpoint",
        "has not checked",
        "no capacity factor",
        "use_cache=True",
        "_preprocess_mask_arguments",
        "is_fused_kernel_acceptable",
    ):
        assert name in text, name
