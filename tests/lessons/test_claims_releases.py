"""What the course says about torch 2.13, transformers 5 and accelerate matches those
releases, in English, German and Vietnamese: each test fails on the text the course had while
it taught transformers 4.57.1 and selective offloading."""

from __future__ import annotations

import re
from functools import partial
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

from lessons import facts
from lessons.checkpoint_math import every_layer_best_up_to
from lessons.decision import recommend
from lessons.document import load
from lessons.values import lesson_values

ROOT = Path(__file__).resolve().parents[2]
CODES = ("en", "de", "vi")


def text(path: str, code: str = "en") -> str:
    document = load(path, lesson_values(code), code)
    parts = [block.text for block in document.blocks] + list(document.takeaways)
    return "\n".join(parts)


def library_source(package: str, relative: str) -> str:
    spec = find_spec(package)
    assert spec is not None and spec.origin is not None
    return (Path(spec.origin).parent / relative).read_text(encoding="utf-8")


# --- Selective policies cannot offload in torch 2.13 -----------------------------------


class _CountMatmuls(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.calls += func is torch.ops.aten.mm.default
        return func(*args, **(kwargs or {}))


def _backward_matmuls(answer: CheckpointPolicy) -> int:
    """Matrix multiplies run during backward when a policy answers `answer` for the one mm."""
    weight = torch.randn(8, 8, requires_grad=True)
    x = torch.randn(4, 8, requires_grad=True)

    def policy(ctx, op, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        return answer if op is torch.ops.aten.mm.default else CheckpointPolicy.PREFER_RECOMPUTE

    y = checkpoint(lambda v: torch.mm(v, weight).sin(), x, use_reentrant=False,
                   context_fn=partial(create_selective_checkpoint_contexts, policy))
    with _CountMatmuls() as counter:
        y.sum().backward()
    return counter.calls


def test_eager_sac_recomputes_what_a_policy_asks_to_offload():
    """Two mms for the gradients; a third when the forward mm is recomputed."""
    saved = _backward_matmuls(CheckpointPolicy.MUST_SAVE)
    recomputed = _backward_matmuls(CheckpointPolicy.PREFER_RECOMPUTE)
    assert recomputed == saved + 1
    for offload in (CheckpointPolicy.MUST_CPU_OFFLOAD, CheckpointPolicy.PREFER_CPU_OFFLOAD):
        assert _backward_matmuls(offload) == recomputed
    partitioner = library_source("torch", "_functorch/partitioners.py")
    assert "CPU_OFFLOAD" not in partitioner  # the compiler reads only save/recompute


@pytest.mark.parametrize(("code", "cannot"), [
    ("en", "Selective policies cannot offload in PyTorch 2.13"),
    ("de", "Selektive Policies können in PyTorch 2.13 nicht auslagern"),
    ("vi", "Selective policy không thể offload trong PyTorch 2.13"),
])
def test_in_practice_says_policies_cannot_offload(code, cannot):
    body = text("in-practice", code)
    assert cannot in body
    assert "Selective policies can offload too" not in body
    assert "Auch selektive Policies können auslagern" not in body
    assert "Selective policy cũng có thể offload" not in body
    paragraph = next(p for p in body.split("\n") if cannot in p)
    assert "save_on_cpu" in paragraph and "MUST_CPU_OFFLOAD" in paragraph


# --- transformers 5 --------------------------------------------------------------------


def test_the_lessons_name_the_installed_transformers_release():
    assert version("transformers") == facts.HF_TRANSFORMERS_VERSION


def test_the_taught_transformers_names_are_the_installed_ones():
    """The names the lessons teach, read in the installed source (on the newest release
    too, by make test-latest)."""
    modeling = library_source("transformers", "modeling_utils.py")
    assert re.search(r"def activation_checkpointing_enable\(\s*self, "
                     r"activation_checkpointing_kwargs=None, every_n_layers: int = 1, "
                     r"offload: bool = False", modeling)
    assert 'activation_checkpointing_kwargs = {"use_reentrant": False}' in modeling
    assert "`gradient_checkpointing_enable` is deprecated and will be removed in v6" in modeling
    arguments = library_source("transformers", "training_args.py")
    for field in ("activation_checkpointing", "activation_checkpointing_kwargs"):
        assert f"    {field}: " in arguments


@pytest.mark.parametrize("code", CODES)
def test_hugging_face_section_teaches_transformers_5(code):
    body = text("in-practice", code)
    values = lesson_values(code)
    assert values["hf_version"] == facts.HF_TRANSFORMERS_VERSION
    for name in ("model.activation_checkpointing_enable()", "activation_checkpointing=True",
                 "every_n_layers", "offload=True", "use_reentrant=False", "FutureWarning",
                 "v6"):
        assert name in body, name
    assert values["hf_old_version"] in body  # what changed from 4.x is said
    assert "gradient_checkpointing_kwargs={\"use_reentrant\": False})" not in body
    assert "#43203" not in body  # the old "releases after it" hedge
    source = (ROOT / "lessons/content" / ("" if code == "en" else code) / "in-practice.md")
    code_blocks = re.findall(r"```python\n(.*?)```", source.read_text(), re.DOTALL)
    hf = next(block for block in code_blocks if "transformers" in block)
    assert "gradient_checkpointing" not in hf


@pytest.mark.parametrize("code", CODES)
def test_common_mistakes_bullet_names_the_release(code):
    body = text("in-practice", code)
    mistakes = body.split("\n")
    bullet = next(line for line in mistakes if "`checkpoint`" in line and "use_reentrant=False`"
                  in line and ("4.x" in line))
    assert "activation_checkpointing_enable()" in bullet


# --- SDPA, the compiler's region budget, QK^T cost -------------------------------------


@pytest.mark.parametrize("code", CODES)
def test_sdpa_has_no_weights_output_to_request(code):
    body = text("language-models", code)
    assert "need_weights=True" in body
    assert "no request for the attention weights" not in body
    assert "die Attention-Gewichte dürfen nicht angefordert werden" not in body
    assert "không yêu cầu trả về attention weight" not in body


def test_hf_sdpa_does_not_return_attentions():
    sdpa = library_source("transformers", "integrations/sdpa_attention.py")
    assert "`sdpa` attention does not support `output_attentions=True`." in sdpa


@pytest.mark.parametrize("code", CODES)
def test_region_budget_covers_a_whole_compiled_graph(code):
    body = text("language-models", code)
    paragraph = next(p for p in body.split("\n") if "region_activation_memory_budget" in p)
    assert "RuntimeError" in paragraph and "torch.compile" in paragraph
    graph = library_source("torch", "autograd/graph.py")
    assert "can only be \"\n            \"used inside a torch.compile region" in graph
    assert "must \"\n                f\"cover the entire forward of a graph" in \
        library_source("torch", "_functorch/partitioners.py")


def test_region_budget_raises_outside_compile():
    with pytest.raises(RuntimeError, match="inside a torch.compile region"):
        torch.autograd.graph.region_activation_memory_budget(0.5)


@pytest.mark.parametrize("code", CODES)
def test_score_matmuls_are_cheap_only_below_6h(code):
    body = text("language-models", code)
    assert "4·b·s²·h" in body and "s/(6h)" in body
    assert "with few FLOPs next to the layer's big ones" not in body


# --- Lessons 3 and 5, the decision figure ----------------------------------------------


@pytest.mark.parametrize("code", CODES)
def test_megatron_is_not_given_a_motive(code):
    body = text("how-many", code)
    for claim in ("This is why Megatron-LM offers", "Deshalb bietet Megatron-LM",
                  "Đây là lý do Megatron-LM"):
        assert claim not in body


@pytest.mark.parametrize(("code", "prediction"), [
    ("en", "predicts"), ("de", "sagt"), ("vi", "dự đoán")])
def test_the_loss_crossover_is_a_prediction(code, prediction):
    body = text("large-vocabularies", code)
    crossover = lesson_values(code)["loss_peak_vocab"]
    sentence = next(p for p in body.split("\n") if crossover in p)
    assert prediction in sentence
    assert "shows it measured" not in sentence and "zeigt das gemessen" not in sentence
    assert "cho thấy điều đó qua số đo" not in sentence


@pytest.mark.parametrize("code", CODES)
def test_hf_outputs_logits_stay_alive_at_the_loss(code):
    body = text("large-vocabularies", code)
    assert "outputs.logits" in body and "loss = model(**batch).loss" in body


def test_german_gqa_shares_and_vietnamese_names_the_layer_kind():
    german = text("language-models", "de")
    assert "teilt jeden K/V-Head unter mehreren Query-Heads auf" not in german
    assert "teilen sich mehrere Query-Heads jeden K/V-Head" in german
    vietnamese = text("language-models", "vi")
    assert "ở kích thước của GPT-3" not in vietnamese
    assert "của lớp kiểu GPT-3" in vietnamese


def test_decision_offers_selective_recomputation_only_with_its_condition():
    steps = recommend("layers", "little", 28)
    tools = [step.tool for step in steps]
    assert "Selective recomputation" not in tools
    selective = next(step for step in steps if step.tool.startswith("Selective"))
    assert "fused kernel" in selective.tool and "frees nothing" in selective.why
    assert tools.index("Checkpoint some layers") < tools.index(selective.tool)
    for code in ("de", "vi"):
        tool, why = selective.words(code)
        assert tool != selective.tool and why != selective.why


def test_curves_caption_uses_lesson_3s_depths():
    source = (ROOT / "ui/demo_curves.py").read_text(encoding="utf-8")
    deepest = every_layer_best_up_to(2, 34)
    assert f"for N ≤ {deepest} the bottom" in source
    assert f"from {deepest + 1} layers on, two-layer" in source
    assert "N ≤ 32" not in source


def test_fsdp_offload_is_not_called_zero_offload():
    """accelerate's FSDP `cpu_offload` is torch's CPUOffload(offload_params=True): parameters
    and gradients go to the CPU too, and the optimizer step runs there."""
    source = (ROOT / "ui/plan_words.py").read_text(encoding="utf-8")
    assert "The optimizer state lives in CPU memory (ZeRO-Offload)" not in source
    assert "FSDP's CPU offload keeps the parameter shards, their gradients" in source
    api = library_source("torch", "distributed/fsdp/api.py")
    assert ("offloads gradients to CPU as well, meaning that the optimizer step\n"
            "            runs on CPU") in api
    assert "CPUOffload(offload_params=self.cpu_offload)" in library_source(
        "accelerate", "utils/dataclasses.py")


# --- bf16=True is autocast; pure bf16 leaves it out --------------------------------------


def test_bf16_true_is_accelerates_autocast_and_peft_adapters_are_fp32():
    arguments = library_source("transformers", "training_args.py")
    assert re.search(r'elif self\.bf16:\n\s+self\.mixed_precision = "bf16"', arguments)
    mapping = library_source("peft", "mapping_func.py")
    assert "autocast_adapter_dtype: bool = True" in mapping


@pytest.mark.parametrize("code", CODES)
def test_in_practice_says_bf16_true_is_mixed_precision(code):
    """The bullet says what the planner's code prints: pure bf16 without bf16=True, and its
    per-layer figures are the planner's."""
    from memory import footprint as P
    from memory.architectures import PRESETS
    from planner.hf_code import hf_code

    body = text("in-practice", code)
    values = lesson_values(code)
    bullet = next(line for line in body.split("\n") if line.startswith("- **`bf16=True`"))
    for claim in ("dtype=torch.bfloat16", "mixed_precision=\"bf16\"", "torch.autocast",
                  "autocast_adapter_dtype=True", values["lora_bf16_layer_gb"],
                  values["lora_autocast_layer_gb"]):
        assert claim in bullet, claim
    p = P.PlannerInputs(PRESETS["llama-3.1-8b"], seq=4096, batch=1, precision="bf16",
                        tuning="lora", lora_targets="all-linear", lora_rank=16)
    assert "\n    bf16=True," not in hf_code(p)
    assert "dtype=torch.bfloat16" in hf_code(p)
    assert "\n    bf16=True," in hf_code(p.with_(precision="mixed"))
    from memory.layer import layer_bytes

    assert layer_bytes(p.tensors()) > layer_bytes(p.with_(precision="mixed").tensors())


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_many_gpus_states_table_2_and_the_measured_torch_accounting(code):
    """Lesson 8 prints Korthikanti et al.'s Table 2 rows and the pipeline factors in every
    language, its GPT-3 175B figures from memory.parallel, and torch's own sequence
    parallelism as tests/demos/test_parallel_runs.py measures it (the gathered inputs
    kept whole), naming the torch APIs it ran."""
    body = text("many-gpus", code)
    values = lesson_values(code)
    for formula in ("sbh(34 + 5as/h)", "sbh(10 + 24/t + 5as/(ht))", "sbh(34 + 5as/h)/t",
                    "sbh(10 + 24/t)", "34·sbh/t", "2·sbh", "(1 + (p−1)/(pv))",
                    "sbh(4 + 30/t + 5as/(ht))", "(p − 1)/m"):
        assert formula in body, (code, formula)
    for name in ("par_layer_none_gb", "par_layer_tp_gb", "par_layer_sp_gb",
                 "par_layer_sp_selective_gb", "par_layer_sp_torch_gb", "par_1f1b_none_gb",
                 "par_interleaved_selective_gb", "par_gpipe_full_gb", "cp_step_mb"):
        assert values[name] in body, (code, name)
    for api in ("`SequenceParallel`", "`PrepareModuleInput`", "`Schedule1F1B`",
                "`ScheduleGPipe`", "`fully_shard`", "`context_parallel`"):
        assert api in body, (code, api)
    # torch's refusal on a CPU, as tests/demos/test_parallel_runs.py measures it
    assert "does not have a sharding strategy registered" in body


BILLION = {"en": "billion", "de": "Milliarden", "vi": "tỷ"}


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_many_gpus_opens_with_where_one_gpu_stops_holding_the_state(code):
    """Lesson 8's first claim follows from the course's own bytes per parameter over an
    80 GB GPU: 18 for mixed precision with AdamW, 2 for LoRA's frozen 16-bit base weights
    (about 4.4 and 40 billion, printed from lessons.values)."""
    from i18n import format_decimal
    from lessons.memory_calculator import bytes_per_parameter
    from memory.precisions import PRECISIONS

    full = 80e9 / bytes_per_parameter("mixed", "adamw")
    lora = 80e9 / PRECISIONS["bf16"].weight_bytes
    assert round(full / 1e9, 1) == 4.4 and lora / 1e9 == 40
    values = lesson_values(code)
    assert values["par_gpu_full_billions"] == format_decimal(full / 1e9, code, 1)
    assert values["par_gpu_lora_billions"] == format_decimal(lora / 1e9, code, 0)
    body = text("many-gpus", code)
    for key in ("par_gpu_full_billions", "par_gpu_lora_billions"):
        assert f"{values[key]} {BILLION[code]}" in body, (code, key)
    assert f"35 {BILLION[code]}" not in body


def _torch_source(relative: str) -> str:
    spec = find_spec("torch")
    assert spec is not None and spec.origin is not None
    return (Path(spec.origin).parent / relative).read_text(encoding="utf-8")


CP_DEFAULT = {"en": "all-gathers by default", "de": "standardmäßig per All-Gather",
              "vi": "mặc định dùng all-gather"}


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_context_parallel_names_torchs_all_gather_default(code):
    """torch 2.13's context_parallel all-gathers the keys and values unless
    set_rotate_method("alltoall") picks the ring: each GPU then holds the whole sequence's
    keys and values during attention, cp times its own block."""
    from torch.distributed.tensor.experimental._context_parallel import _attention

    assert _attention._ContextParallelOptions().rotate_method is (
        _attention._RotateMethod.ALL_GATHER)
    body = text("many-gpus", code)
    values = lesson_values(code)
    assert CP_DEFAULT[code] in body and 'set_rotate_method("alltoall")' in body
    assert values["cp_kv_all_mb"] in body and values["cp_step_mb"] in body


BACKWARD_FIRST = {"en": "backward first, as torch's `Schedule1F1B`",
                  "de": "der Backward zuerst, wie torchs `Schedule1F1B`",
                  "vi": "backward trước, như `Schedule1F1B` của torch"}


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_1f1b_is_described_backward_first_as_torch_runs_it(code):
    """Schedule1F1B: p − stage warm-up forwards, then a steady state that runs one backward
    before each further forward."""
    source = _torch_source("distributed/pipelining/schedules.py")
    one_f_one_b = source[source.index("class Schedule1F1B"):]
    assert "self._num_stages - self._stage.stage_index" in one_f_one_b
    steady = one_f_one_b[one_f_one_b.index("# 1B1F phase"):]
    assert steady.index("backward_one_chunk") < steady.index("forward_one_chunk")
    assert BACKWARD_FIRST[code] in text("many-gpus", code)


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_sequence_parallelism_names_megatrons_regather_and_its_bytes(code):
    """Megatron keeps the projections' inputs split and all-gathers them again in backward:
    2 more all-gathers of s·b·h per layer and micro-batch, as memory.parallel counts."""
    from memory.parallel import Layout, layer_transfers

    sends = {x.collective: x for x in layer_transfers(Layout(tp=8, sp=True), s=2048, b=1,
                                                      h=12288)}
    assert sends["all-gather"].count - sends["reduce-scatter"].count == 2
    values = lesson_values(code)
    assert values["par_sp_regathers"] == "2"
    body = text("many-gpus", code)
    assert values["par_sp_regather_mb"] in body and "4·sbh(1 − 1/t)" in body
