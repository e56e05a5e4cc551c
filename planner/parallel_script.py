"""The rest of the many-GPU PyTorch code (planner.parallel_code) that makes it a whole
training script: the model built on the meta device (no memory until it is split), split
as planned (parallelize, or this GPU's pipeline stages), its parameters created on the
GPU (each GPU only its shards), the weights read from the checkpoint's safetensors (each
GPU only its slices, torch.distributed.checkpoint's HuggingFaceStorageReader), the
optimizer, the step loop (micro-batches accumulated, or run through the pipeline's
schedule, or the context-parallel step) and the torchrun command for the plan's nodes.

`train(train_dataset, device)` is the whole run on one process of an initialized process
group (the tests call it on the CPU over gloo); `main` sets up the process group torchrun
starts it in."""

from __future__ import annotations

from i18n import DEFAULT, gettext
from memory.footprint import PlannerInputs
from memory.parallel import Layout
from planner.hf_code import MAIN_PORT, model_id
from planner.snippets import comment

_SETTINGS = """

# ---------------------------------------------------------------- the whole run

MODEL = {model!r}
{model_doc}
SEQ, MICRO_BATCH, ACCUMULATION = {seq}, {batch}, {accumulation}{accumulation_doc}
STEPS, LR = 1000, 1e-5
DTYPE = torch.{dtype}
TIED = {tied}  # the head shares the embedding's weight (not in the checkpoint)
"""

_RUN = """

def build(path: str) -> nn.Module:
{build_doc}
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(path)
    with init_empty_weights(include_buffers=False):
        return AutoModelForCausalLM.from_config(config, attn_implementation="sdpa",
                                                dtype=DTYPE)


def materialize(modules: list[nn.Module], device: torch.device) -> None:
{materialize_doc}
    for module in modules:
        buffers = {{name: b.clone() for name, b in module.named_buffers()}}
        module.to_empty(device=device)
        with torch.no_grad():
            for name, b in module.named_buffers():
                b.copy_(buffers[name])


def load_weights(modules: list[nn.Module], path: str) -> None:
{load_doc}
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_model_state_dict,
        set_model_state_dict,
    )

    for module in modules:
        state = get_model_state_dict(module)
        if TIED:
            state.pop("lm_head.weight", None)
        dcp.load(state, storage_reader=dcp.HuggingFaceStorageReader(path))
        set_model_state_dict(module, state)


def batches(train_dataset, mesh):
{data_doc}
    from torch.utils.data import DataLoader, DistributedSampler

    sampler = DistributedSampler(train_dataset, num_replicas=DP,
                                 rank=mesh["dp"].get_local_rank(), seed=0, drop_last=True)
    rows = MICRO_BATCH * ACCUMULATION
    while True:
        for batch in DataLoader(train_dataset, batch_size=rows, sampler=sampler,
                                drop_last=True):
            yield batch["input_ids"]


def shifted(ids: torch.Tensor) -> torch.Tensor:
    return torch.cat([ids[:, 1:], torch.full_like(ids[:, :1], -100)], dim=1)


def value(loss: torch.Tensor) -> float:
    return float(loss.full_tensor() if isinstance(loss, DTensor) else loss)


def train(train_dataset, device: torch.device) -> list[float]:
{train_doc}
    mesh = build_mesh(device.type)
    model = build(MODEL)
    if PP > 1:
        if CP > 1:
{pp_cp}
            raise NotImplementedError("CP > 1 with PP > 1")

        def loss_fn(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            return nn.functional.cross_entropy(logits.flatten(0, 1).float(),
                                               labels.flatten(), ignore_index=-100)

        modules, schedule = pipeline(model, mesh, loss_fn, device)
    else:
        modules = [parallelize(model, mesh)]
    materialize(modules, device)
    load_weights(modules, MODEL)
    optimizer = {optimizer}
    data, losses = batches(train_dataset, mesh), []
    for _ in range(STEPS):
        ids = next(data).to(device)
        if PP > 1:
            rank, kept = mesh["pp"].get_local_rank(), []
            schedule.step(*([ids] if rank == 0 else []),
                          **(dict(target=shifted(ids), losses=kept) if rank == PP - 1
                             else {{}}))
            loss = torch.stack(kept).mean() if kept else torch.zeros((), device=device)
        else:
            loss = torch.zeros((), device=device)
            for micro in ids.split(MICRO_BATCH):
                if CP > 1:
                    part = context_parallel_step(model, micro, shifted(micro), mesh,
                                                 scale=1 / ACCUMULATION)
                else:
                    positions = torch.arange(micro.shape[1], device=device).expand_as(micro)
                    part = model(input_ids=micro, labels=micro, position_ids=positions).loss
                    (part / ACCUMULATION).backward()
                loss += value(part) / ACCUMULATION
        optimizer.step()
        optimizer.zero_grad()
        losses.append(value(loss))
    return losses


def main(train_dataset) -> None:
{main_doc}
    import os

    import torch.distributed as dist

    dist.init_process_group()
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    try:
        train(train_dataset, torch.device("cuda", local))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(train_dataset)  # {dataset_doc}
"""

_OPTIMIZERS = {
    "adamw": "torch.optim.AdamW([p for m in modules for p in m.parameters()], lr=LR)",
    "sgd-momentum": (
        "torch.optim.SGD([p for m in modules for p in m.parameters()], lr=LR, momentum=0.9)"
    ),
}


def launch_lines(layout: Layout, per_node: int, code: str = DEFAULT) -> list[str]:
    """The torchrun command for the layout's GPUs: one node, or one command on each of
    several (the first's address as MAIN_IP, each its NODE_RANK)."""
    gpus = layout.gpus
    nodes = -(-gpus // per_node)
    if nodes == 1:
        return [
            gettext(code, "launch with: torchrun --nproc_per_node {count} train.py", count=gpus)
        ]
    return [
        gettext(
            code,
            "{nodes} nodes of {per} GPUs: on each, with NODE_RANK 0 on the "
            "first and 1, 2 ... on the others, MAIN_IP the first's address:",
            nodes=nodes,
            per=per_node,
        ),
        f"  torchrun --nnodes {nodes} --nproc_per_node {per_node} \\",
        f"    --node_rank $NODE_RANK --master_addr $MAIN_IP --master_port {MAIN_PORT} train.py",
    ]


def _doc(text: str) -> str:
    return "\n".join(comment(text, "    "))


def script(p: PlannerInputs, layout: Layout, per_node: int, code: str = DEFAULT) -> str:
    """The whole-run part of the layout's code, commented in language `code`."""
    hub = model_id(p)
    model_doc = gettext(
        code,
        "A local folder with the model's config.json and safetensors "
        "(hf download {hub} --local-dir <folder>): every GPU reads "
        "its slices of them.",
        hub=hub,
    )
    if p.arch.expert_params:
        model_doc += " " + gettext(
            code,
            "A mixture of experts' Hub checkpoint stores each "
            "expert apart, and transformers merges them into "
            "the class's 3D parameters as it loads, so its "
            "names are not the class's: save the loaded "
            "model's state once with "
            "torch.distributed.checkpoint (dcp.save) and read "
            "that folder with dcp.FileSystemReader instead.",
        )
    if p.tuning != "full":
        model_doc += " " + gettext(
            code,
            "This code trains every weight: it has no LoRA "
            "adapters (PEFT wraps the projections the "
            "tensor-parallel plan names).",
        )
    out = _SETTINGS.format(
        model=f"path/to/{hub.split('/')[-1]}",
        model_doc="\n".join(comment(model_doc)),
        seq=p.seq,
        batch=p.batch,
        accumulation=layout.microbatches if layout.pp > 1 else p.accumulation,
        accumulation_doc=(
            "  # " + gettext(code, "the pipeline's micro-batches per step") if layout.pp > 1 else ""
        ),
        dtype="bfloat16" if p.precision == "bf16" else "float32",
        tied=p.arch.tied,
    )
    docs = {
        "build_doc": gettext(
            code,
            "The model with its parameters on the meta device (no "
            "memory until they are split and sharded) and its "
            "buffers real (the rotary frequencies are computed, not "
            "stored).",
        ),
        "materialize_doc": gettext(
            code,
            "Each GPU's shards of the parameters created on "
            "the GPU (uninitialized until load_weights); the "
            "buffers as build computed them.",
        ),
        "load_doc": gettext(
            code,
            "The weights from the checkpoint's safetensors: each GPU "
            "reads only the slices it holds (torch.distributed."
            "checkpoint, its HuggingFaceStorageReader), whatever the "
            "split.",
        ),
        "data_doc": gettext(
            code,
            'Rows of SEQ token ids ("input_ids"), one optimizer '
            "step's micro-batches at a time: each data-parallel GPU "
            "its own share, the tensor, context and pipeline GPUs of "
            "one data-parallel rank the same.",
        ),
        "train_doc": gettext(
            code,
            "The run on this process: built, split as planned, the "
            "weights loaded, then STEPS optimizer steps; the loss of "
            "each step (on the last pipeline stage; 0 on the "
            "others).",
        ),
        "main_doc": gettext(
            code,
            "One process per GPU, as torchrun starts them; the process "
            "group from torchrun's environment.",
        ),
    }
    optimizer = _OPTIMIZERS.get(p.optimizer, _OPTIMIZERS["adamw"])
    out += _RUN.format(
        **{k: _doc(v) for k, v in docs.items()},
        optimizer=optimizer,
        pp_cp="\n".join(
            comment(
                gettext(
                    code, "Context parallelism inside a pipeline stage is not wired into this step."
                ),
                " " * 12,
            )
        ),
        dataset_doc=gettext(code, "train_dataset: your tokenized dataset"),
    )
    launch = [
        line
        for text in launch_lines(layout, per_node, code)
        for line in (["# " + text] if text.startswith(" ") else comment(text))
    ]
    return out + "\n" + "\n".join(launch) + "\n"
