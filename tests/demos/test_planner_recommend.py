"""The recommendation is one consistent plan: steps in the course's order, each with the
table's own numbers; task-changing steps are choices; the code carries every step. And the
planner reads a pasted config.json, on the page's model and on the command line."""

from __future__ import annotations

import itertools
import json

import pytest

from demos.cli import main
from memory import footprint as P
from memory.architectures import PRESETS
from memory.hardware import GPUS
from memory.hf_config import ConfigJsonError, architecture
from planner import recommend as recommend_module
from planner.hf_code import hf_code

TASK_CHANGES = {"more-gpus", "lora", "qlora"}
MARKERS = {  # what the script must contain for each step
    "every-layer": ("activation_checkpointing", "True"),
    "some-layers": ("activation_checkpointing_enable()", "gradient_checkpointing = False"),
    "selective": ('attn_implementation="sdpa"',),
    "none": ("activation_checkpointing=False",),
    "chunked-loss": ("use_liger_kernel=True",),
    "fused-attention": ('attn_implementation="sdpa"',),
    "smaller-batch": ("per_device_train_batch_size=1",),
    "adamw-8bit": ('optim="adamw_8bit"',),
    "lora": ("LoraConfig(", "get_peft_model("),
    "qlora": ("BitsAndBytesConfig(", "prepare_model_for_kbit_training(", "get_peft_model("),
}


@pytest.mark.parametrize("key,gpus,tuning,gpu,fused", [
    *itertools.product(PRESETS, (1, 8), P.TUNINGS, ("a10", "h100"), (True,)),
    *itertools.product(PRESETS, (1, 8), P.TUNINGS, ("h100",), (False,))])
def test_every_plan_is_consistent(key, gpus, tuning, gpu, fused) -> None:
    p = P.PlannerInputs(PRESETS[key], shards=gpus, tuning=tuning, batch=2, fused=fused,
                        gpu_bytes=GPUS[gpu].bytes)
    plan = recommend_module.plan(p)
    rec = plan.recommendation
    # the headline's numbers are the table's for the recommended settings
    final = recommend_module.plan(rec.inputs)
    row = next(r for r in final.rows if r.strategy == rec.strategy)
    assert rec.peak == row.peak and rec.fits == row.fits
    assert final.breakdown.total == rec.peak
    for plans in (rec, *rec.alternatives):
        q = p
        for index, step in enumerate(plans.steps):
            assert step.inputs is not None
            assert step.peak == P.peak_bytes(step.inputs) and step.fits == (
                step.peak <= p.gpu_bytes)
            # each step changes only what it names, on top of the ones before it
            assert step.inputs.strategy == plans.strategy
            if index == 0:
                assert step.action in recommend_module.RECOMMENDABLE
                if step.action == "some-layers":  # those layers alone make it fit
                    assert step.fits and len(plans.steps) == 1
            assert step.choice is (step.action in TASK_CHANGES)
            q = step.inputs
        assert q == plans.inputs
        code = hf_code(plans.inputs)
        for step in plans.steps:
            for marker in MARKERS.get(step.action, ()):
                assert marker in code, (step.action, marker)
            if step.action == "more-gpus":
                assert "fsdp=True" in code and f"--num_processes {step.value}" in code
        assert plans.gpus == plans.inputs.shards >= gpus
    # full fine-tunes consider more GPUs before a method change
    if rec.choices and tuning == "full":
        methods = [s for s in rec.choices if s.action in ("lora", "qlora")]
        more = [s for s in rec.choices if s.action == "more-gpus"]
        if methods and not more:
            assert all(not any(s.action == "more-gpus" for s in a.steps)
                       or any(s.action in ("lora", "qlora") for s in a.steps)
                       for a in rec.alternatives)


def test_the_issue_case_full_8b_on_one_80gb_gpu_shards() -> None:
    p = P.PlannerInputs(PRESETS["llama-3.1-8b"], tuning="full", gpu_bytes=GPUS["h100"].bytes)
    rec = recommend_module.recommend(p)
    assert rec.fits and rec.inputs.tuning == "full"  # LoRA only as an alternative
    assert rec.steps[0].action == "every-layer" and not rec.steps[0].fits
    assert rec.steps[-1].action == "more-gpus" and rec.steps[-1].choice and rec.gpus > 1
    assert any(a.inputs.tuning != "full" for a in rec.alternatives)
    # the same tokens per optimizer step on more GPUs: less accumulation
    assert rec.inputs.accumulation * rec.gpus == p.accumulation * p.shards


def test_only_some_layers_when_they_alone_fit() -> None:
    p = P.PlannerInputs(PRESETS["llama-3.1-8b"], tuning="qlora", gpu_bytes=GPUS["a10"].bytes)
    rec = recommend_module.recommend(p)
    assert [s.action for s in rec.steps] == ["some-layers"]
    assert P.fits(p.with_(some_layers=rec.steps[0].value), "some-layers")


def _config_json(family: str) -> str:
    import transformers

    cls = {"gpt2": transformers.GPT2Config, "llama": transformers.LlamaConfig,
           "mistral": transformers.MistralConfig, "qwen2": transformers.Qwen2Config,
           "gemma": transformers.GemmaConfig}[family]
    return cls().to_json_string()


@pytest.mark.parametrize("family", ["gpt2", "llama", "mistral", "qwen2", "gemma"])
def test_a_config_json_of_each_family_counts_as_the_library_does(family) -> None:
    """The parameter count from config.json equals that of the library's model built from
    the same config (on the meta device: no memory, nothing downloaded)."""
    import torch
    import transformers

    text = _config_json(family)
    arch = architecture(text)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model(**json.loads(text)))
    assert arch.params() == sum(p.numel() for p in model.parameters())
    assert arch.family == family
    assert recommend_module.plan(P.PlannerInputs(arch)).recommendation.steps


@pytest.mark.parametrize("text,problem,field", [
    ('{"model_type": "bert"}', "family", "model_type"),
    ('{"hidden_size": 64}', "missing", "model_type"),
    ('{"model_type": "llama", "hidden_size": 64}', "missing", "num_attention_heads"),
    ('{"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 5, "vocab_size": 9, '
     '"n_positions": 8}', "shape", ""),
    ("not json", "not-json", ""),
])
def test_other_configs_are_refused_naming_the_field(text, problem, field) -> None:
    with pytest.raises(ConfigJsonError) as error:
        architecture(text)
    assert error.value.problem == problem and error.value.field == field


def test_the_command_line_plan(tmp_path, capsys) -> None:
    path = tmp_path / "config.json"
    path.write_text(_config_json("llama"))
    argv = ["plan", "--config", str(path), "--seq", "4096", "--batch", "1", "--precision",
            "bf16", "--attention", "eager", "--tuning", "lora", "--lora-rank", "16",
            "--lora-targets", "attention", "--gpu-gb", "80", "--gpus", "1", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    from planner.class_cache import from_config_json

    arch, source = from_config_json(path.read_text())
    p = P.PlannerInputs(arch, seq=4096, batch=1, precision="bf16",
                        fused=False, tuning="lora", lora_rank=16, lora_targets="attention",
                        gpu_bytes=80 * 2**30, shards=1, source=source)
    from memory.layer import layer_bytes

    assert data["layer_activation_bytes"] == layer_bytes(p.tensors())
    # Llama's class keeps what the course's Llama layer counts, to the byte
    assert data["layer_activation_bytes"] == layer_bytes(
        p.with_(source=None, arch=architecture(path.read_text())).tensors())
    for strategy in P.STRATEGIES:
        row = data["strategies"][strategy]
        assert row["peak_bytes"] == P.peak_bytes(p, strategy)
        assert row["activations_kept_bytes"] == P.activations(p, strategy).kept
        assert row["fits"] == P.fits(p, strategy)
    rec = recommend_module.recommend(p)
    assert [s["action"] for s in data["recommendation"]["steps"]] == [
        s.action for s in rec.steps]
    assert data["recommendation"]["code"]["huggingface"] == hf_code(rec.inputs)
    bad = tmp_path / "bert.json"
    bad.write_text('{"model_type": "bert"}')
    assert main(["plan", "--config", str(bad)]) == 2
    assert "model_type" in capsys.readouterr().err
