"""The presets planned on their real transformers classes (planner.preset_classes): the
shipped terms are those the current code measures, a preset plan imports neither torch
nor transformers, and a LoRA rank not measured is derived exactly."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memory.architectures import PRESETS
from planner import class_cache
from planner import preset_classes as S

REGENERATE = "stale: run .venv/bin/python -m planner.preset_classes and commit the file"


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_preset_ships_its_config_and_current_terms(preset: str) -> None:
    data = S.shipped(preset)
    assert data is not None, REGENERATE
    assert data["key"] == class_cache.cache_key(S.config(preset)), REGENERATE
    assert set(data["fits"]) == {class_cache._variant_text(k)
                                 for k in S.variants(tuple(data["kernels"]))}
    assert S.config(preset)["model_type"] == PRESETS[preset].family
    assert len(data["layer_types"]) == PRESETS[preset].layers


def test_a_preset_plan_imports_neither_torch_nor_transformers() -> None:
    code = ("import sys, io, contextlib\n"
            "from planner.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['--model', 'gpt2', '--tuning', 'lora', '--json']) == 0\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.strip() == "[]"


# a cover of the variants: every precision, kernel and tuning, on every preset
COVER = {"gpt2": (("mixed", "eager", 16, "all-linear"), ("fp32", "sdpa", 0, "all-linear")),
         "llama-3.2-1b": (("bf16", "sdpa", 8, "attention"), ("mixed", "eager", 0, "all-linear")),
         "llama-3.1-8b": (("mixed", "sdpa", 16, "all-linear"),),
         "llama-3.1-70b": (("fp32", "eager", 8, "all-linear"),),
         "qwen2.5-7b": (("bf16", "eager", 16, "attention"), ("mixed", "sdpa", 0, "all-linear"))}


@pytest.mark.heavy
@pytest.mark.parametrize("preset", list(COVER))
def test_the_shipped_terms_are_what_the_class_measures_now(preset: str) -> None:
    from model_classes import causal_lm_config as CC
    from model_classes import variant as V
    from planner import class_fit as CF

    conf = CC.hf_config(S.config(preset))
    data = S.shipped(preset)
    assert data is not None, REGENERATE
    for precision, kernel, rank, targets in COVER[preset]:
        key = (precision, kernel, rank, targets, S.DEVICE)
        fresh = CF.fit_variant(conf, V.Variant(*key))
        assert class_cache.fit_to_json(fresh) == data["fits"][class_cache._variant_text(key)], (
            key, REGENERATE)


def test_a_rank_not_measured_is_derived_exactly() -> None:
    """LoRA is measured at ranks 8 and 16; rank 4 follows from them, to the byte."""
    from model_classes import causal_lm_config as CC
    from model_classes import variant as V
    from planner import class_fit as CF

    key = ("mixed", "eager", 4, "all-linear", S.DEVICE)
    derived = S.preset_source("gpt2").fit(key)
    fresh = CF.fit_variant(CC.hf_config(S.config("gpt2")), V.Variant(*key))
    assert class_cache.fit_to_json(derived) == class_cache.fit_to_json(fresh)


def test_qlora_on_a_preset_takes_the_course_formula(capsys) -> None:
    """The shipped measurements hold no 4-bit variants: a preset's QLoRA layers are the
    course's formula (held to real 4-bit layers by tests/real_libraries: under them the
    residual stream is fp32, prepare_model_for_kbit_training); its LoRA layers the
    class's terms."""
    import json

    from memory import footprint as P
    from memory.layer import layer_bytes
    from planner.cli import main

    def plan(tuning: str) -> dict:
        assert main(["--model", "llama-3.1-8b", "--tuning", tuning, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    qlora = plan("qlora")
    formula = P.PlannerInputs(PRESETS["llama-3.1-8b"], tuning="qlora", precision="mixed")
    assert qlora["class"] is None
    assert qlora["layer_activation_bytes"] == layer_bytes(formula.tensors())
    assert plan("lora")["class"]["family"] == "llama"
