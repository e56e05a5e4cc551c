"""The recommendation is one consistent plan: steps in the course's order, each with the
table's own numbers; task-changing steps are choices; the code carries every step. And the
planner reads a pasted config.json, on the page's model and on the command line."""

from __future__ import annotations

import itertools
import json

import pytest

from memory import footprint as P
from memory.architectures import PRESETS
from memory.hardware import GPUS
from memory.hf_config import ConfigJsonError, architecture
from planner import parallel_plan as PP
from planner import recommend as recommend_module
from planner.cli import main
from planner.hf_code import LIGER_MODEL_TYPES, hf_code, model_type

TASK_CHANGES = {"more-gpus", "lora", "qlora", "shorter-seq"}
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


def _config_json(family: str) -> str:
    import transformers

    cls = {"gpt2": transformers.GPT2Config, "llama": transformers.LlamaConfig,
           "mistral": transformers.MistralConfig, "qwen2": transformers.Qwen2Config,
           "gemma": transformers.GemmaConfig}[family]
    return cls().to_json_string()


# Pasted config.json files as their Hub pages give them (the fields the planner reads).
MISTRAL_7B_V03 = json.dumps({
    "model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 32768,
    "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
    "tie_word_embeddings": False, "hidden_act": "silu", "torch_dtype": "bfloat16"})
QWEN25_7B = json.dumps({
    "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584,
    "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
    "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": False,
    "hidden_act": "silu", "torch_dtype": "bfloat16"})


def _pasted() -> dict[str, object]:
    pasted = {"mistral-7b-v0.3": architecture(MISTRAL_7B_V03),
              "qwen2.5-7b": architecture(QWEN25_7B)}
    for family in ("gpt2", "llama", "mistral", "qwen2", "gemma"):
        pasted[f"{family} (library defaults)"] = architecture(_config_json(family))
    return pasted


def _models() -> dict[str, object]:
    return {**PRESETS, **_pasted()}


def _check_plan(p: P.PlannerInputs) -> None:
    """The plan the page shows for `p` is one plan: the table's row marked recommended is
    the recommendation (same peak, same verdict), the headroom holds for what fits, and
    each step changes only what it names."""
    plan = recommend_module.plan(p)
    rec = plan.recommendation
    only_checkpointing = rec.inputs == p.with_(strategy=rec.strategy,
                                               some_layers=rec.inputs.some_layers)
    assert (plan.recommended_row is not None) == only_checkpointing
    if plan.recommended_row is not None:
        row = next(r for r in plan.rows if r.strategy == plan.recommended_row)
        assert row.peak == rec.peak and row.fits == rec.fits, (row, rec.peak)
        if rec.strategy == "some-layers":
            assert plan.table_layers == rec.inputs.some_layers
    # the headline's numbers are also the table's for the recommended settings (on the
    # recommended layout, across GPUs)
    final = recommend_module.plan(rec.inputs, rec.layout)
    row = next(r for r in final.rows if r.strategy == rec.strategy)
    assert rec.peak == row.peak and rec.fits == row.fits
    assert final.breakdown.total == rec.peak
    usable = p.gpu_bytes * (1 - p.headroom)
    for row in plan.rows:  # the table applies the headroom as the recommendation does
        assert row.fits == (row.peak <= usable)
    if rec.fits:
        assert rec.peak <= usable
    for plans in (rec, *rec.alternatives):
        q = p
        # across GPUs a choice comes first (its layout searched with it), and the switch
        # from 8-bit AdamW, which cannot step FSDP2's DTensors
        ladder = [s for s in plans.steps if not s.choice and s.action != "sharded-adamw"]
        for step in plans.steps:
            assert step.inputs is not None
            peak = (P.peak_bytes(step.inputs) if step.layout is None else
                    PP.layout_peak(step.inputs, step.layout))
            assert step.peak == peak and step.fits == (step.peak <= usable)
            if step in ladder:  # each tool on top of the checkpointing, in its strategy
                assert step.inputs.strategy == plans.strategy
            if step is ladder[0]:
                assert step.action in recommend_module.RECOMMENDABLE
                if step.action == "some-layers":  # those layers alone make it fit
                    assert step.fits and len(ladder) == 1
            assert step.choice is (step.action in TASK_CHANGES)
            q = step.inputs
        assert q == plans.inputs
        assert not (plans.inputs.shards > 1 and plans.inputs.optimizer == "adamw-8bit")
        if plans.spread:  # the Trainer's script runs FSDP only: the PyTorch code runs it
            continue
        code = hf_code(plans.inputs)
        for step in plans.steps:
            markers = MARKERS.get(step.action, ())
            if step.action == "chunked-loss" and (model_type(plans.inputs)
                                                  not in LIGER_MODEL_TYPES):
                markers = ("Liger Kernel has no kernels for",)  # and says what to do instead
            for marker in markers:
                assert marker in code, (step.action, marker)
            if step.action == "more-gpus":
                assert "fsdp=True" in code and f"--num_processes {step.value}" in code
        assert plans.gpus == plans.inputs.shards >= p.shards
    # full fine-tunes consider more GPUs before a method change
    if rec.choices and p.tuning == "full":
        methods = [s for s in rec.choices if s.action in ("lora", "qlora")]
        more = [s for s in rec.choices if s.action == "more-gpus"]
        if methods and not more:
            assert all(not any(s.action == "more-gpus" for s in a.steps)
                       or any(s.action in ("lora", "qlora") for s in a.steps)
                       for a in rec.alternatives)


@pytest.mark.parametrize("key", list(_models()))
def test_every_plan_is_one_plan_with_its_headroom(key) -> None:
    """Every preset and pasted config (each family's), GPU count, tuning and GPU: the
    recommended plan is its table row and keeps the headroom."""
    arch = _models()[key]
    for gpus, tuning, gpu in itertools.product((1, 2, 8, 16), P.TUNINGS, ("a10", "h100")):
        _check_plan(P.PlannerInputs(arch, shards=gpus, tuning=tuning, batch=2,
                                    gpu_bytes=GPUS[gpu].bytes))
    for tuning, strategy in itertools.product(P.TUNINGS, ("some-layers", "none")):
        # eager attention, another headroom, the learner's own some-layers choice
        _check_plan(P.PlannerInputs(arch, tuning=tuning, fused=False, strategy=strategy,
                                    some_layers=max(1, arch.layers // 3), headroom=0.15,
                                    gpu_bytes=GPUS["h100"].bytes))
        _check_plan(P.PlannerInputs(arch, tuning=tuning, strategy=strategy, headroom=0.0,
                                    gpu_bytes=GPUS["a10"].bytes))


def test_the_pasted_mistral_lora_plan_is_the_row_marked_recommended() -> None:
    """Mistral-7B-v0.3, LoRA r16 on an A10 (24 GB): the headline recommended "first 28
    layers, 22.2 GiB, fits" while the row marked recommended said 32.2 GiB, short by
    9.7 GiB (computed for 16 layers); it also preferred 0.2 GiB to spare over every layer
    with 2.8 GiB, to recompute 4 fewer layers."""
    p = P.PlannerInputs(architecture(MISTRAL_7B_V03), tuning="lora", lora_rank=16,
                        gpu_bytes=GPUS["a10"].bytes)
    plan = recommend_module.plan(p)
    rec = plan.recommendation
    assert rec.fits and rec.strategy == plan.recommended_row == "some-layers"
    row = next(r for r in plan.rows if r.strategy == "some-layers")
    assert row.peak == rec.peak and row.fits
    assert plan.table_layers == rec.inputs.some_layers
    assert p.gpu_bytes - rec.peak >= 0.05 * p.gpu_bytes  # 1.1 GiB kept free at least
    # no headroom: the plan runs closer to the GPU, with fewer layers recomputed
    tight = recommend_module.plan(p.with_(headroom=0.0)).recommendation
    assert rec.peak < tight.peak <= p.gpu_bytes
    assert tight.inputs.some_layers < rec.inputs.some_layers
    # Qwen2.5-7B: its 152,064-token vocabulary's logits need the chunked loss too, so no
    # row of checkpointing alone is the plan, and none is marked recommended
    q = P.PlannerInputs(architecture(QWEN25_7B), tuning="lora", lora_rank=16,
                        gpu_bytes=GPUS["a10"].bytes)
    plan = recommend_module.plan(q)
    assert [s.action for s in plan.recommendation.steps] == ["every-layer", "chunked-loss"]
    assert plan.recommendation.fits and plan.recommended_row is None
    assert not next(r for r in plan.rows if r.strategy == "every-layer").fits


def test_no_approximation_of_no_size_is_printed() -> None:
    """"the peak is overstated by up to 0.0 GiB" was printed beside no checkpointing."""
    p = P.PlannerInputs(PRESETS["llama-3.1-8b"], tuning="lora", strategy="none",
                        gpu_bytes=GPUS["h100"].bytes)
    shown = recommend_module.plan(p).approximations
    assert "peaks-added" not in {a.id for a in shown}
    assert all(a.bytes is None or a.bytes >= recommend_module.MIN_SHOWN_BYTES for a in shown)
    assert "headroom" in {a.id for a in shown}


def test_fsdp_keeps_the_output_head_whole_on_every_gpu() -> None:
    """The 2-GPU full fine-tune "fit" at 76.9 of 80 GiB without the unit accelerate never
    reshards after forward: the output head and the final norm."""
    arch = PRESETS["llama-3.1-8b"]
    one = P.state_bytes(P.PlannerInputs(arch, shards=1))
    two = P.state_bytes(P.PlannerInputs(arch, shards=2))
    head = arch.vocab * arch.hidden + arch.hidden
    assert one["root"] == 0
    assert two["root"] == pytest.approx(head * 2 / 2)  # bf16 compute, half beyond the shard
    assert two["root"] / 2**30 == pytest.approx(0.49, abs=0.01)
    assert two["weights"] == pytest.approx(
        arch.params() * 6 / 2 + two["gathered"] + two["root"])  # fp32 master + bf16 copy
    shown = recommend_module.plan(P.PlannerInputs(arch, shards=2)).approximations
    assert "fsdp-root" in {a.id for a in shown}


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
    argv = ["--config", str(path), "--seq", "4096", "--batch", "1", "--precision",
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
    # the rows are for the table's some-layers count (the recommendation's when it is one)
    assert data["settings"]["headroom"] == P.DEFAULT_HEADROOM
    p = p.with_(some_layers=data["table_some_layers"])
    for strategy in P.STRATEGIES:
        row = data["strategies"][strategy]
        assert row["peak_bytes"] == P.peak_bytes(p, strategy)
        assert row["activations_kept_bytes"] == P.activations(p, strategy).kept
        assert row["fits"] == P.fits(p, strategy)
    rec = recommend_module.recommend(p)
    assert [s["action"] for s in data["recommendation"]["steps"]] == [
        s.action for s in rec.steps]
    assert data["recommendation"]["code"]["huggingface"] == hf_code(rec.inputs)
    # a headroom of 20%: nothing that leaves less than 16 GiB of the 80 free fits
    assert main([*argv[:-1], "--headroom", "20", "--json"]) == 0
    roomy = json.loads(capsys.readouterr().out)
    assert all(row["fits"] == (row["spare_bytes"] >= 16 * 2**30)
               for row in roomy["strategies"].values())
    assert main([*argv[:-1], "--headroom", "100"]) == 2
    assert "--headroom" in capsys.readouterr().err
    bad = tmp_path / "bert.json"
    bad.write_text('{"model_type": "bert"}')
    assert main(["--config", str(bad)]) == 2
    assert "model_type" in capsys.readouterr().err
