"""What the course says holds on the pinned libraries (torch 2.13, transformers 5.24, peft
0.21.2, accelerate 1.15) and names what the newer releases change (torch 2.14/2.15,
transformers 5.25, accelerate 1.16), in English, German and Vietnamese: early stop as torch
applies it, what the FLOP counter counts, saved-tensor hooks, PEFT's 4-bit helper, FSDP's
checkpoint wrapper, the generation cache, and lesson 7's "Measure it yourself" and
questions. Each test fails on the text the course had before."""

from __future__ import annotations

import re
import warnings
from importlib.util import find_spec
from pathlib import Path

import pytest
import torch
from torch.utils import flop_counter
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode

from demos.installed_torch import counter_counts_attention
from lessons.document import load
from lessons.values import counted_demo_flops, lesson_values
from memory.config import demo_default
from memory.worked_examples import korthikanti_layer_bytes

ROOT = Path(__file__).resolve().parents[2]
CODES = ("en", "de", "vi")
aten = torch.ops.aten


def text(path: str, code: str = "en") -> str:
    document = load(path, lesson_values(code), code)
    return "\n".join([block.text for block in document.blocks] + list(document.takeaways))


def library_source(package: str, relative: str) -> str:
    spec = find_spec(package)
    assert spec is not None and spec.origin is not None
    return (Path(spec.origin).parent / relative).read_text(encoding="utf-8")


def _quiz(code: str) -> dict:
    import yaml

    if code == "en":
        return {q["id"]: q for q in yaml.safe_load(
            (ROOT / "quiz/questions.yaml").read_text(encoding="utf-8"))}
    return yaml.safe_load((ROOT / f"quiz/i18n/{code}.yaml").read_text(encoding="utf-8"))


# --- Early stop: after the last op that saves something --------------------------------


OLD_EARLY_STOP = {
    "en": "makes an output nothing keeps, so it is never rerun",
    "de": "erzeugt eine Ausgabe, die niemand aufbewahrt, und wird daher nie nachgerechnet",
    "vi": "tạo ra output mà không ai giữ lại, nên nó không bao giờ được tính lại",
}
NEW_EARLY_STOP = {
    "en": "right after the last operation that saves something",
    "de": "direkt nach der letzten Operation, die etwas speichert",
    "vi": "ngay sau thao tác cuối cùng có lưu một thứ gì đó",
}


@pytest.mark.parametrize("code", CODES)
def test_early_stop_is_the_rule_torch_applies_with_dropout_named(code):
    how = text("how-it-works", code)
    assert OLD_EARLY_STOP[code] not in how
    assert NEW_EARLY_STOP[code] in how and "GPT-2" in how and "0" in how
    cost = text("cost-and-correctness", code)
    assert OLD_EARLY_STOP[code].replace(", so it is never rerun", "") not in cost
    values = lesson_values(code)
    assert values["demo_counted_every_dropout"] in cost
    assert values["demo_counted_overhead_dropout"] in cost
    many = text("how-many", code)
    assert "dropout" in many.lower()


def _count(cfg, strategy: str) -> int:
    from demos.model import build_model, make_batch
    from memory.strategies import parse_strategy
    from memory.theory import plan_for

    model = build_model(cfg)
    idx, tgt = make_batch(cfg)
    with FlopCounterMode(display=False) as counter:
        model(idx, tgt, plan_for(cfg, parse_strategy(strategy))).backward()
    return counter.get_total_flops()


def test_the_lessons_dropout_count_is_torchs_count():
    """At GPT-2's dropout 0.1 every layer reruns whole: the count lesson 6 prints is what
    torch's counter counts around the demo model's step (6.845 GFLOP on torch 2.13, where
    the prediction was 6.308 while it skipped the MLP's last linear)."""
    cfg = demo_default("cpu")
    predicted = counted_demo_flops(cfg, attention_counted=counter_counts_attention("cpu"))
    counted = _count(cfg.replace(dropout=0.1), "every-layer")
    assert counted == predicted["every_dropout"]
    assert predicted["every_dropout"] > predicted["every"]


def test_the_torch_2_15_counts_are_a_counter_with_the_cpu_kernels_formula(monkeypatch):
    """torch 2.15 registers the CPU's fused attention kernel in the FLOP counter; lesson 6
    prints what such a counter counts, and scopes "no formula" to torch 2.13."""
    registry = flop_counter.flop_registry
    monkeypatch.setitem(registry, aten._scaled_dot_product_flash_attention_for_cpu,
                        registry[aten._scaled_dot_product_flash_attention])
    monkeypatch.setitem(registry, aten._scaled_dot_product_flash_attention_for_cpu_backward,
                        registry[aten._scaled_dot_product_flash_attention_backward])
    cfg = demo_default("cpu")
    predicted = counted_demo_flops(cfg, attention_counted=True)
    assert _count(cfg, "none") == predicted["none"]
    assert _count(cfg, "every-layer") == predicted["every"]
    for code in CODES:
        cost = text("cost-and-correctness", code)
        values = lesson_values(code)
        assert "torch 2.13" in cost and "torch 2.15" in cost
        for key in ("demo_counted_none_attention", "demo_counted_every_attention",
                    "demo_counted_overhead_attention"):
            assert values[key] in cost, (code, key)


@pytest.mark.parametrize("code", CODES)
def test_the_early_stop_key_does_not_credit_the_lm_head(code):
    """The LM head is outside every checkpoint: it explains nothing about early stop."""
    item = _quiz(code)["early-stop"]
    key = item["options"][0]
    assert "LM head" not in key and "LM-Head" not in key
    assert "dropout" in item["explanations"][0].lower()
    assert "torch 2.13" in item["prompt"]  # its counts are torch 2.13's (2.15 counts attention)


# --- Hooks, PEFT's 4-bit helper, FSDP's wrapper -----------------------------------------


SELECTIVE_HOOKS = {"en": "wrapping is not enough", "de": "reicht das Umschließen nicht",
                   "vi": "bọc lại là chưa đủ"}


@pytest.mark.parametrize("code", CODES)
def test_a_selective_policy_under_save_on_cpu_is_not_wrapped_to_host(code):
    practice = text("in-practice", code)
    assert SELECTIVE_HOOKS[code] in practice
    assert "respect_saved_tensors_hooks" in practice and "torch 2.14" in practice


@pytest.mark.parametrize("code", CODES)
def test_every_text_dates_respect_saved_tensors_hooks_to_torch_2_14(code):
    """`checkpoint(..., respect_saved_tensors_hooks=...)` is in torch 2.14.1's
    torch/utils/checkpoint.py (the wheel this machine's pip serves), not only in 2.15:
    the mistakes lab's fix and the quiz say "torch 2.14" wherever they date it."""
    import yaml

    from demos.mistakes import CASES
    from i18n import gettext

    quiz = ROOT / "quiz" / ("questions.yaml" if code == "en" else f"i18n/{code}.yaml")
    texts = [gettext(code, case.fix) for case in CASES.values()]
    texts.append(str(yaml.safe_load(quiz.read_text())))
    dated = [version for found in texts
             for version in re.findall(r"torch (2\.\d+)[^.]{0,20}?checkpoint\(\.\.\., "
                                       r"respect_saved_tensors_hooks", found)]
    assert dated and set(dated) == {"2.14"}, dated


def test_peft_4bit_helper_passes_empty_kwargs_and_gets_the_reentrant_mode():
    """peft 0.21.2 turns {} into the kwargs; transformers adds use_reentrant=False only for
    None: a layer checkpointed by the helper runs torch's checkpoint without use_reentrant,
    which means reentrant (with torch's warning)."""
    from peft import prepare_model_for_kbit_training
    from transformers import LlamaConfig, LlamaForCausalLM

    other = library_source("peft", "utils/other.py")
    assert "gradient_checkpointing_kwargs = {}" in other
    modeling = library_source("transformers", "modeling_utils.py")
    assert 'activation_checkpointing_kwargs = {"use_reentrant": False}' in modeling
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=50)
    model = LlamaForCausalLM(config)
    model.is_loaded_in_4bit = True  # what bitsandbytes sets; the helper reads only this
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepare_model_for_kbit_training(model)
    func = model.model.layers[0]._gradient_checkpointing_func
    assert "use_reentrant" not in func.keywords
    for code in CODES:
        practice = text("in-practice", code)
        assert "gradient_checkpointing_kwargs={}" in practice
        assert 'gradient_checkpointing_kwargs={"use_reentrant": False}' in practice


def test_fsdp2_checkpoint_wrapper_drops_the_rng_state():
    source = library_source("accelerate", "utils/fsdp_utils.py")
    assert "checkpoint_wrapper(layer, preserve_rng_state=False)" in source
    for code in CODES:
        practice = text("in-practice", code)
        assert "preserve_rng_state=False" in practice
        assert "case=dropout-without-rng)" in practice


def test_the_compiler_budget_caption_says_checkpoint_inputs_pass_the_hooks():
    """Non-reentrant checkpoint packs its inputs through saved_tensors_hooks (measured in
    tests/demos/test_installed_torch.py); only a selective policy's cache bypasses them."""
    from i18n import gettext

    page = (ROOT / "pages/demos/compiler_budget.py").read_text(encoding="utf-8")
    assert "eager \"\n        \"checkpointing keeps its inputs" not in page
    assert "packs each of its inputs through those hooks" in page
    caption = re.search(r'st\.caption\(t\(\s*((?:"[^"]*"\s*)+)\)\)', page).group(1)
    msgid = "".join(re.findall(r'"([^"]*)"', caption))
    for code in ("de", "vi"):
        assert gettext(code, msgid) != msgid
        assert "respect_saved_tensors_hooks=True" in gettext(code, msgid)


PARTIAL_BUDGET_WHOLE_GRAPH = {
    "en": ("True by default", "applies to the whole graph"),
    "de": ("standardmäßig True", "gilt dann für den ganzen Graphen"),
    "vi": ("mặc định là True", "áp dụng cho cả graph"),
}


@pytest.mark.parametrize("code", CODES)
def test_a_partial_region_budget_is_named_for_torch_2_15(code):
    """torch 2.15's `activation_memory_budget_require_full_coverage` is True by default, and
    set to False it lets a partial annotation select the budget for the whole graph
    (torch/_functorch/config.py and partitioners.py, 2.15): the course says both, not only
    that a partial annotation is accepted."""
    models = text("language-models", code)
    sentence = next(part for part in models.split("torch 2.15")[1:]
                    if "activation_memory_budget_require_full_coverage" in part)
    default, scope = PARTIAL_BUDGET_WHOLE_GRAPH[code]
    assert default in sentence and scope in sentence


def test_a_partial_region_budget_selects_the_whole_graphs_budget_where_torch_has_it():
    """On a torch that has the switch (2.15 and newer), it defaults to True and its comment
    says a partial annotation then selects the budget for the whole graph; on 2.13 and 2.14
    it does not exist, as the course says."""
    import torch._functorch.config as functorch_config

    config = library_source("torch", "_functorch/config.py")
    if not hasattr(functorch_config, "activation_memory_budget_require_full_coverage"):
        assert torch.__version__ < "2.15"
        return
    assert functorch_config.activation_memory_budget_require_full_coverage is True
    assert "select the budget for the whole graph" in " ".join(config.split())


# --- The generation cache, eval mode, autocast, the pins ---------------------------------


def test_the_generation_cache_doubles_under_checkpointing_without_an_error():
    """With the cache kept under checkpointing (a layer that declares it may), the rebuild
    appends each layer's keys and values a second time: 8 positions after the forward, 16
    after backward, and nothing raises."""
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM
    from transformers.models.llama import modeling_llama

    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=100,
                         attn_implementation="sdpa")
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).train()
    layer = modeling_llama.LlamaDecoderLayer
    saved = layer._can_checkpoint_with_cache
    layer._can_checkpoint_with_cache = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.activation_checkpointing_enable()
            ids = torch.randint(0, 100, (1, 8))
            cache = DynamicCache(config=config)
            model(input_ids=ids, labels=ids, use_cache=True,
                  past_key_values=cache).loss.backward()
    finally:
        layer._can_checkpoint_with_cache = saved
    assert cache.get_seq_length() == 16
    assert "updated a second time" in library_source("transformers", "modeling_layers.py")
    for code, twice in (("en", "each position twice"), ("de", "jede Position zweimal"),
                        ("vi", "mỗi vị trí hai lần")):
        assert twice in text("in-practice", code)


def test_eval_mode_alone_changes_nothing_for_torchs_checkpoint():
    """checkpoint ignores module.training: in eval mode it still keeps only its input and
    reruns the block in backward. The mistakes lab's case no longer says "or in eval mode"."""
    from demos.mistakes import CASES

    block = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()).eval()
    calls = []
    block.register_forward_pre_hook(lambda *args: calls.append(1))
    x = torch.randn(4, 8, requires_grad=True)
    checkpoint(block, x, use_reentrant=False).sum().backward()
    assert len(calls) == 2  # forward and the rebuild in backward
    case = CASES["no-grad-or-eval"]
    assert "eval mode" not in case.title
    assert "self.training" in library_source("transformers", "modeling_layers.py")


@pytest.mark.parametrize("code", CODES)
def test_mixed_precision_is_not_said_to_grow_the_weights(code):
    practice = text("in-practice", code)
    for old in ("the weights *grow*", "die Gewichte *wachsen*", "trọng số thì *tăng*"):
        assert old not in practice


@pytest.mark.parametrize("code", CODES)
def test_the_newer_releases_are_named_with_what_they_change(code):
    practice = text("in-practice", code)
    for needle in ("transformers 5.25", "accelerate 1.16", "use_kernels", "USE_HUB_KERNELS=0",
                   "prepare_model_for_kbit_training"):
        assert needle in practice, needle
    many = text("how-many", code)
    assert f"{lesson_values(code)['layer_units']}-unit" not in many
    assert "34" in many


# --- Lesson 7: measure it yourself, and the questions learners ask ---------------------


HEADINGS = {"en": ("## Measure it yourself", "## Questions learners ask"),
            "de": ("## Selbst messen", "## Fragen, die Lernende stellen"),
            "vi": ("## Tự đo lấy", "## Những câu người học hay hỏi")}


@pytest.mark.parametrize("code", CODES)
def test_lesson_7_teaches_measuring_your_own_run(code):
    from lessons.document import content_file

    path = content_file("in-practice", code) if code != "en" else content_file("in-practice")
    raw = path.read_text(encoding="utf-8")
    for heading in HEADINGS[code]:
        assert heading in raw
    practice = text("in-practice", code)
    for api in ("torch.cuda.max_memory_allocated()", "torch.cuda.reset_peak_memory_stats()",
                "torch.cuda.memory._record_memory_history", "torch.cuda.memory._dump_snapshot",
                "pytorch.org/memory_viz", "saved_tensors_hooks", "FlopCounterMode",
                "every_n_layers", "ValueError"):
        assert api in practice, api
    values = lesson_values(code)
    assert values["score_term_from_tokens"] in practice


def test_the_score_term_dominates_from_the_printed_length():
    """Derived from Korthikanti's s·b·h·(34 + 5·a·s/h): with head dimension 128 the score
    term 5·a·s²·b outweighs the rest from 871 tokens, whatever the width."""
    from lessons.checkpoint_math import score_term_dominates_from

    s = score_term_dominates_from(128)
    def score(seq: int, hidden: int, heads: int) -> float:
        return (korthikanti_layer_bytes(1, seq, hidden, heads, full=True)
                - korthikanti_layer_bytes(1, seq, hidden, heads))

    for hidden, heads in ((2048, 16), (4096, 32), (12288, 96)):
        assert score(s, hidden, heads) > korthikanti_layer_bytes(1, s, hidden, heads)
        assert score(s - 1, hidden, heads) <= korthikanti_layer_bytes(1, s - 1, hidden, heads)
    assert lesson_values()["score_term_from_tokens"] == f"{s:,}" == "871"


def test_checkpointing_the_first_k_layers_peaks_lowest():
    """Measured with the engine's live tracker on an 8-layer model, 4 layers checkpointed:
    the same bytes at the end of the forward pass wherever they go; the first four peak
    lowest, every other layer from the first (Hugging Face's every_n_layers=2) close to it,
    from the second higher, the last four highest (about one layer's internals more)."""
    from demos.measure import Step
    from demos.model import build_model, make_batch
    from memory.config import ModelConfig
    from memory.segments import Segment
    from memory.strategies import parse_strategy

    cfg = ModelConfig(layers=8, hidden=64, heads=4, seq_len=128, batch=2, vocab=128)
    model = build_model(cfg)
    idx, tgt = make_batch(cfg)
    step = Step(cfg, model, idx, tgt, torch.device("cpu"))
    spec = parse_strategy("every-layer")

    def measure(layers: set[int]) -> tuple[int, int]:
        plan = [Segment(i, i + 1, "checkpoint" if i in layers else "keep") for i in range(8)]
        tracker, held, _ = step.tracked(spec, plan, False)
        return tracker.peak_bytes, sum(held.values())

    first, spread, spread_late, last = (measure(s) for s in (
        {0, 1, 2, 3}, {0, 2, 4, 6}, {1, 3, 5, 7}, {4, 5, 6, 7}))
    assert first[1] == spread[1] == spread_late[1] == last[1]
    assert first[0] < spread[0] < spread_late[0] < last[0]
    plain, _ = measure(set())
    every, _ = measure(set(range(8)))
    layer_internals = (plain - every) / 8
    assert last[0] - first[0] > 0.5 * layer_internals


def test_the_trainer_refuses_both_checkpointing_switches_under_fsdp():
    trainer = library_source("transformers", "trainer.py")
    assert "can't both be set to True" in trainer
    args = library_source("transformers", "training_args.py")
    assert "redundant all-gather in the backward pass" in args


def test_autocast_casts_the_weights_per_forward_and_keeps_the_copies_for_backward():
    """Mixed precision does not grow the fp32 weights: under autocast each forward makes a
    16-bit copy of a weight (cached for the autocast region), and the matmul saves that copy
    for backward."""
    linear = torch.nn.Linear(16, 16)
    x = torch.randn(4, 16, requires_grad=True)
    saved: list[torch.Tensor] = []
    hooks = torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t)
    with hooks, torch.autocast("cpu", dtype=torch.bfloat16):
        linear(x).float().sum().backward()
    assert linear.weight.dtype == torch.float32
    copies = [t for t in saved if t.dtype == torch.bfloat16 and t.shape == linear.weight.shape]
    assert copies and all(t.untyped_storage().data_ptr()
                          != linear.weight.untyped_storage().data_ptr() for t in copies)


def test_the_labs_optimal_budget_placement_checkpoints_the_first_layers():
    """What lesson 7 says of `budget:dp`: checkpoints from the first layer, the last kept."""
    from memory.strategies import parse_strategy
    from memory.theory import plan_for

    cfg = demo_default("cpu")
    for budget in ("30%", "50%", "80%"):
        plan = plan_for(cfg, parse_strategy(f"budget:dp:{budget}"))
        assert plan[0].start == 0 and plan[0].mode == "checkpoint"
        assert plan[-1].mode == "keep" and plan[-1].stop == cfg.layers
    assert "`budget:dp`" in text("in-practice")
