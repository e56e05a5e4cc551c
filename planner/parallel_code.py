"""PyTorch code for a many-GPU layout on torch's own stack, for a transformers decoder-only
model (its decoder layers at model.model.layers, Llama's module names): DTensor's
parallelize_module for tensor (and sequence) parallelism inside each block, checkpointing
applied per block (checkpoint_wrapper), fully_shard (FSDP2) per block and on the root,
and torch.distributed.pipelining for the pipeline stages. Run under torchrun, one process
per GPU."""

from __future__ import annotations

from i18n import DEFAULT, gettext
from memory.footprint import PlannerInputs
from memory.parallel import Layout
from planner.snippets import comment

_SCHEDULES = {"1f1b": "Schedule1F1B", "gpipe": "ScheduleGPipe",
              "interleaved": "ScheduleInterleaved1F1B"}

_HEAD = '''import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

TP, PP, DP = {tp}, {pp}, {dp}
SEQUENCE_PARALLEL = {sp}
'''

_TP = '''

def tensor_parallel(block: nn.Module, tp_mesh) -> None:
{doc}
    sp = SEQUENCE_PARALLEL
    plan = {{
        "self_attn.q_proj": ColwiseParallel(),
        "self_attn.k_proj": ColwiseParallel(),
        "self_attn.v_proj": ColwiseParallel(),
        "self_attn.o_proj": RowwiseParallel(output_layouts=Shard(1) if sp else Replicate()),
        "mlp.gate_proj": ColwiseParallel(),
        "mlp.up_proj": ColwiseParallel(),
        "mlp.down_proj": RowwiseParallel(output_layouts=Shard(1) if sp else Replicate()),
    }}
    if sp:
        plan.update({{
            "input_layernorm": SequenceParallel(),
            "post_attention_layernorm": SequenceParallel(),
            "self_attn": PrepareModuleInput(
                input_kwarg_layouts={{"hidden_states": Shard(1)}},
                desired_input_kwarg_layouts={{"hidden_states": Replicate()}},
                use_local_output=True),
            "mlp": PrepareModuleInput(input_layouts=(Shard(1),),
                                      desired_input_layouts=(Replicate(),),
                                      use_local_output=True),
        }})
    parallelize_module(block, tp_mesh, plan)


def sequence_parallel_ends(model: nn.Module, tp_mesh) -> None:
{sp_doc}
    parallelize_module(model, tp_mesh, {{
        "model.embed_tokens": RowwiseParallel(input_layouts=Replicate(),
                                              output_layouts=Shard(1)),
        "model.norm": SequenceParallel(),
        "lm_head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    }})
'''

_BLOCKS = '''

def parallelize(model: nn.Module, mesh) -> nn.Module:
{doc}
    layers = model.model.layers
    if TP > 1 and SEQUENCE_PARALLEL:
        sequence_parallel_ends(model, mesh["tp"])
    for i, block in enumerate(layers):
        if TP > 1:
            tensor_parallel(block, mesh["tp"])
{checkpointed}        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model
'''

_MESH = '''

def build_mesh(device: str = "cuda"):
    return init_device_mesh(device, (PP, DP, TP), mesh_dim_names=("pp", "dp", "tp"))
'''

_PIPE = '''

def pipeline(stage_module: nn.Module, mesh, loss_fn, device: torch.device):
{doc}
    from torch.distributed.pipelining import PipelineStage, {schedule}

    pp_mesh = mesh["pp"]
    stage = PipelineStage(stage_module, pp_mesh.get_local_rank(), PP, device,
                          group=pp_mesh.get_group())
    return {schedule}(stage, n_microbatches={microbatches}, loss_fn=loss_fn)
'''


def _checkpointed(p: PlannerInputs) -> str:
    """The lines of the loop over blocks that checkpoint the plan's blocks (none for a
    plan without checkpointing; two-layer segments and the compiler's budget as every
    block, their nearest per-block form)."""
    wrap = "block = checkpoint_wrapper(block)\n{i}layers[i] = block\n"
    if p.strategy in ("every-layer", "two-layer", "budget"):
        return "        " + wrap.format(i="        ")
    if p.strategy == "some-layers":
        return (f"        if i < {p.some_layers}:\n            "
                + wrap.format(i="            "))
    return ""


def _doc(text: str) -> str:
    return "\n".join(comment(text, "    "))


def parallel_code(p: PlannerInputs, layout: Layout, code: str = DEFAULT) -> str:
    """The layout's PyTorch code, commented in language `code`."""
    out = _HEAD.format(tp=layout.tp, pp=layout.pp, dp=layout.dp * layout.cp,
                       sp=layout.sp and layout.tp > 1)
    tp_doc = gettext(code, "Split the block's projections over the tensor-parallel GPUs: "
                           "q, k, v and the MLP's first projections by columns, the output "
                           "projections by rows; with sequence parallelism the norms run "
                           "on a slice of the tokens.")
    sp_doc = gettext(code, "Sequence parallelism between the blocks: the embedding's output "
                           "split along the tokens, the final norm on its slice, the head "
                           "gathering them. Pass position_ids (all the tokens' positions) "
                           "to the model: each GPU embeds only its slice.")
    out += _TP.format(doc=_doc(tp_doc), sp_doc=_doc(sp_doc))
    checkpointed = _checkpointed(p)
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
    out += _MESH
    if layout.pp > 1:
        pipe_doc = gettext(code, "One pipeline stage per GPU of the pp mesh: `stage_module` "
                                 "is this stage's share of the blocks (the first stage with "
                                 "the embedding, the last with the norm, the head and the "
                                 "loss).")
        out += _PIPE.format(schedule=_SCHEDULES[layout.schedule],
                            microbatches=layout.microbatches, doc=_doc(pipe_doc))
    if layout.cp > 1:
        cp_doc = gettext(code, "Context parallelism: run each step inside "
                               "torch.distributed.tensor.experimental.context_parallel(mesh, "
                               "buffers=...) over a cp mesh dimension; here its GPUs are "
                               "counted with DP for FSDP.")
        out += "\n" + "\n".join(comment(cp_doc)) + "\n"
    return out
