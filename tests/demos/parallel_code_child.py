"""Runs the planner's printed many-GPU code (planner.parallel_code) in two processes on
the CPU over gloo: a tiny transformers Llama, tiny Mixtral and tiny Qwen3-MoE (mixtures of
experts), tensor parallel over both ranks (without and with sequence parallelism), then in
two pipeline stages over 4 micro-batches (GPipe and 1F1B), their blocks checkpointed as the
plan names them and sharded with fully_shard, and transformers' own tensor-parallel route;
then the whole printed script (train(): built on the meta device, split, its weights read
from safetensors, two AdamW steps) under tensor with sequence parallelism and in two 1F1B
stages. Rank 0 writes each run's loss, the reference loss of the same weights in one process, the
largest gradient difference and which blocks ran checkpointed."""

from __future__ import annotations

import copy
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper
from transformers import AutoModelForCausalLM, LlamaForCausalLM

from demos.pipeline_bubble import exit_without_teardown
from memory.architectures import PRESETS
from memory.footprint import PlannerInputs
from memory.parallel import Layout
from model_classes.causal_lm_config import hf_config
from planner.parallel_code import parallel_code
from tests.demos.class_fixtures import load, tiny
from tests.demos.tiny_hf import SEQ, TINY

WORLD = 2


def printed(strategy: str, layout: Layout) -> str:
    """The code for the 8B preset in fp32 (the tiny models' dtype: the steps are compared
    with one process's to 1e-5; mixed precision would cast the weights to bf16)."""
    p = PlannerInputs(PRESETS["llama-3.1-8b"], strategy=strategy, some_layers=2,
                      precision="fp32")
    return parallel_code(p, layout)


def tiny_model(family: str) -> torch.nn.Module:
    """The tiny model of `family` ("llama", or a config of tests/demos/class_fixtures:
    "mixtral-8x7b", "qwen3-235b-a22b", 4 experts, top-2), its weights drawn from seed 0,
    SDPA attention."""
    torch.manual_seed(0)
    if family == "llama":
        config = TINY["llama"]()
        config._attn_implementation = "sdpa"
        return LlamaForCausalLM(config)
    return AutoModelForCausalLM.from_config(hf_config(tiny(load(family))),
                                            attn_implementation="sdpa")


def _full(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's whole value (a plain tensor as it is), detached."""
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach()


RUNS = ((False, "every-layer"), (True, "some-layers"))  # some-layers: the first 2 of 4
# mixture-of-experts models, tensor parallel with and without sequence parallelism ("tp",
# "tp+sp"), and FSDP alone over both ranks ("dp": the experts sharded along their first dim)
MOE_RUNS = (("mixtral-8x7b", "tp+sp", "some-layers"), ("mixtral-8x7b", "dp", "every-layer"),
            ("qwen3-235b-a22b", "tp", "every-layer"), ("qwen3-235b-a22b", "tp+sp", "every-layer"))
LAYOUTS = {"tp": Layout(tp=WORLD), "tp+sp": Layout(tp=WORLD, sp=True), "dp": Layout(dp=WORLD)}
# pipeline: two stages; some-layers (2 of the preset's 32 layers) is 1 block per stage
PIPE_RUNS = (("llama", "gpipe", "every-layer"), ("llama", "1f1b", "some-layers"),
             ("mixtral-8x7b", "1f1b", "some-layers"))
TRANSFORMERS_RUNS = ("llama", "mixtral-8x7b", "qwen3-235b-a22b")
MICROBATCHES = 4
# the whole printed script (train()), two optimizer steps on the tiny Llama saved as
# safetensors: tensor with sequence parallelism, and two 1F1B pipeline stages
SCRIPT_RUNS = (("tp+sp", "every-layer"), ("pp", "some-layers"))
SCRIPT_LAYOUTS = {"tp+sp": Layout(tp=WORLD, sp=True),
                  "pp": Layout(pp=WORLD, microbatches=MICROBATCHES, schedule="1f1b")}


def _run(rank: int, store: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=WORLD)
    try:
        results = [{"sp": sp, "strategy": strategy,
                    **_step("llama", Layout(tp=WORLD, sp=sp), strategy)}
                   for sp, strategy in RUNS]
        experts = [{"family": family, "layout": layout, "strategy": strategy,
                    **_step(family, LAYOUTS[layout], strategy)}
                   for family, layout, strategy in MOE_RUNS]
        piped = []
        for family, schedule, strategy in PIPE_RUNS:
            ranks: list = [None] * WORLD
            dist.all_gather_object(ranks, _pipeline_step(rank, family, schedule, strategy))
            piped.append({"family": family, "schedule": schedule, "strategy": strategy,
                          "ranks": ranks})
        transformers_tp = [{"family": family,
                            **_transformers_step(rank, os.path.dirname(store), family)}
                           for family in TRANSFORMERS_RUNS]
        scripts = []
        for layout, strategy in SCRIPT_RUNS:
            ranks = [None] * WORLD
            dist.all_gather_object(ranks, _script_run(os.path.dirname(store), layout,
                                                      strategy))
            scripts.append({"layout": layout, "strategy": strategy, "ranks": ranks})
        if rank == 0:
            with open(out, "w", encoding="utf-8") as handle:
                json.dump({"tp": results, "moe": experts, "pp": piped,
                           "transformers": transformers_tp, "script": scripts}, handle)
    finally:
        dist.destroy_process_group()
    exit_without_teardown()


def _step(family: str, layout: Layout, strategy: str) -> dict:
    """One training step of the printed code on the tiny model of `family` and of the same
    weights in one process."""
    model = tiny_model(family)
    ids = torch.randint(0, model.config.vocab_size, (2, SEQ), generator=torch.Generator()
                        .manual_seed(1))
    reference = copy.deepcopy(model)
    positions = torch.arange(SEQ).expand(2, SEQ)
    ref_loss = reference(input_ids=ids, labels=ids).loss
    ref_loss.backward()
    namespace: dict = {}
    exec(printed(strategy, layout), namespace)  # noqa: S102 - the code under test
    mesh = namespace["build_mesh"]("cpu")
    namespace["parallelize"](model, mesh)
    loss = model(input_ids=ids, labels=ids, position_ids=positions).loss
    loss.backward()
    pairs = list(zip(model.parameters(), reference.parameters(), strict=True))
    grad_diff = max((_full(p.grad) - r.grad).abs().max().item() for p, r in pairs)
    grad_scale = max(r.grad.abs().max().item() for _, r in pairs)
    wrapped = [isinstance(block, CheckpointWrapper) for block in model.model.layers]
    blocks = [type(getattr(block, "_checkpoint_wrapped_module", block)).__name__
              for block in model.model.layers]
    return {"loss": _full(loss).item(), "reference": ref_loss.item(),
            "grad_max_diff": grad_diff, "grad_max": grad_scale,
            "checkpointed": wrapped, "blocks": blocks}


def _transformers_step(rank: int, folder: str, family: str) -> dict:
    """The printed alternative, transformers' own tensor parallelism (from_pretrained with
    a DistributedConfig), on the tiny model of `family` saved by rank 0: one step beside the
    same checkpoint loaded in one process; for a mixture-of-experts model, also the rows of
    the first layer's experts' gate_up_proj this rank holds (of all of them)."""
    path = os.path.join(folder, f"tiny-{family}")
    if rank == 0:
        tiny_model(family).save_pretrained(path)
    dist.barrier()
    namespace: dict = {}
    exec(printed("every-layer", Layout(tp=WORLD)), namespace)  # noqa: S102 - under test
    model = namespace["load_with_transformers_tp"](path)
    model.train()
    reference = AutoModelForCausalLM.from_pretrained(path)
    ids = torch.randint(0, model.config.vocab_size, (2, SEQ),
                        generator=torch.Generator().manual_seed(1))
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    ref_loss = reference(input_ids=ids, labels=ids).loss
    ref_loss.backward()
    references = dict(reference.named_parameters())
    diffs = [(_full(p.grad) - references[name].grad).abs().max().item()
             for name, p in model.named_parameters()]
    return {"loss": _full(loss).item(), "reference": ref_loss.item(),
            "grad_max_diff": max(diffs),
            "grad_max": max(r.grad.abs().max().item() for r in references.values()),
            "split": type(model.model.layers[0].self_attn.q_proj.weight).__name__,
            "expert_rows": _expert_rows(model, reference),
            "model_type": model.config.model_type,
            "checkpointed": [layer.gradient_checkpointing for layer in model.model.layers]}


def _expert_rows(model: torch.nn.Module, reference: torch.nn.Module) -> list[int] | None:
    """The rows of the first layer's experts' gate_up_proj (experts x rows x columns) on
    this rank and in the whole model; None for a model without experts."""
    experts = getattr(model.model.layers[0].mlp, "experts", None)
    if experts is None:
        return None
    mine = experts.gate_up_proj
    mine = mine.to_local() if hasattr(mine, "to_local") else mine
    return [mine.shape[1], reference.model.layers[0].mlp.experts.gate_up_proj.shape[1]]


def shifted(ids: torch.Tensor) -> torch.Tensor:
    """The labels as the printed code takes them: the next token, -100 at the end."""
    return torch.cat([ids[:, 1:], torch.full_like(ids[:, :1], -100)], dim=1)


def _pipeline_step(rank: int, family: str, schedule: str, strategy: str) -> dict:
    """One step of the printed pipeline code (this rank's stage) on the tiny model of
    `family` beside the same weights in one process: the loss (on the last stage), the
    largest gradient difference of the stage's parameters, and which of its blocks ran
    checkpointed."""
    import torch.nn.functional as F

    model = tiny_model(family)
    ids = torch.randint(0, model.config.vocab_size, (MICROBATCHES, SEQ),
                        generator=torch.Generator().manual_seed(1))
    reference = copy.deepcopy(model)
    ref_loss = reference(input_ids=ids, labels=ids).loss
    ref_loss.backward()
    namespace: dict = {}
    layout = Layout(pp=WORLD, microbatches=MICROBATCHES, schedule=schedule)
    exec(printed(strategy, layout), namespace)  # noqa: S102 - the code under test
    mesh = namespace["build_mesh"]("cpu")

    def loss_fn(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(),
                               ignore_index=-100)

    modules, runner = namespace["pipeline"](model, mesh, loss_fn, torch.device("cpu"))
    losses: list[torch.Tensor] = []
    if rank == 0:
        runner.step(ids)
    else:
        runner.step(target=shifted(ids), losses=losses)
    references = dict(reference.named_parameters())
    diffs = {name: (_full(p.grad) - references[name].grad).abs().max().item()
             for name, p in model.named_parameters() if p.grad is not None}
    return {"loss": torch.stack(losses).mean().item() if losses else None,
            "reference": ref_loss.item(), "grads": sorted(diffs),
            "parameters": len(references),
            "grad_max_diff": max(diffs.values()),
            "grad_max": max(r.grad.abs().max().item() for r in references.values()),
            "checkpointed": [isinstance(block, CheckpointWrapper)
                             for module in modules for block in module.model.layers.children()]}


def _script_run(folder: str, layout: str, strategy: str) -> dict:
    """The whole printed script, train(), for two optimizer steps on the tiny Llama that
    _transformers_step saved (safetensors): built on the meta device, split, its weights
    read from the checkpoint, AdamW; beside one process loading the same checkpoint and
    taking the same two steps on the same rows. The losses of both steps on every rank
    (the pipeline's first stage: 0) and the device build() puts the parameters on."""
    path = os.path.join(folder, "tiny-llama")
    namespace: dict = {}
    exec(printed(strategy, SCRIPT_LAYOUTS[layout]), namespace)  # noqa: S102 - under test
    namespace.update(MODEL=path, STEPS=2)
    generator = torch.Generator().manual_seed(2)
    rows = [{"input_ids": torch.randint(0, TINY["llama"]().vocab_size, (SEQ,),
                                        generator=generator)} for _ in range(16)]
    build = namespace["build"]
    losses = namespace["train"](rows, torch.device("cpu"))
    data = namespace["batches"](rows, namespace["build_mesh"]("cpu"))
    reference = AutoModelForCausalLM.from_pretrained(path)
    optimizer = torch.optim.AdamW(reference.parameters(), lr=namespace["LR"])
    expected = []
    for _ in range(2):
        ids = next(data)
        loss = reference(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        expected.append(loss.item())
    return {"losses": losses, "reference": expected,
            "built_on": sorted({str(p.device) for p in build(path).parameters()})}


def main(out: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(_run, args=(f"{folder}/store", out), nprocs=WORLD, join=True)


if __name__ == "__main__":
    main(sys.argv[1])
