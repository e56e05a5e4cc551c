"""The plan as a DeepSpeed config and as Megatron-LM flags (planner.framework_plan,
planner.framework_code, `python -m planner --framework`): the mapping of each strategy,
sharding and layout, the notes where a framework has no equivalent, in every language.
The frameworks themselves read the output in tests/frameworks (make test-frameworks)."""

from __future__ import annotations

import json

import pytest

from i18n import SUPPORTED
from memory.architectures import PRESETS
from memory.footprint import STRATEGIES, PlannerInputs
from memory.parallel import Layout
from planner.cli import main
from planner.framework_code import (
    deepspeed_config,
    deepspeed_notes,
    deepspeed_text,
    megatron_env,
    megatron_flags,
    megatron_notes,
    megatron_text,
)
from planner.framework_plan import framework_plan

P70 = PlannerInputs(PRESETS["llama-3.1-70b"], seq=4096, shards=16, some_layers=40)


def value(flags: list[str], name: str) -> str | None:
    return flags[flags.index(name) + 1] if name in flags else None


def test_every_layer_on_fsdp_is_zero3_and_full_uniform_recompute():
    plan = framework_plan(P70.with_(strategy="every-layer"))
    config, flags = deepspeed_config(plan), megatron_flags(plan)
    assert config["zero_optimization"]["stage"] == 3
    assert config["activation_checkpointing"]["number_checkpoints"] == 80
    assert config["train_batch_size"] == 1 * 8 * 16
    assert config["gradient_accumulation_steps"] == 8
    assert (value(flags, "--recompute-granularity"), value(flags, "--recompute-method"),
            value(flags, "--recompute-num-layers")) == ("full", "uniform", "1")
    assert value(flags, "--data-parallel-sharding-strategy") == "optim_grads_params"
    assert "--use-distributed-optimizer" in flags and "--bf16" in flags
    assert value(flags, "--global-batch-size") == "128"
    assert megatron_env(plan) == {}


@pytest.mark.parametrize(("k", "per_stage", "total"), [(40, 20, 40), (41, 21, 42)])
def test_the_first_k_layers_are_megatrons_block_per_stage(k, per_stage, total):
    plan = framework_plan(P70.with_(strategy="some-layers", some_layers=k),
                          Layout(tp=8, sp=True, pp=2, microbatches=8))
    flags = megatron_flags(plan)
    assert value(flags, "--recompute-method") == "block"
    assert value(flags, "--recompute-num-layers") == str(per_stage)
    assert plan.recompute.recomputed == total
    assert f"{total} layers in all, the plan checkpoints {k}" in " ".join(megatron_notes(plan))
    # the pipeline: ZeRO-1 in DeepSpeed, the distributed optimizer in Megatron
    assert deepspeed_config(plan)["zero_optimization"]["stage"] == 0  # dp = 1
    assert "--use-megatron-fsdp" not in flags


def test_one_stage_counts_the_plans_k():
    plan = framework_plan(P70.with_(strategy="some-layers", some_layers=40))
    assert value(megatron_flags(plan), "--recompute-num-layers") == "40"
    assert deepspeed_config(plan)["activation_checkpointing"]["number_checkpoints"] == 40


def test_two_layer_segments_are_units_of_two():
    plan = framework_plan(P70.with_(strategy="two-layer"))
    flags = megatron_flags(plan)
    assert (value(flags, "--recompute-method"), value(flags, "--recompute-num-layers")) == (
        "uniform", "2")
    assert deepspeed_config(plan)["activation_checkpointing"]["number_checkpoints"] == 40


def test_selective_and_none_and_the_budget():
    selective = framework_plan(P70.with_(strategy="selective"))
    flags = megatron_flags(selective)
    assert value(flags, "--recompute-granularity") == "selective"
    assert "--recompute-method" not in flags and "--recompute-num-layers" not in flags
    assert "activation_checkpointing" not in deepspeed_config(selective)
    assert "core_attn" in " ".join(megatron_notes(selective))
    assert "sdpa" in " ".join(deepspeed_notes(selective))
    none = framework_plan(P70.with_(strategy="none"))
    assert "--recompute-granularity" not in megatron_flags(none)
    budget = framework_plan(P70.with_(strategy="budget"))
    assert "--recompute-granularity" not in megatron_flags(budget)
    assert "activation_checkpointing" not in deepspeed_config(budget)
    assert "no equivalent" in " ".join(megatron_notes(budget) + deepspeed_notes(budget))


@pytest.mark.parametrize("sp", [False, True])
def test_checkpoints_split_over_tensor_parallel_gpus_only_with_sequence_parallelism(sp):
    plan = framework_plan(P70.with_(strategy="every-layer"), Layout(tp=8, sp=sp, dp=2))
    section = deepspeed_config(plan)["activation_checkpointing"]
    assert section["partition_activations"] is sp
    assert "--distribute-saved-activations" not in megatron_flags(plan)
    assert ("--sequence-parallel" in megatron_flags(plan)) is sp
    words = " ".join(megatron_notes(plan))
    assert ("refuses --distribute-saved-activations" in words) is sp


def test_layouts_megatron_cannot_run_as_planned_are_said():
    gpipe = framework_plan(P70, Layout(tp=8, pp=2, schedule="gpipe", microbatches=8))
    assert "no GPipe" in " ".join(megatron_notes(gpipe))
    assert megatron_env(gpipe) == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    assert megatron_text(gpipe).count("CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun") == 1
    pipe = framework_plan(P70, Layout(tp=4, pp=2, microbatches=8, dp=2))
    assert deepspeed_config(pipe)["zero_optimization"]["stage"] == 1
    assert "refuses stages 2 and 3" in " ".join(deepspeed_notes(pipe))
    interleaved = framework_plan(P70, Layout(tp=8, pp=2, schedule="interleaved", chunks=2,
                                             microbatches=8))
    assert value(megatron_flags(interleaved), "--num-virtual-stages-per-pipeline-rank") == "2"
    lora = framework_plan(P70.with_(tuning="lora", optimizer="adamw-8bit"))
    words = " ".join(megatron_notes(lora))
    assert "no LoRA" in words and "no 8-bit AdamW" in words
    assert "--optimizer" not in megatron_flags(lora)


def test_pure_bf16_keeps_no_fp32_copy_in_deepspeed():
    bf16 = deepspeed_config(framework_plan(P70.with_(precision="bf16")))["bf16"]
    assert bf16 == {"enabled": True, "bf16_master_weights_and_grads": True,
                    "bf16_optimizer_states": True}
    assert "bf16" not in deepspeed_config(framework_plan(P70.with_(precision="fp32")))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("code", [lang.code for lang in SUPPORTED if lang.code != "en"])
def test_every_language_prints_the_same_config_and_flags_with_its_own_notes(strategy, code):
    for layout in (None, Layout(tp=8, sp=True, pp=2, microbatches=8),
                   Layout(tp=4, cp=2, dp=2)):
        plan = framework_plan(P70.with_(strategy=strategy, tuning="lora", offload=True,
                                        optimizer="adamw-8bit"), layout)
        for english, translated in ((deepspeed_notes(plan), deepspeed_notes(plan, code)),
                                    (megatron_notes(plan), megatron_notes(plan, code))):
            assert len(english) == len(translated)
            assert not set(english) & set(translated), translated
        ds = deepspeed_text(plan, code)
        assert json.loads(ds[ds.index("\n{") + 1:]) == deepspeed_config(plan)
        body = [line for line in megatron_text(plan, 8, code).splitlines()
                if not line.startswith("#")]
        assert body == [line for line in megatron_text(plan).splitlines()
                        if not line.startswith("#")]


def _run(capsys, *flags: str) -> tuple[int, str, str]:
    status = main(["--model", "llama-3.1-70b", "--gpus", "16", *flags])
    out, err = capsys.readouterr()
    return status, out, err


def test_the_command_prints_the_framework_asked_for(capsys):
    status, out, _ = _run(capsys, "--framework", "deepspeed")
    assert status == 0
    config = json.loads(out[out.index("\n{") + 1:])
    _, data, _ = _run(capsys, "--json")
    assert config == json.loads(data)["parallel"]["code"]["deepspeed_config"]  # the layout's
    status, out, _ = _run(capsys, "--framework", "megatron")
    assert status == 0 and "pretrain_gpt.py" in out and "--tensor-model-parallel-size" in out
    status, out, _ = _run(capsys, "--framework", "all")
    assert status == 0
    for name in ("huggingface", "pytorch", "deepspeed", "megatron"):
        assert f"# ---- {name}" in out
    with pytest.raises(SystemExit) as exit_:
        main(["--framework", "jax"])
    assert exit_.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_json_holds_both_frameworks_for_both_plans(capsys):
    status, out, _ = _run(capsys, "--json")
    assert status == 0
    data = json.loads(out)
    for code in (data["recommendation"]["code"], data["parallel"]["code"]):
        assert {"deepspeed", "deepspeed_config", "megatron", "megatron_flags",
                "megatron_env"} <= set(code)
    rec = data["recommendation"]
    flags = rec["code"]["megatron_flags"]
    settings = rec["settings"]
    assert int(value(flags, "--global-batch-size")) == (
        settings["batch"] * settings["accumulation"] * settings["gpus"])
