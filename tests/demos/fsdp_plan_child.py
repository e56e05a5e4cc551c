"""Runs the planner's printed FSDP script in each process of a real multi-process launch
(`accelerate launch --num_processes 2 --cpu tests/demos/fsdp_plan_child.py FAMILY PLAN OUT`
on the CPU, gloo): the printed file is run as it is (`runpy`), with these replaced before
it starts: `AutoModelForCausalLM.from_pretrained` returns a tiny random-init model of the
family (nothing is downloaded), `AutoConfig.from_pretrained` its config, `train_dataset`
is a few random token rows; `AutoModelForCausalLM.from_config` (what the processes that
do not load build, under accelerate's init_empty_weights) is the library's, recorded.

After `trainer.train()` rank 0 writes what it measured to OUT (JSON): the class of each
decoder layer as the Trainer holds it (the checkpoint wrapper, the FSDP unit inside it),
each rank's local parameter count beside the full one, the MLP calls per layer and the
micro-batches run forward, the losses, how far the parameters moved from the weights
process 0 loaded, and which process loaded weights and which built the model empty.
"""

from __future__ import annotations

import json
import math
import os
import runpy
import sys
import warnings

import torch

torch.set_num_threads(1)

import torch.distributed as dist  # noqa: E402
import transformers  # noqa: E402
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (  # noqa: E402
    CheckpointWrapper,
)
from torch.distributed.fsdp import FSDPModule  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402

from tests.demos.tiny_hf import SEQ, TINY, decoder_layers  # noqa: E402

ROWS = 4  # per epoch: 2 micro-batches of one row on each of 2 ranks, one optimizer step




def _fsdp_on_cpu(seen: dict) -> None:
    """Let accelerate keep the FSDP plugin on a multi-process CPU run (gloo): its
    AcceleratorState takes the plugin only for the GPU-like distributed types
    (accelerate/state.py, AcceleratorState.__init__, 1.15.0) and drops it for MULTI_CPU,
    where the Trainer would then train with DDP. Everything else is accelerate's own."""
    from accelerate.state import AcceleratorState, PartialState
    from accelerate.utils import DistributedType

    original = AcceleratorState.__init__

    def init(self, *args, fsdp_plugin=None, **kwargs) -> None:
        original(self, *args, fsdp_plugin=fsdp_plugin, **kwargs)
        if fsdp_plugin is not None and self.distributed_type == DistributedType.MULTI_CPU:
            seen["accelerate_dropped_fsdp_on_cpu"] = True
            self.distributed_type = DistributedType.FSDP
            if self._mixed_precision != "no":
                fsdp_plugin.set_mixed_precision(self._mixed_precision)
            self.fsdp_plugin = fsdp_plugin
            PartialState._shared_state["distributed_type"] = self.distributed_type

    AcceleratorState.__init__ = init


def _holds(layer: torch.nn.Module) -> bool:
    """Whether the layer's own FSDP state shards exactly the layer's parameters."""
    state = layer._get_fsdp_state()
    held = {id(fsdp_param.sharded_param) for group in state._fsdp_param_groups
            for fsdp_param in group.fsdp_params}
    return held == {id(q) for q in layer.parameters()}


def main(family: str, plan: str, out: str) -> None:
    seen: dict = {"mlp_calls": [], "forwards": 0, "losses": []}

    from_config = transformers.AutoModelForCausalLM.from_config

    def recorded(model):
        """The model with its MLP calls, forwards and losses counted."""
        layers = decoder_layers(model)
        seen["mlp_calls"] = [0] * len(layers)
        for index, layer in enumerate(layers):
            def count(module, args, index=index) -> None:
                seen["mlp_calls"][index] += 1
            layer.mlp.register_forward_pre_hook(count)
        model.get_input_embeddings().register_forward_pre_hook(
            lambda module, args: seen.__setitem__("forwards", seen["forwards"] + 1))
        model.register_forward_hook(
            lambda module, args, output: seen["losses"].append(float(output.loss)))
        return model

    def from_pretrained(name, dtype=None, attn_implementation=None, **kwargs):
        """The checkpoint's weights: a tiny random-init model of the family (seeded)."""
        torch.manual_seed(0)
        model = from_config(TINY[family](), dtype=dtype, attn_implementation=attn_implementation)
        seen["loaded_weights"] = True
        seen["before"] = {n: q.detach().clone() for n, q in model.named_parameters()}
        seen["loaded"] = {"name": name, "dtype": str(dtype), "attn": attn_implementation}
        return recorded(model)

    def empty_model(config, dtype=None, attn_implementation=None, **kwargs):
        """What the printed script builds without weights (under init_empty_weights)."""
        model = from_config(config, dtype=dtype, attn_implementation=attn_implementation)
        seen["built_empty"] = all(q.is_meta for q in model.parameters())
        seen["real_buffers"] = not any(b.is_meta for b in model.buffers())
        return recorded(model)

    transformers.AutoModelForCausalLM.from_config = empty_model
    transformers.AutoConfig.from_pretrained = lambda name, **kwargs: TINY[family]()
    transformers.AutoModelForCausalLM.from_pretrained = from_pretrained
    _fsdp_on_cpu(seen)
    # bf16=True is refused without a bf16 GPU; the CPU runs bf16 autocast all the same
    transformers.training_args.is_torch_bf16_gpu_available = lambda: True
    torch.manual_seed(1)
    ids = torch.randint(0, 128, (ROWS, SEQ))
    dataset = [{"input_ids": row, "labels": row} for row in ids]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        namespace = runpy.run_path(plan, init_globals={"train_dataset": dataset},
                                   run_name="__main__")
    trainer = namespace["trainer"]
    model = trainer.model
    layers = decoder_layers(model)
    units = [layer for layer in layers if isinstance(layer, FSDPModule)]
    parents = {id(child): parent for parent in model.modules()
               for child in parent.children()}
    holders = [parents[id(layer)] for layer in layers]
    local = sum(q.to_local().numel() if isinstance(q, DTensor) else q.numel()
                for q in model.parameters())
    full = sum(q.numel() for q in model.parameters())
    moved = 0.0  # on the process that loaded the weights, against them
    for name, q in model.named_parameters():
        whole = q.full_tensor() if isinstance(q, DTensor) else q  # collective: every rank
        key = name.replace("._checkpoint_wrapped_module", "")
        if "before" in seen:
            moved = max(moved, float((whole.detach().float()
                                      - seen["before"][key].float()).abs().max()))
    rank = {
        "rank": dist.get_rank(),
        "world": dist.get_world_size(),
        "backend": dist.get_backend(),
        "layer_classes": [type(layer).__name__ for layer in layers],
        "fsdp_units": len(units),
        "layer_unit_holds_its_params": [_holds(layer) for layer in layers],
        # each parameter's compute dtype (None: as stored); the group's own policy moved
        # to the parameters in torch 2.15 (FSDPParamGroup.mp_policy is gone)
        "layer_compute_dtype": sorted({str(param.param_dtype or "as stored")
                                       for layer in layers for group in
                                       layer._get_fsdp_state()._fsdp_param_groups
                                       for param in group.fsdp_params}),
        "sharded_dtypes": sorted({str(q.dtype) for q in model.parameters()}),
        "root_is_fsdp": isinstance(model, FSDPModule),
        "layer_holders": [type(holder).__name__ for holder in holders],
        "layer_in_checkpoint_wrapper": [isinstance(holder, CheckpointWrapper)
                                        for holder in holders],
        "layer_gradient_checkpointing": [bool(layer.gradient_checkpointing)
                                         for layer in layers],
        "trainer_activation_checkpointing": bool(trainer.args.activation_checkpointing),
        "local_params": local,
        "full_params": full,
        "layer_local_params": [sum(q.to_local().numel() for q in layer.parameters())
                               for layer in layers],
        "layer_full_params": [sum(q.numel() for q in layer.parameters())
                              for layer in layers],
        "mlp_calls": seen["mlp_calls"],
        "forwards": seen["forwards"],
        "losses": seen["losses"],
        "losses_finite": all(math.isfinite(x) for x in seen["losses"]),
        "steps": trainer.state.global_step,
        "epochs": trainer.args.num_train_epochs,
        "rows": ROWS,
        "train_loss": [entry["train_loss"] for entry in trainer.state.log_history
                       if "train_loss" in entry],
        "max_param_change": moved if "before" in seen else None,
        "loaded": seen.get("loaded"),
        "loaded_weights": seen.get("loaded_weights", False),
        "built_empty": seen.get("built_empty", False),
        "real_buffers": seen.get("real_buffers", True),
        "node_rank": int(os.environ.get("GROUP_RANK", os.environ.get("NODE_RANK", "0"))),
        "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
        "accelerate_dropped_fsdp_on_cpu": seen.get("accelerate_dropped_fsdp_on_cpu", False),
    }
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, rank)
    if dist.get_rank() == 0:
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"ranks": everyone}, f, indent=1)
    # Ended here, not by the interpreter's exit: a process group still alive then can abort
    # the process ("terminate called without an active exception") after a good run.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:4])
