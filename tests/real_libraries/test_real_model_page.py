"""AppTest: the real-model page builds the chosen family as a tiny transformers model, runs
one step and shows, per decoder layer, what it measured beside the planner's prediction
and the lab model's, in the page's language."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from model_classes.quantized import QLORA_SKIP, qlora_available
from tests.demo_pages.test_pages import no_errors
from tests.lessons.test_lesson_pages_i18n import page_text
from tools.translations import untranslated_on_page

PAGE = "pages/demos/real_model.py"


def test_measured_beside_predicted_and_the_switch_as_printed(app_test: Callable) -> None:
    at = app_test(PAGE, query={"model": "gpt2", "ckpt": "every-n", "tuning": "lora",
                               "dtype": "fp32", "attention": "eager"}, timeout=180)
    no_errors(at)
    assert "activation_checkpointing_enable(every_n_layers=2)" in at.code[0].value
    assert "get_peft_model" in at.code[0].value
    table = at.dataframe[0].value
    assert list(table["Checkpointed"][:4]) == ["yes", "no", "yes", "no"]
    assert set(table["Measured ÷ planner"]) == {"1.00"}
    assert list(table["Measured"]) == list(table["Planner"])
    # GPT-2's gelu_new and the fp32 adapter inputs: the lab model keeps less on plain layers
    assert table["Lab model"][1] != table["Measured"][1]
    assert at.metric[0].value == at.metric[1].value
    assert "GPT2LMHeadModel" in "\n".join(c.value for c in at.caption)
    # the same setting at the preset's real size, from the planner
    assert "At its real size (GPT-2 small (124M), one sequence of 1,024 tokens" in page_text(at)

    at.radio(key="model").set_value("qwen2.5-7b").run()
    no_errors(at)
    assert at.query_params["model"] == "qwen2.5-7b"
    assert "Qwen2ForCausalLM" in "\n".join(c.value for c in at.caption)
    # every_n_layers has no planner row: no step-peak comparison; every layer has one
    assert "The planner's step peak" not in page_text(at)
    at.radio(key="ckpt").set_value("every-layer").run()
    no_errors(at)
    text = page_text(at)
    assert "× the measured peak" in text
    # LoRA with every layer checkpointed: few gradients, backward's temporaries show
    assert " higher: the pieces leave out backward's own temporaries" in text
    assert "the measured peak lies inside it" in text
    # full fine-tuning: the pieces never all live at once, the measured peak is lower
    at.radio(key="tuning").set_value("full").run()
    no_errors(at)
    text = page_text(at)
    assert " lower: the pieces come one after the other" in text
    assert "the measured peak lies inside it" in text


@pytest.mark.parametrize("code", ["de", "vi"])
def test_the_page_speaks_the_language(app_test: Callable, code: str) -> None:
    at = app_test(PAGE, query={"model": "llama-3.2-1b", "padding": "on", "lang": code,
                               "dtype": "bf16" if code == "de" else "mixed"},
                  timeout=180)
    no_errors(at)
    table = at.dataframe[0].value
    text = "\n".join([page_text(at), " ".join(map(str, table.columns))])
    assert not untranslated_on_page(text, code)
    assert set(table[table.columns[4]]) == {"1,00"}  # measured ÷ planner, a decimal comma


def test_qlora_on_the_page(app_test: Callable) -> None:
    """Where bitsandbytes is installed the page offers QLoRA, loads the model in 4-bit as
    its code says and finds the planner's QLoRA bytes."""
    if not qlora_available():
        pytest.skip(QLORA_SKIP)
    at = app_test(PAGE, query={"model": "qwen2.5-7b", "tuning": "qlora", "dtype": "bf16",
                               "ckpt": "first-k"}, timeout=180)
    no_errors(at)
    assert "prepare_model_for_kbit_training" in at.code[0].value
    assert "torch.autocast" in at.code[0].value
    table = at.dataframe[0].value
    assert set(table["Measured ÷ planner"]) == {"1.00"}
    assert "the measured peak lies inside it" in page_text(at)
