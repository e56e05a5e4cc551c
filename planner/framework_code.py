"""The plan as a DeepSpeed config and as Megatron-LM flags, beside the Hugging Face and
PyTorch code (planner.hf_code, planner.parallel_code), from the same plan objects
(planner.framework_plan). Each comes with notes in the learner's language: what a switch
does for activations, and where the framework has no faithful equivalent of the plan
(then it says so rather than print something else).

Names as DeepSpeed 0.19.8 and Megatron-Core 0.16.1 spell them, checked against their
sources (docs/PLANNER_GPUS.md cites file and function):
* DeepSpeed: `zero_optimization` (deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig),
  `bf16` (runtime/precision_config.py, DeepSpeedBF16Config), `activation_checkpointing`
  (runtime/activation_checkpointing/config.py); the section configures
  `deepspeed.checkpointing.checkpoint` only through `deepspeed.checkpointing.configure`,
  which the model's code calls (runtime/activation_checkpointing/checkpointing.py); the
  engine never reads it, nor does transformers' Trainer.
* Megatron-LM: the flags of megatron/training/arguments.py at tag core_v0.16.1 (the
  training script is not in the megatron-core package); recomputation as
  megatron/core/transformer/transformer_block.py runs it.
"""

from __future__ import annotations

import json

from i18n import DEFAULT, gettext
from memory.footprint import PlannerInputs
from memory.parallel import Layout
from planner.framework_plan import FrameworkPlan, effective_strategy, framework_plan
from planner.snippets import comment

DEEPSPEED_VERSION = "0.19.8"
MEGATRON_CORE_VERSION = "0.16.1"
MAIN_PORT = 29500  # torchrun's default rendezvous port
RECOMPUTE_MODULES = ("core_attn", "mlp", "layernorm", "moe", "moe_act", "shared_experts",
                     "mla_up_proj")


# ---------------------------------------------------------------- DeepSpeed


def zero_stage(plan: FrameworkPlan) -> int:
    """ZeRO-3 for the plan's FSDP (weights, gradients and optimizer state sharded), 1 under
    pipelining (DeepSpeed's pipeline engine refuses 2 and 3), 0 without sharding."""
    if plan.sharding != "full" or plan.layout.dp == 1:  # ZeRO shards over data parallelism
        return 0
    return 1 if plan.layout.pp > 1 else 3


def partitions_checkpoints(plan: FrameworkPlan) -> bool:
    """Whether the plan splits each checkpoint over the tensor-parallel GPUs (sequence
    parallelism does): DeepSpeed's partition_activations does the same."""
    return plan.layout.tp > 1 and plan.layout.sp and plan.recompute.granularity == "full"


def deepspeed_config(plan: FrameworkPlan) -> dict:
    """The DeepSpeed config (a JSON object) for the plan."""
    p, stage = plan.p, zero_stage(plan)
    config: dict = {
        "train_batch_size": plan.global_batch,
        "train_micro_batch_size_per_gpu": p.batch,
        "gradient_accumulation_steps": plan.micro_batches,
    }
    if p.precision in ("mixed", "bf16"):
        bf16: dict = {"enabled": True}
        if p.precision == "bf16" and p.tuning == "full" and stage:
            bf16 |= {"bf16_master_weights_and_grads": True, "bf16_optimizer_states": True}
        config["bf16"] = bf16
    zero: dict = {"stage": stage}
    if stage:
        zero |= {"overlap_comm": True, "contiguous_gradients": True}
    if p.offload and stage:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    config["zero_optimization"] = zero
    if plan.recompute.granularity == "full":
        config["activation_checkpointing"] = {
            "partition_activations": partitions_checkpoints(plan),
            "cpu_checkpointing": False,
            "contiguous_memory_optimization": False,
            "number_checkpoints": plan.recompute.checkpoints,
            "synchronize_checkpoint_boundary": False,
            "profile": False,
        }
    return config


def deepspeed_notes(plan: FrameworkPlan, code: str = DEFAULT) -> list[str]:
    """What the config does and does not do for this plan, in language `code`."""
    p, lay, rec, stage = plan.p, plan.layout, plan.recompute, zero_stage(plan)
    notes = []
    if rec.granularity == "full":
        notes.append(gettext(
            code, "activation_checkpointing configures deepspeed.checkpointing.checkpoint, "
                  "which the model's own code must call around its layers after "
                  "deepspeed.checkpointing.configure(mpu, deepspeed_config=...), as "
                  "Megatron-DeepSpeed does; deepspeed.initialize does not read the section. "
                  "A Hugging Face model under the Trainer with DeepSpeed checkpoints with "
                  "torch's checkpoint instead: activation_checkpointing=True in "
                  "TrainingArguments (gradient_checkpointing=True before transformers 5), "
                  "as the Hugging Face code sets it, and this section changes nothing."))
        if rec.method == "block":
            notes.append(gettext(
                code, "Checkpoint the first {count} layers of each of the {stages} stages "
                      "({total} in all); the others keep their activations.",
                count=rec.num_layers, stages=plan.stages, total=rec.recomputed)
                if plan.stages > 1 else
                gettext(code, "Checkpoint the first {count} layers only; the others keep "
                              "their activations.", count=rec.num_layers))
        elif rec.num_layers == 2:
            notes.append(gettext(code, "Checkpoint the layers two at a time: one checkpoint "
                                       "per pair, {count} on the most loaded GPU.",
                                 count=rec.checkpoints))
        else:
            notes.append(gettext(code, "Checkpoint every layer: {count} checkpoints on the "
                                       "most loaded GPU.", count=rec.checkpoints))
        if partitions_checkpoints(plan):
            notes.append(gettext(
                code, "partition_activations splits each checkpoint over the {tp} "
                      "tensor-parallel GPUs (ZeRO-R's partitioned activations, Megatron's "
                      "--distribute-saved-activations), as the plan's sequence parallelism "
                      "splits it.", tp=lay.tp))
        elif lay.tp > 1:
            notes.append(gettext(
                code, "partition_activations is off: without sequence parallelism the plan "
                      "keeps each checkpoint whole on every tensor-parallel GPU; on, it "
                      "would split them over the {tp} GPUs.", tp=lay.tp))
        notes.append(gettext(
            code, "cpu_checkpointing would move the checkpoints to host memory (the plan "
                  "keeps them on the GPU); contiguous_memory_optimization copies "
                  "partitioned checkpoints into one buffer of number_checkpoints and needs "
                  "partition_activations; synchronize_checkpoint_boundary and profile only "
                  "time the checkpoints."))
    elif effective_strategy(p) == "selective":
        notes.append(gettext(
            code, "The plan's selective checkpointing is the fused attention kernel "
                  "(attn_implementation=\"sdpa\" in the Hugging Face code), which recomputes "
                  "the attention scores in backward; DeepSpeed's config has no switch for "
                  "it."))
    elif not rec.equivalent:
        notes.append(gettext(
            code, "The plan's compiler memory budget has no equivalent in DeepSpeed's config: "
                  "it prints no checkpointing."))
    else:
        notes.append(gettext(code, "The plan checkpoints no layer: no "
                                   "activation_checkpointing section."))
    if stage == 3:
        notes.append(gettext(
            code, "ZeRO stage 3 shards the weights, gradients and optimizer state over the "
                  "{count} data-parallel GPUs, as the plan's FSDP does (stage 1 would shard "
                  "the optimizer state only). No ZeRO stage shards activations.",
            count=lay.dp))
    elif stage == 1:
        notes.append(gettext(
            code, "ZeRO stage 1 only: DeepSpeed's pipeline engine refuses stages 2 and 3. It "
                  "shards the optimizer state alone, so each GPU holds its stage's weights "
                  "and gradients whole: more than the plan's FSDP counts."))
    if lay.tp > 1 or lay.pp > 1 or lay.ep > 1:
        notes.append(gettext(
            code, "DeepSpeed's config does not split the model: tensor, pipeline and expert "
                  "parallelism come from the model's code (Megatron-DeepSpeed's mpu, "
                  "deepspeed.pipe.PipelineModule, deepspeed.moe). This config covers data "
                  "parallelism (size {dp}).", dp=lay.dp))
    if lay.cp > 1:
        notes.append(gettext(
            code, "Context parallelism has no counterpart here (DeepSpeed's sequence "
                  "parallelism is Ulysses, set up in code): ZeRO shards over data "
                  "parallelism (size {dp}), not over the plan's {shards} GPUs.", dp=lay.dp,
            shards=plan.shards))
    if p.precision == "mixed":
        notes.append(gettext(
            code, "bf16: DeepSpeed runs the model in bf16 and keeps fp32 master weights in "
                  "the optimizer; the plan's mixed precision keeps fp32 weights and runs "
                  "under autocast."))
    elif p.precision == "bf16" and "bf16_master_weights_and_grads" not in (
            deepspeed_config(plan).get("bf16") or {}):
        notes.append(gettext(
            code, "DeepSpeed keeps fp32 master weights beside the bf16 ones here (its "
                  "bf16-only master weights need ZeRO stage 1 or more): more than the plan's "
                  "pure bf16 counts."))
    return notes


# ---------------------------------------------------------------- Megatron


def model_flags(plan: FrameworkPlan) -> list[str]:
    """The model's shape as Megatron's flags (its data and tokenizer flags are the
    user's)."""
    arch, p = plan.p.arch, plan.p
    flags = ["--num-layers", str(arch.layers), "--hidden-size", str(arch.hidden),
             "--ffn-hidden-size", str(arch.mlp_width),
             "--num-attention-heads", str(arch.heads)]
    if arch.kv_heads != arch.heads:
        flags += ["--group-query-attention", "--num-query-groups", str(arch.kv_heads)]
    if arch.head_dim * arch.heads != arch.hidden:
        flags += ["--kv-channels", str(arch.head_dim)]
    flags += ["--seq-length", str(p.seq),
              "--max-position-embeddings", str(max(p.seq, arch.positions))]
    if arch.norm == "rmsnorm":
        flags += ["--normalization", "RMSNorm"]
    if arch.mlp == "swiglu":
        flags.append("--swiglu")
    if not arch.positions:
        flags += ["--position-embedding-type", "rope"]
    if not arch.linear_bias and not arch.qkv_bias:
        flags.append("--disable-bias-linear")
    elif arch.qkv_bias and not arch.linear_bias:
        flags += ["--disable-bias-linear", "--add-qkv-bias"]
    if not arch.tied:
        flags.append("--untie-embeddings-and-output-weights")
    experts = getattr(p.source, "experts", None)
    if experts:
        flags += ["--num-experts", str(experts[0]), "--moe-router-topk", str(experts[1])]
    return flags


def megatron_fsdp(plan: FrameworkPlan) -> bool:
    """Whether the flags shard as the plan's FSDP does (Megatron-FSDP; not with pipeline
    stages, where the distributed optimizer stands in)."""
    return plan.sharding == "full" and plan.layout.pp == 1


def megatron_env(plan: FrameworkPlan) -> dict[str, str]:
    """The environment Megatron asks for: one CUDA connection under tensor or context
    parallelism on Hopper and earlier GPUs (megatron/training/arguments.py, validate_args
    refuses to start otherwise), which Megatron-FSDP asks not to set."""
    lay = plan.layout
    if (lay.tp > 1 or lay.cp > 1) and not megatron_fsdp(plan):
        return {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    return {}


def megatron_flags(plan: FrameworkPlan) -> list[str]:
    """Megatron-LM's flags for the plan: the model, the layout, the batch, precision,
    sharding, optimizer and recomputation."""
    p, lay, rec = plan.p, plan.layout, plan.recompute
    flags = model_flags(plan)
    flags += ["--tensor-model-parallel-size", str(lay.tp)]
    if lay.sp and lay.tp > 1:
        flags.append("--sequence-parallel")
    flags += ["--pipeline-model-parallel-size", str(lay.pp),
              "--context-parallel-size", str(lay.cp)]
    if lay.pp > 1 and lay.schedule == "interleaved":
        flags += ["--num-virtual-stages-per-pipeline-rank", str(lay.chunks)]
    if lay.ep > 1:
        flags += ["--expert-model-parallel-size", str(lay.ep)]
    flags += ["--micro-batch-size", str(p.batch), "--global-batch-size",
              str(plan.global_batch)]
    if p.precision in ("mixed", "bf16"):
        flags.append("--bf16")
    if megatron_fsdp(plan):
        flags += ["--use-distributed-optimizer", "--use-megatron-fsdp",
                  "--data-parallel-sharding-strategy", "optim_grads_params",
                  "--ckpt-format", "fsdp_dtensor"]
    elif plan.sharding == "full":
        flags.append("--use-distributed-optimizer")
    if p.optimizer == "sgd-momentum":
        flags += ["--optimizer", "sgd", "--sgd-momentum", "0.9"]
    elif p.optimizer == "adamw":
        flags += ["--optimizer", "adam"]
    if rec.granularity:
        flags += ["--recompute-granularity", rec.granularity]
    if rec.method:
        flags += ["--recompute-method", rec.method, "--recompute-num-layers",
                  str(rec.num_layers)]
    return flags


def megatron_notes(plan: FrameworkPlan, code: str = DEFAULT) -> list[str]:
    """What the flags do and where Megatron differs from the plan, in language `code`."""
    p, lay, rec = plan.p, plan.layout, plan.recompute
    notes = []
    if rec.method == "uniform" and rec.num_layers == 1:
        notes.append(gettext(
            code, "Full recomputation of every layer: Megatron keeps each layer's input and "
                  "reruns the layer in backward ({count} checkpoints on the most loaded "
                  "GPU).", count=rec.checkpoints))
    elif rec.method == "uniform":
        notes.append(gettext(
            code, "Units of 2 layers: one checkpoint per pair of layers, each pair rerun in "
                  "backward ({count} checkpoints on the most loaded GPU).",
            count=rec.checkpoints))
    elif rec.method == "block":
        notes.append(gettext(
            code, "--recompute-method block recomputes the first {count} layers of each "
                  "pipeline stage (Megatron counts per stage, {stages} of them here): "
                  "{total} layers in all, the plan checkpoints {planned}.",
            count=rec.num_layers, stages=plan.stages, total=rec.recomputed,
            planned=max(0, min(p.arch.layers, p.some_layers))))
    elif rec.granularity == "selective":
        notes.append(gettext(
            code, "--recompute-granularity selective recomputes the modules of "
                  "--recompute-modules, by default core_attn: the attention's softmax and "
                  "dropout over the s x s scores, which the plan's fused attention kernel "
                  "does not keep either (other choices: {modules}). With Transformer "
                  "Engine's fused attention the core attention keeps no scores anyway.",
            modules=", ".join(RECOMPUTE_MODULES[1:])))
    elif not rec.equivalent:
        notes.append(gettext(
            code, "The plan's compiler memory budget has no equivalent in Megatron: no "
                  "recomputation flags are printed."))
    if rec.granularity == "full" and lay.tp > 1:
        if lay.sp:
            notes.append(gettext(
                code, "Sequence parallelism already splits each checkpoint over the {tp} "
                      "tensor-parallel GPUs; Megatron refuses --distribute-saved-activations "
                      "with it.", tp=lay.tp))
        else:
            notes.append(gettext(
                code, "--distribute-saved-activations would split each checkpoint over the "
                      "{tp} tensor-parallel GPUs (as DeepSpeed's partition_activations); the "
                      "plan keeps them whole, so it is not set.", tp=lay.tp))
    if megatron_fsdp(plan):
        notes.append(gettext(
            code, "Megatron-FSDP with optim_grads_params shards the weights, gradients and "
                  "optimizer state over the {count} data x context parallel GPUs, as the "
                  "plan's FSDP (ZeRO-3); --use-distributed-optimizer alone (about ZeRO-1) "
                  "shards only the optimizer state and the fp32 main weights.",
            count=plan.shards))
    elif plan.sharding == "full":
        notes.append(gettext(
            code, "With pipeline stages these flags use the distributed optimizer (about "
                  "ZeRO-1): it shards the optimizer state and the fp32 main weights over the "
                  "{count} data x context parallel GPUs, while each GPU holds its stage's "
                  "weights and gradients whole: more than the plan's FSDP counts.",
            count=plan.shards))
    if lay.pp > 1 and lay.schedule == "gpipe":
        notes.append(gettext(
            code, "Megatron has no GPipe schedule: it runs 1F1B, which keeps fewer "
                  "micro-batches in flight than the plan counts."))
    if lay.pp > 1 and not plan.even_stages:
        notes.append(gettext(
            code, "The {layers} layers do not split evenly into {stages} stages: give "
                  "Megatron --decoder-first-pipeline-num-layers and "
                  "--decoder-last-pipeline-num-layers.", layers=p.arch.layers,
            stages=plan.stages))
    if p.precision == "mixed":
        notes.append(gettext(
            code, "--bf16: bf16 weights with fp32 main weights and gradients in the "
                  "optimizer; the plan's mixed precision keeps fp32 weights under autocast."))
    elif p.precision == "bf16":
        notes.append(gettext(
            code, "--bf16 keeps fp32 main weights in the optimizer: more than the plan's pure "
                  "bf16 counts."))
    if p.optimizer == "adamw-8bit":
        notes.append(gettext(
            code, "Megatron has no 8-bit AdamW: its Adam (the default, no flag printed) keeps "
                  "32-bit moments, more than the plan counts."))
    if p.tuning != "full":
        notes.append(gettext(
            code, "Megatron-LM's training script has no LoRA or QLoRA: these flags train "
                  "every weight, which needs far more memory than the plan."))
    if p.offload:
        notes.append(gettext(
            code, "The plan keeps the optimizer state in host memory; Megatron's "
                  "--optimizer-cpu-offload needs its precision-aware optimizer (not "
                  "printed)."))
    notes.append(gettext(code, "Add your data, tokenizer and schedule flags (--data-path or "
                               "--mock-data, --tokenizer-type, --train-iters, --lr)."))
    return notes


def launch(plan: FrameworkPlan, per_node: int) -> list[str]:
    """torchrun's line for Megatron's pretrain_gpt.py on the plan's GPUs."""
    gpus = plan.layout.gpus
    nodes = max(1, -(-gpus // per_node))
    per = gpus // nodes
    env = "".join(f"{name}={value} " for name, value in megatron_env(plan).items())
    if nodes == 1:
        return [f"{env}torchrun --nproc-per-node {per} pretrain_gpt.py"]
    return [f"{env}torchrun --nnodes {nodes} --nproc-per-node {per} --node-rank $NODE_RANK",
            f"    --master-addr $MAIN_IP --master-port {MAIN_PORT} pretrain_gpt.py"]


# ---------------------------------------------------------------- printed text


def _commented(notes: list[str]) -> list[str]:
    return [line for note in notes for line in comment(note)]


def deepspeed_text(plan: FrameworkPlan, code: str = DEFAULT) -> str:
    """The notes as comments, then ds_config.json."""
    head = comment(gettext(code, "ds_config.json for DeepSpeed {version}:",
                           version=DEEPSPEED_VERSION))
    return "\n".join([*head, *_commented(deepspeed_notes(plan, code)),
                      json.dumps(deepspeed_config(plan), indent=2)])


def megatron_text(plan: FrameworkPlan, per_node: int = 8, code: str = DEFAULT) -> str:
    """The notes as comments, then the launch line with one flag (and its value) a line."""
    head = comment(gettext(code, "Megatron-LM (Megatron-Core {version}), one process per "
                                 "GPU:", version=MEGATRON_CORE_VERSION))
    flags, pairs = megatron_flags(plan), []
    for flag in flags:
        if flag.startswith("--") or not pairs:
            pairs.append(flag)
        else:
            pairs[-1] += f" {flag}"
    lines = launch(plan, per_node) + [f"    {pair}" for pair in pairs]
    body = [line + " \\" for line in lines[:-1]] + lines[-1:]
    return "\n".join([*head, *_commented(megatron_notes(plan, code)), *body])


def framework_code(p: PlannerInputs, layout: Layout | None = None, per_node: int = 8,
                   code: str = DEFAULT) -> dict:
    """Both frameworks for one plan, as the command's JSON holds them."""
    plan = framework_plan(p, layout)
    return {"deepspeed": deepspeed_text(plan, code), "deepspeed_config": deepspeed_config(plan),
            "megatron": megatron_text(plan, per_node, code),
            "megatron_flags": megatron_flags(plan), "megatron_env": megatron_env(plan)}
