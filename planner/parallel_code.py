"""PyTorch code for a many-GPU layout on torch's own stack, for a transformers decoder-only
model (its decoder layers at model.model.layers, Llama's module names): DTensor's
parallelize_module for tensor (and sequence) parallelism inside each block, checkpointing
applied per block (checkpoint_wrapper), fully_shard (FSDP2) per block and on the root,
and torch.distributed.pipelining for the pipeline stages. Run under torchrun, one process
per GPU.

A mixture-of-experts block (a layer's mlp with `experts`: Mixtral, Qwen2-MoE, Qwen3-MoE
in transformers 5.24) keeps its experts as 3D parameters indexed expert by expert, which
DTensor's column and row styles do not split: the code splits the attention and runs the
whole block on every tensor-parallel GPU, FSDP sharding it (experts_words says so in the
code and on /plan, with how it differs from the planner's figures)."""

from __future__ import annotations

import functools
import math
import textwrap
from importlib import metadata

from i18n import DEFAULT, gettext
from memory.footprint import PlannerInputs
from memory.parallel import Layout, stage_layers
from planner.parallel_script import script
from planner.snippets import COMMENT_WIDTH, comment

_SCHEDULES = {"1f1b": "Schedule1F1B", "gpipe": "ScheduleGPipe",
              "interleaved": "ScheduleInterleaved1F1B"}

_HEAD = '''import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    PrepareModuleInputOutput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

TP, CP, PP, DP = {tp}, {cp}, {pp}, {dp}
SEQUENCE_PARALLEL = {sp}
{mp_doc}MP = MixedPrecisionPolicy({mp})
'''

_TP = '''

def tensor_parallel(block: nn.Module, tp_mesh) -> None:
{doc}
    attention = getattr(block, "self_attn", None)
    if not all(hasattr(attention, name) for name in ("q_proj", "k_proj", "v_proj", "o_proj")):
        raise NotImplementedError(f"{{type(block).__name__}}: "
{unsupported})
    sp = SEQUENCE_PARALLEL
    out = Shard(1) if sp else Replicate()
    plan = {{
        "self_attn.q_proj": ColwiseParallel(),
        "self_attn.k_proj": ColwiseParallel(),
        "self_attn.v_proj": ColwiseParallel(),
        "self_attn.o_proj": RowwiseParallel(output_layouts=out),
    }}
    for norm in ("q_norm", "k_norm"):
{head_norm_doc}
        if getattr(block.self_attn, norm, None) is not None:
            plan[f"self_attn.{{norm}}"] = SequenceParallel(sequence_dim=2,
                                                          use_local_output=True)
    if hasattr(block.mlp, "experts"):
{experts_doc}
        if sp:
            plan["mlp"] = PrepareModuleInputOutput(
                input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),),
                use_local_input=True, output_layouts=(Replicate(),),
                desired_output_layouts=(Shard(1),), use_local_output=True)
    else:
        plan.update({{
            "mlp.gate_proj": ColwiseParallel(),
            "mlp.up_proj": ColwiseParallel(),
            "mlp.down_proj": RowwiseParallel(output_layouts=out),
        }})
        if sp:
            plan["mlp"] = PrepareModuleInput(input_layouts=(Shard(1),),
                                             desired_input_layouts=(Replicate(),),
                                             use_local_output=True)
    if sp:
        plan.update({{
            "input_layernorm": SequenceParallel(),
            "post_attention_layernorm": SequenceParallel(),
            "self_attn": PrepareModuleInput(
                input_kwarg_layouts={{"hidden_states": Shard(1)}},
                desired_input_kwarg_layouts={{"hidden_states": Replicate()}},
                use_local_output=True),
        }})
    parallelize_module(block, tp_mesh, plan)


def sequence_parallel_ends(model: nn.Module, tp_mesh) -> None:
{sp_doc}
    inner, plan = model.model, {{}}
    if inner.embed_tokens is not None:
        plan["model.embed_tokens"] = RowwiseParallel(input_layouts=Replicate(),
                                                     output_layouts=Shard(1))
    if inner.norm is not None:
        plan["model.norm"] = SequenceParallel()
    if model.lm_head is not None:
        plan["lm_head"] = ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())
    parallelize_module(model, tp_mesh, plan)
'''

_BLOCKS = '''

def parallelize(model: nn.Module, mesh) -> nn.Module:
{doc}
    layers = model.model.layers
    if TP > 1 and SEQUENCE_PARALLEL:
        sequence_parallel_ends(model, mesh["tp"])
    for i, (name, block) in enumerate(list(layers.named_children())):
        if TP > 1:
            tensor_parallel(block, mesh["tp"])
{checkpointed}        fully_shard(block, mesh=mesh["dp_cp"], mp_policy=MP)
    fully_shard(model, mesh=mesh["dp_cp"], mp_policy=MP)
    return model
'''

_MESH = '''

def build_mesh(device: str = "cuda"):
{doc}
    mesh = init_device_mesh(device, (PP, DP, CP, TP),
                            mesh_dim_names=("pp", "dp", "cp", "tp"))
    mesh["dp", "cp"]._flatten(mesh_dim_name="dp_cp")
    return mesh
'''

_STAGE = '''

class Stage(nn.Module):
{doc}

    def __init__(self, model: nn.Module, stage: int, stages: int) -> None:
        super().__init__()
        inner, first, last = model.model, stage == 0, stage == stages - 1
        blocks = list(inner.layers)
        start, end = (len(blocks) * k // stages for k in (stage, stage + 1))
        self.model = nn.Module()
        self.model.embed_tokens = inner.embed_tokens if first else None
        self.model.layers = nn.ModuleDict({{str(k): blocks[k] for k in range(start, end)}})
        self.model.rotary_emb = inner.rotary_emb
        self.model.norm = inner.norm if last else None
        self.lm_head = model.lm_head if last else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner = self.model
        h = inner.embed_tokens(x) if inner.embed_tokens is not None else x
        tokens = h.shape[1] * (TP if TP > 1 and SEQUENCE_PARALLEL else 1)
        positions = torch.arange(tokens, device=h.device).unsqueeze(0)
        rope = inner.rotary_emb(h, positions)
        for block in inner.layers.values():
            h = block(h, position_embeddings=rope)
        if self.lm_head is not None:
            h = self.lm_head(inner.norm(h))
        return h
'''

_PIPE = '''

def pipeline(model: nn.Module, mesh, loss_fn, device: torch.device):
{doc}
    from torch.distributed.pipelining import PipelineStage, {schedule}

    pp_mesh, chunks = mesh["pp"], {chunks}
    stages = PP * chunks
    indices = [pp_mesh.get_local_rank() + k * PP for k in range(chunks)]
    modules = [parallelize(Stage(model, i, stages), mesh) for i in indices]
    runs = [PipelineStage(module, i, stages, device, group=pp_mesh.get_group())
            for i, module in zip(indices, modules)]
    return modules, {schedule}({runs}, n_microbatches={microbatches}, loss_fn=loss_fn)
'''

_TRANSFORMERS_TP = '''

def load_with_transformers_tp(path: str) -> nn.Module:
{doc}
    from transformers import AutoModelForCausalLM
    from transformers.distributed.configuration_utils import DistributedConfig

    model = AutoModelForCausalLM.from_pretrained(
        path, distributed_config=DistributedConfig(tp_size=TP, fsdp_size=DP))
{checkpointing}    return model
'''

_CP = '''

def context_parallel_step(model: nn.Module, input_ids: torch.Tensor, labels: torch.Tensor,
                          mesh, scale: float = 1.0) -> torch.Tensor:
{doc}
    from torch.distributed.tensor.experimental import context_parallel

    positions = torch.arange(input_ids.shape[1], device=input_ids.device)
    positions = positions.expand_as(input_ids).contiguous()
    with context_parallel(mesh["cp"], buffers=[input_ids, labels, positions],
                          buffer_seq_dims=[1, 1, 1]):
        logits = model(input_ids=input_ids, position_ids=positions).logits
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(),
                                           ignore_index=-100)
        (loss * scale).backward()
    return loss
'''


@functools.lru_cache(maxsize=64)
def tp_plan(family: str) -> tuple[str, ...]:
    """The module names in the tensor parallel plan (base_model_tp_plan) of the installed
    transformers' config class of `family` (a model_type), which its from_pretrained
    applies; () for none."""
    import transformers

    try:
        config = transformers.AutoConfig.for_model(family)
    except ValueError:
        return ()
    return tuple(getattr(config, "base_model_tp_plan", None) or ())


def has_tp_plan(family: str) -> bool:
    return bool(tp_plan(family))


def tp_plan_splits_experts(family: str) -> bool:
    """Whether that plan splits a mixture-of-experts block's experts (transformers 5.24:
    `packed_colwise` / `moe_tp_experts`; 5.25 drops them from it, leaving them in the
    expert-parallel plan that already names them in 5.24)."""
    return any(".experts" in name for name in tp_plan(family))


def transformers_route(p: PlannerInputs, layout: Layout) -> bool:
    """Whether the code also prints transformers' own tensor parallelism: a family whose
    class has a plan, tensor parallelism alone with FSDP (no pipeline or context
    parallelism, which this route does not take here) and a checkpointing it can apply
    (none, or every layer: activation_checkpointing_enable checkpoints each layer)."""
    return (layout.tp > 1 and layout.pp == 1 and layout.cp == 1 and layout.ep == 1
            and p.strategy in ("none", "every-layer", "two-layer", "budget")
            and bool(p.arch.family) and has_tp_plan(p.arch.family))


def checkpointed_per_stage(p: PlannerInputs, layout: Layout) -> int:
    """How many blocks "some-layers" checkpoints in each module the code builds: the plan's
    count, or under pipelining its share of each stage (the planner prices each stage's
    layers in proportion, memory.parallel / planner.parallel_plan), rounded up: never
    less checkpointed than priced."""
    stages = layout.pp * layout.chunks
    if stages == 1:
        return p.some_layers
    return math.ceil(p.some_layers * stage_layers(p.arch.layers, stages) / p.arch.layers)


def _checkpointed(p: PlannerInputs, layout: Layout) -> str:
    """The lines of the loop over blocks that checkpoint the plan's blocks (none for a
    plan without checkpointing; two-layer segments and the compiler's budget as every
    block, their nearest per-block form)."""
    wrap = "block = checkpoint_wrapper(block)\n{i}layers.register_module(name, block)\n"
    if p.strategy in ("every-layer", "two-layer", "budget"):
        return "        " + wrap.format(i="        ")
    if p.strategy == "some-layers":
        return (f"        if i < {checkpointed_per_stage(p, layout)}:\n            "
                + wrap.format(i="            "))
    return ""


def _string(text: str, indent: str) -> str:
    """`text` as adjacent Python string literals, one per line at `indent`, wrapped."""
    lines = textwrap.wrap(text, COMMENT_WIDTH - len(indent) - 2, drop_whitespace=False,
                          break_long_words=False, break_on_hyphens=False)
    return "\n".join(indent + repr(line) for line in lines)


def _doc(text: str, depth: int = 1) -> str:
    return "\n".join(comment(text, "    " * depth))


def experts_words(p: PlannerInputs, layout: Layout, code: str = DEFAULT) -> str:
    """What the printed code does with a mixture-of-experts block, in language `code`:
    kept whole on every tensor-parallel GPU and gathered whole by FSDP; for a model with
    experts, how that differs from the planner's figures (which count the experts split
    over the t GPUs of tensor parallelism and FSDP gathering the 1/ep of them a GPU holds
    under expert parallelism)."""
    words = gettext(code, "A mixture-of-experts block (its router, its experts, a shared "
                          "expert) stays whole on every tensor-parallel GPU: its experts are "
                          "3D parameters (experts x rows x columns) that the block indexes "
                          "expert by expert, which DTensor's column and row styles do not "
                          "split. Each tensor-parallel GPU runs the block on all the tokens "
                          "(with sequence parallelism it gathers them and keeps its slice of "
                          "the output); FSDP shards the experts over dp_cp.")
    family = p.arch.family
    if p.arch.expert_params and layout.tp > 1:
        if family and tp_plan_splits_experts(family):
            words += " " + gettext(code, "The planner's figures count the experts split over "
                                         "the tensor-parallel GPUs, as transformers' "
                                         "from_pretrained with a DistributedConfig splits "
                                         "them (the class's tp_plan): on each GPU this code "
                                         "holds {times} times the experts' weights, "
                                         "gradients and optimizer state those figures "
                                         "count.", times=layout.tp)
        else:
            words += " " + gettext(code, "The planner's figures count the experts split over "
                                         "the tensor-parallel GPUs: on each GPU this code "
                                         "holds {times} times the experts' weights, "
                                         "gradients and optimizer state those figures "
                                         "count.", times=layout.tp)
        if family and has_tp_plan(family) and not tp_plan_splits_experts(family):
            words += " " + gettext(code, "transformers {version}'s own route keeps them whole "
                                         "as well: the class's tensor-parallel plan "
                                         "(tp_plan) leaves the experts out.",
                                   version=metadata.version("transformers"))
    if p.arch.expert_params and layout.ep > 1:
        words += " " + gettext(code, "Nor does it split the experts over the "
                                     "expert-parallel GPUs (torch's parallelize_module has "
                                     "no expert-parallel style): FSDP gathers all the "
                                     "experts of a layer at once, where the planner's "
                                     "figures gather the 1/{ep} of them a GPU holds.",
                               ep=layout.ep)
    return words


def parallel_code(p: PlannerInputs, layout: Layout, code: str = DEFAULT,
                  per_node: int = 8) -> str:
    """The layout's PyTorch code, commented in language `code`: the building blocks, then
    the whole run (planner.parallel_script) and its torchrun command for nodes of
    `per_node` GPUs."""
    mixed = "param_dtype=torch.bfloat16, reduce_dtype=torch.float32"
    mp_doc = (gettext(code, "Mixed precision: FSDP gathers the weights in bf16 for the "
                            "compute and reduces the gradients in fp32; the fp32 weights and "
                            "the optimizer's state stay sharded.")
              if p.precision == "mixed" else "")
    out = _HEAD.format(tp=layout.tp, cp=layout.cp, pp=layout.pp, dp=layout.dp,
                       sp=layout.sp and layout.tp > 1,
                       mp=mixed if p.precision == "mixed" else "",
                       mp_doc="".join(line + "\n" for line in comment(mp_doc)))
    tp_doc = gettext(code, "Split the block's projections over the tensor-parallel GPUs: "
                           "q, k, v and the MLP's first projections by columns, the output "
                           "projections by rows; with sequence parallelism the norms run "
                           "on a slice of the tokens.")
    sp_doc = gettext(code, "Sequence parallelism between the blocks: the embedding's output "
                           "split along the tokens, the final norm on its slice, the head "
                           "gathering them. Pass position_ids (all the tokens' positions) "
                           "to the model: each GPU embeds only its slice.")
    head_norm_doc = gettext(code, "Norms over each head's dimensions (Qwen3's q_norm and "
                                  "k_norm) run on this GPU's heads: their weight whole on "
                                  "every tensor-parallel GPU, its gradient summed over them.")
    unsupported = gettext(code, "this code splits the attention's q_proj, k_proj, v_proj "
                                "and o_proj (Llama's names), which this block does not "
                                "have; where its class has a tensor-parallel plan, "
                                "transformers' own route applies it.")
    out += _TP.format(doc=_doc(tp_doc), sp_doc=_doc(sp_doc),
                      unsupported=_string(unsupported, " " * 34),
                      head_norm_doc=_doc(head_norm_doc, 2),
                      experts_doc=_doc(experts_words(p, layout, code), 2))
    checkpointed = _checkpointed(p, layout)
    blocks_doc = (gettext(code, "Tensor parallelism inside each block, then the block "
                                "checkpointed (its input kept, the rest recomputed in "
                                "backward), then sharded with FSDP; the root last.")
                  if checkpointed else
                  gettext(code, "Tensor parallelism inside each block, then sharded with "
                                "FSDP; the root last. This plan checkpoints no block: "
                                "every block keeps its activations for backward."))
    if p.strategy == "two-layer":
        blocks_doc += " " + gettext(code, "The plan's two-layer segments are checkpointed here "
                                          "block by block, their nearest form inside the FSDP "
                                          "units (a checkpoint around two units would gather "
                                          "both at once): this code keeps what the table's "
                                          "every-layer row counts.")
    elif p.strategy == "budget":
        blocks_doc += " " + gettext(code, "The plan's compiler budget is replaced here by a "
                                          "checkpoint on every block: this code keeps what "
                                          "the table's every-layer row counts.")
    out += _BLOCKS.format(checkpointed=checkpointed, doc=_doc(blocks_doc))
    mesh_doc = gettext(code, "The GPUs as a grid: pipeline x data x context x tensor "
                             "parallel. FSDP shards the training state over the data and "
                             "context parallel GPUs together (dp_cp).")
    out += _MESH.format(doc=_doc(mesh_doc))
    if layout.pp > 1:
        stage_doc = gettext(code, "One pipeline stage's share of a transformers decoder: "
                                  "its blocks in order, the embedding on the first stage, "
                                  "the final norm and the head on the last.")
        pipe_doc = gettext(code, "This GPU's pipeline stages (one, or `chunks` of them under "
                                 "the interleaved schedule), each parallelized and "
                                 "checkpointed as above, and the schedule that runs the "
                                 "micro-batches through them. The first stage's step() "
                                 "takes the input ids, the last's the labels (shifted by "
                                 "one, -100 at the end) and a list that receives the "
                                 "losses.")
        interleaved = layout.schedule == "interleaved"
        out += _STAGE.format(doc=_doc(stage_doc))
        out += _PIPE.format(schedule=_SCHEDULES[layout.schedule],
                            chunks=layout.chunks, runs="runs" if interleaved else "runs[0]",
                            microbatches=layout.microbatches, doc=_doc(pipe_doc))
    if transformers_route(p, layout):
        hf_doc = gettext(code, "Or transformers' own route: from_pretrained splits the "
                               "weights by the model class's tensor-parallel plan "
                               "(base_model_tp_plan) over TP GPUs and shards them with "
                               "FSDP over DP; transformers 5.24 does not wire sequence "
                               "parallelism into it, so the norms' activations stay whole. "
                               "Run under torchrun with the process group initialized.")
        ckpt = ("" if p.strategy == "none" else
                "    model.activation_checkpointing_enable(\n"
                "        activation_checkpointing_kwargs={\"use_reentrant\": False})\n")
        out += _TRANSFORMERS_TP.format(doc=_doc(hf_doc), checkpointing=ckpt)
    if layout.cp > 1:
        cp_doc = gettext(code, "Context parallelism: each GPU of the cp mesh runs its slice "
                               "of the sequence; for attention torch all-gathers the keys and "
                               "values of the whole sequence by default (set_rotate_method("
                               "\"alltoall\") passes them around a ring instead). The "
                               "labels come shifted by one (-100 at the end), "
                               "since a slice cannot shift its own. torch runs it with "
                               "CUDA's attention kernels only.")
        out += _CP.format(doc=_doc(cp_doc))
    return out + script(p, layout, per_node, code)
