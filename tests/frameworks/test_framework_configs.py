"""The DeepSpeed config and the Megatron-LM flags the planner prints, checked by the
frameworks themselves: DeepSpeed's DeepSpeedConfig (its pydantic models for ZeRO and
bf16, the batch arithmetic over the data-parallel world) and deepspeed.checkpointing.
configure reading the activation_checkpointing section; Megatron-LM's parse_args and
validate_args (from a Megatron-LM checkout at the installed megatron-core's tag, given in
MEGATRON_LM_SRC) and the TransformerConfig of the installed megatron-core built from them.
Without a checkout the flags go through a parser rebuilt from the vendored table of
Megatron's options (tests/frameworks/megatron_source.py) and TransformerConfig directly.

They need deepspeed and megatron-core, which the app does not: `make test-frameworks`
builds .venv-frameworks with them and runs this file there; elsewhere it is skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

deepspeed = pytest.importorskip("deepspeed")
pytest.importorskip("megatron.core")

from memory.architectures import PRESETS  # noqa: E402
from memory.footprint import STRATEGIES, PlannerInputs  # noqa: E402
from memory.parallel import Layout  # noqa: E402
from planner.framework_code import (  # noqa: E402
    deepspeed_config,
    megatron_env,
    megatron_flags,
)
from planner.framework_plan import framework_plan  # noqa: E402
from tests.frameworks.megatron_source import load_arguments, read_table, table_parser  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOURCE = os.environ.get("MEGATRON_LM_SRC", "")
LLAMA_70B = PRESETS["llama-3.1-70b"]
GPUS, PER_NODE = 16, 8
LAYOUTS = {
    "fsdp": Layout(dp=16),
    "tp8-sp": Layout(tp=8, sp=True, dp=2),
    "tp8-sp-pp2": Layout(tp=8, sp=True, pp=2, microbatches=8),
    "tp8-pp2": Layout(tp=8, pp=2, microbatches=8),
    "tp4-sp-cp2-dp2": Layout(tp=4, sp=True, cp=2, dp=2),
    "tp4-pp4-interleaved": Layout(tp=4, sp=True, pp=4, schedule="interleaved", chunks=2,
                                  microbatches=8),
}


# ---------------------------------------------------------------- DeepSpeed


class Mpu:
    """The model-parallel unit DeepSpeed asks for its group sizes (no processes)."""

    def __init__(self, dp: int, tp: int) -> None:
        self.dp, self.tp = dp, tp

    def get_data_parallel_world_size(self) -> int:
        return self.dp

    def get_tensor_model_parallel_rank(self) -> int:
        return 0

    def get_tensor_model_parallel_world_size(self) -> int:
        return self.tp

    def get_tensor_model_parallel_group(self) -> None:
        return None


@pytest.fixture
def one_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 of a world DeepSpeed does not launch (its comm module answers directly)."""
    monkeypatch.setattr(deepspeed.comm, "get_rank", lambda *a, **k: 0)
    monkeypatch.setattr(deepspeed.comm, "get_world_size", lambda *a, **k: GPUS)


def check_deepspeed(config: dict, layout: Layout) -> SimpleNamespace:
    """DeepSpeed's own reading of `config` on the plan's data-parallel GPUs, and of its
    activation_checkpointing section by deepspeed.checkpointing.configure."""
    from deepspeed.runtime.activation_checkpointing import checkpointing
    from deepspeed.runtime.activation_checkpointing.config import ACT_CHKPT_DEFAULT
    from deepspeed.runtime.config import DeepSpeedConfig

    json.loads(json.dumps(config))  # JSON as printed
    parsed = DeepSpeedConfig(config, mpu=Mpu(layout.dp, layout.tp))
    section = config.get("activation_checkpointing")
    if section is not None:
        # DeepSpeed reads the section key by key and ignores any other: every key is one
        # of its own, of its default's type
        assert set(section) <= set(ACT_CHKPT_DEFAULT)
        for key, value in section.items():
            default = ACT_CHKPT_DEFAULT[key]
            assert isinstance(value, int if default is None else type(default)), key
        checkpointing.configure(Mpu(layout.dp, layout.tp), deepspeed_config=config)
        assert section["partition_activations"] == checkpointing.PARTITION_ACTIVATIONS
        assert checkpointing.num_layers == section["number_checkpoints"]
        assert checkpointing.CPU_CHECKPOINT is False
    return parsed


# ---------------------------------------------------------------- Megatron

EXTRA = ["--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "128256",
         "--train-iters", "10", "--lr", "1e-5"]


def check_megatron(flags: list[str], gpus: int, monkeypatch: pytest.MonkeyPatch,
                   env: dict[str, str]):
    """(args, TransformerConfig) as Megatron reads `flags` on `gpus` GPUs, with the
    environment `env` the printed launch line sets."""
    from megatron.core.transformer import TransformerConfig

    assert all(isinstance(flag, str) for flag in flags)
    if SOURCE:
        arguments = load_arguments(Path(SOURCE))
        monkeypatch.setattr(sys, "argv", ["pretrain_gpt.py", *flags, *EXTRA])
        monkeypatch.setenv("WORLD_SIZE", str(gpus))
        monkeypatch.setenv("RANK", "0")
        monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(arguments, "get_device_arch_version", lambda: 9)  # an H100
        args = arguments.parse_args()
        arguments.validate_args(args)
        # this machine has no Transformer Engine: its fused RoPE kernel is off, as
        # Megatron asks (nothing the planner prints)
        args.apply_rope_fusion = False
        return args, arguments.core_transformer_config_from_args(args)
    args = table_parser(read_table()).parse_args([*flags, *EXTRA])
    import torch

    config = TransformerConfig(
        num_layers=args.num_layers, hidden_size=args.hidden_size,
        num_attention_heads=args.num_attention_heads,
        num_query_groups=args.num_query_groups if args.group_query_attention else None,
        ffn_hidden_size=args.ffn_hidden_size,
        tensor_model_parallel_size=args.tensor_model_parallel_size,
        pipeline_model_parallel_size=args.pipeline_model_parallel_size,
        virtual_pipeline_model_parallel_size=args.num_virtual_stages_per_pipeline_rank,
        context_parallel_size=args.context_parallel_size,
        sequence_parallel=args.sequence_parallel,
        expert_model_parallel_size=args.expert_model_parallel_size,
        recompute_granularity=args.recompute_granularity,
        recompute_method=args.recompute_method,
        recompute_num_layers=args.recompute_num_layers,
        distribute_saved_activations=args.distribute_saved_activations,
        bf16=args.bf16, params_dtype=torch.bfloat16 if args.bf16 else torch.float32,
        pipeline_dtype=torch.bfloat16 if args.bf16 else torch.float32)
    return args, config


# ---------------------------------------------------------------- the plans


def plans() -> list[tuple[str, PlannerInputs, Layout]]:
    base = PlannerInputs(LLAMA_70B, seq=4096, shards=GPUS, some_layers=40)
    return [(f"{name}-{strategy}", base.with_(strategy=strategy), layout)
            for name, layout in LAYOUTS.items() for strategy in STRATEGIES]


@pytest.mark.parametrize(("name", "p", "layout"), plans(), ids=[n for n, _, _ in plans()])
def test_each_plan_is_read_by_both_frameworks(name, p, layout, one_rank, monkeypatch):
    plan = framework_plan(p, layout)
    config = deepspeed_config(plan)
    ds = check_deepspeed(config, layout)
    assert ds.world_size == layout.dp
    assert ds.train_batch_size == plan.global_batch
    assert ds.gradient_accumulation_steps == plan.micro_batches
    args, core = check_megatron(megatron_flags(plan), layout.gpus, monkeypatch,
                                megatron_env(plan))
    assert (core.tensor_model_parallel_size, core.pipeline_model_parallel_size,
            core.context_parallel_size) == (layout.tp, layout.pp, layout.cp)
    assert core.sequence_parallel == (layout.sp and layout.tp > 1)
    assert args.global_batch_size == plan.global_batch
    rec = plan.recompute
    assert (core.recompute_granularity, core.recompute_method,
            core.recompute_num_layers) == (rec.granularity, rec.method, rec.num_layers)
    if SOURCE:  # Megatron's own data-parallel size is the plan's
        assert args.data_parallel_size == layout.dp
    # the same recomputation in both: DeepSpeed's checkpoints are Megatron's units
    section = config.get("activation_checkpointing")
    assert (section is not None) == (rec.granularity == "full")
    if section:
        assert section["number_checkpoints"] == rec.checkpoints


def test_the_first_k_layers_are_counted_per_stage(one_rank, monkeypatch):
    """Megatron's block method counts per pipeline stage: 40 of 80 layers over 2 stages
    is 20 per stage, and both stages together recompute the plan's 40."""
    p = PlannerInputs(LLAMA_70B, seq=4096, shards=GPUS, strategy="some-layers",
                      some_layers=40)
    layout = LAYOUTS["tp8-sp-pp2"]
    plan = framework_plan(p, layout)
    _, core = check_megatron(megatron_flags(plan), 16, monkeypatch, megatron_env(plan))
    assert core.recompute_method == "block"
    assert core.recompute_num_layers * core.pipeline_model_parallel_size == p.some_layers


# ---------------------------------------------------------------- as printed


def printed(*flags: str) -> dict:
    """`python -m planner --json` run in the app's own virtualenv."""
    python = ROOT / ".venv" / "bin" / "python"
    if not python.exists():
        pytest.skip("the app's virtualenv (.venv) prints the plan: make .venv first")
    out = subprocess.run([str(python), "-m", "planner", "--model", "llama-3.1-70b",
                          "--gpus", str(GPUS), "--gpus-per-node", str(PER_NODE), "--json",
                          *flags], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("flags", [(), ("--tp", "8", "--sp", "--pp", "2")],
                         ids=["recommended", "tp8-sp-pp2"])
def test_the_printed_70b_plan_on_two_nodes(flags, one_rank, monkeypatch):
    """Llama 3.1 70B asked on 16 GPUs (2 nodes x 8): a full fine-tune with AdamW does not
    fit them (8-bit AdamW cannot run under FSDP2), so the plan takes whole nodes more; the
    printed config and flags are read by DeepSpeed and Megatron at the plan's own GPU
    count, and say the same checkpointing and sharding as the Hugging Face and PyTorch
    code printed beside them."""
    data = printed(*flags)
    rec, par = data["recommendation"], data["parallel"]
    code, settings, lay = rec["code"], rec["settings"], par["layout"]
    layers = data["model"]["layers"]
    gpus = settings["gpus"]
    assert gpus > GPUS and gpus % PER_NODE == 0 and rec["fits"] and lay["gpus"] == gpus
    assert par["code"] == code and par["strategy"] == settings["strategy"]  # one plan
    layout = Layout(tp=lay["tp"], sp=lay["sp"], cp=lay["cp"], pp=lay["pp"],
                    schedule=lay["schedule"], microbatches=lay["microbatches"],
                    chunks=lay["chunks"], dp=lay["dp"])
    ds = check_deepspeed(code["deepspeed_config"], layout)
    args, core = check_megatron(code["megatron_flags"], gpus, monkeypatch,
                                code["megatron_env"])
    assert (core.tensor_model_parallel_size, core.context_parallel_size,
            core.pipeline_model_parallel_size) == (lay["tp"], lay["cp"], lay["pp"])
    assert core.sequence_parallel == lay["sp"]
    if lay["tp"] * lay["cp"] * lay["pp"] == 1:  # FSDP alone: the Trainer's code
        assert "fsdp=True" in code["huggingface"] and ds.zero_optimization_stage == 3
        assert args.use_megatron_fsdp
        assert args.data_parallel_sharding_strategy == "optim_grads_params"
        if settings["strategy"] == "every-layer":
            assert "model.activation_checkpointing_enable()" in code["huggingface"]
    else:  # the layout's own script
        sizes = f"TP, CP, PP, DP = {lay['tp']}, {lay['cp']}, {lay['pp']}, {lay['dp']}"
        assert sizes in code["pytorch"]
        checkpointed = "checkpoint_wrapper(block)" in code["pytorch"]
        assert checkpointed == (core.recompute_granularity == "full")
    if settings["strategy"] == "every-layer":
        assert (core.recompute_granularity, core.recompute_method,
                core.recompute_num_layers) == ("full", "uniform", 1)
        assert code["deepspeed_config"]["activation_checkpointing"][
            "number_checkpoints"] == layers
    if settings["strategy"] == "two-layer":
        assert core.recompute_num_layers == 2 and core.recompute_method == "uniform"
