"""The FSDP script the planner prints, run for real: written to `train.py` as printed and
launched with the command its comment gives (`accelerate launch --num_processes N
train.py`), here as N processes on the CPU that talk over gloo. The Trainer builds the
FSDP2 model from the printed `fsdp_config` and trains it for three optimizer steps; the
processes (tests/demos/fsdp_plan_child.py) measure what the run did and rank 0 writes it
to a JSON file that this test checks:

* each decoder layer (LlamaDecoderLayer, GPT2Block) is its own FSDP unit: `fully_shard`
  turned it into an `FSDP<Layer>` whose own state shards exactly that layer's parameters;
* the plan's layers recompute (their MLP runs twice per micro-batch: forward, then again in
  backward) and no others, through the layers' own switch inside their FSDP units: no
  `CheckpointWrapper` (accelerate's, from `fsdp_config["activation_checkpointing"]`,
  drops the RNG state) and the Trainer's switch off;
* the parameters are sharded: each rank holds half of them;
* the training ran: the losses are finite and the parameters moved.
* only process 0 read the weights; the others built the model empty and trained on
  process 0's (fsdp_config's cpu_ram_efficient_loading broadcast them);
* a plan over more GPUs than a node holds launches one `accelerate launch` per machine
  (--num_machines, --machine_rank, --main_process_ip): here two machines of one process,
  both on this one.

What the launch changes, and why:
* `from_pretrained` returns a tiny random-init model of the family (nothing is downloaded)
  and `train_dataset` is a few rows of random tokens.
* `accelerate launch` runs the processes with `--multi_gpu` (the launcher it picks by
  itself on a machine with several GPUs) and ACCELERATE_USE_CPU=true, which makes
  accelerate start them on the CPU with gloo. Its `--cpu` flag starts a single process
  (accelerate/commands/launch.py, 1.15.0: `simple_launcher`; several CPU processes need
  MPI).
* accelerate 1.15.0 drops the FSDP plugin on a multi-process CPU run: AcceleratorState
  takes it only for the GPU-like distributed types (accelerate/state.py,
  AcceleratorState.__init__), so the Trainer would silently train with DDP. The
  processes hand the plugin back (one patch, checked below to be still needed); FSDP2's
  `fully_shard`, the wrapping, the checkpoint wrapper and the Trainer are the libraries'
  own.
"""

from __future__ import annotations

import json
import math
import re
import socket
import sys
import time
from pathlib import Path

import pytest
import transformers

from memory import footprint as P
from memory.architectures import PRESETS
from planner import hf_code as hf_module
from tests.demos.fsdp_plan_child import TINY
from tests.demos.launch import environment, run_processes

CHILD = Path(__file__).with_name("fsdp_plan_child.py")
PRESET_OF = {"gpt2": "gpt2", "llama": "llama-3.2-1b"}
LAUNCH_TIMEOUT_S = 300


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _launch(code: str, family: str, tmp_path: Path, machines: int = 1) -> dict:
    """Write the printed script to train.py, launch it as its comment says, return the
    JSON rank 0 wrote (with the seconds the launch took). Several machines: one launcher
    per machine, as the comment says, here all on this one (127.0.0.1), each with
    `--num_processes` / `machines` processes."""
    processes = int(re.search(r"--num_processes (\d+)", code).group(1))
    (tmp_path / "train.py").write_text(code, encoding="utf-8")
    out = tmp_path / "measured.json"
    env = environment(ACCELERATE_USE_CPU="true", WANDB_DISABLED="true",
                      TOKENIZERS_PARALLELISM="false")
    port = _free_port() if machines > 1 else 0
    commands = []
    for machine in range(machines):
        command = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
                   "--num_processes", str(processes), "--num_machines", str(machines),
                   "--mixed_precision", "no", "--dynamo_backend", "no",
                   "--main_process_port", str(port)]
        if machines > 1:
            command += ["--machine_rank", str(machine), "--main_process_ip", "127.0.0.1"]
        commands.append([*command, str(CHILD), family, "train.py", str(out)])
    start = time.perf_counter()
    run_processes(*commands, cwd=tmp_path, env=env, timeout_s=LAUNCH_TIMEOUT_S,
                  what="the FSDP launch")
    measured = json.loads(out.read_text(encoding="utf-8"))
    measured["seconds"] = time.perf_counter() - start
    measured["processes"] = processes
    return measured


def _loaded_once_and_broadcast(ranks: list[dict]) -> None:
    """Only process 0 read the weights; the others built the model empty (parameters on
    the meta device, real buffers) and trained on process 0's weights: on process 0 every
    gathered parameter is within a training step's change of what it loaded."""
    for r in ranks:
        first = r["rank"] == 0
        assert r["loaded_weights"] is first and r["built_empty"] is not first
        assert r["real_buffers"]
    assert 0 < ranks[0]["max_param_change"] < 0.01


@pytest.mark.heavy
@pytest.mark.timeout(LAUNCH_TIMEOUT_S + 120)  # the launch fails first, with its log
@pytest.mark.parametrize("family,layer,precision,compute,some_layers", [
    # every layer: the model's own switch, inside the FSDP units
    ("llama", "LlamaDecoderLayer", "mixed", "torch.bfloat16", None),
    # the first 3 of 4 layers: the model's own switch, inside the FSDP units
    ("gpt2", "GPT2Block", "fp32", "as stored", 3),
])
def test_the_printed_fsdp_plan_shards_each_layer_and_checkpoints_the_plans_layers(
        family, layer, precision, compute, some_layers, tmp_path) -> None:
    strategy = "some-layers" if some_layers else "every-layer"
    p = P.PlannerInputs(PRESETS[PRESET_OF[family]], batch=1, accumulation=2,
                        strategy=strategy, some_layers=some_layers or 0, shards=2,
                        precision=precision)
    code = hf_module.hf_code(p)
    assert '"activation_checkpointing"' not in code
    assert "model.activation_checkpointing_enable()" in code
    measured = _launch(code, family, tmp_path)
    ranks = measured["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["world"] == 2 and r["backend"] == "gloo" for r in ranks)
    tiny = transformers.AutoModelForCausalLM.from_config(TINY[family]())
    layers = [m for m in tiny.modules()
              if isinstance(m, transformers.GradientCheckpointingLayer)]
    count = len(layers)
    planned = [True] * count if some_layers is None else (
        [True] * some_layers + [False] * (count - some_layers))
    full = sum(q.numel() for q in tiny.parameters())
    per_layer = [sum(q.numel() for q in m.parameters()) for m in layers]
    for r in ranks:
        # each decoder layer its own FSDP unit, holding exactly its own parameters
        assert r["layer_classes"] == [f"FSDP{layer}"] * count
        assert r["fsdp_units"] == count and r["root_is_fsdp"]
        assert all(r["layer_unit_holds_its_params"])
        # the plan's layers recompute (their MLP runs twice per micro-batch), the others
        # not: the layers' own switch, no wrapper, the Trainer's switch off
        micro_batches = r["rows"] // (r["world"] * p.batch) * r["epochs"]
        assert r["forwards"] == micro_batches
        assert r["mlp_calls"] == [(2 if on else 1) * micro_batches for on in planned]
        assert not r["trainer_activation_checkpointing"]
        assert not any(r["layer_in_checkpoint_wrapper"])
        assert r["layer_gradient_checkpointing"] == planned
        # sharded: half of every layer and of the whole model on each rank
        assert r["full_params"] == full and r["layer_full_params"] == per_layer
        assert r["local_params"] == full // 2
        assert r["layer_local_params"] == [n // 2 for n in per_layer]
        assert r["sharded_dtypes"] == ["torch.float32"]
        assert r["layer_compute_dtype"] == [compute]
        # it trained: finite losses near ln(vocabulary) for random weights, weights moved
        assert r["steps"] == micro_batches // p.accumulation
        assert r["losses_finite"] and len(r["losses"]) == micro_batches
        assert abs(r["train_loss"][0] - math.log(tiny.config.vocab_size)) < 0.5
        # the one patch the launch applies is still needed (see the module docstring)
        assert r["accelerate_dropped_fsdp_on_cpu"]
    assert sum(r["local_params"] for r in ranks) == full
    _loaded_once_and_broadcast(ranks)
    # the Trainer's end-of-training checkpoint was written from the sharded model
    assert (tmp_path / "out" / f"checkpoint-{ranks[0]['steps']}" / "model.safetensors").exists()
    print(f"{family}: {measured['seconds']:.1f} s for the launch; per rank "
          f"{[r['local_params'] for r in ranks]} of {full} parameters; "
          f"MLP calls {ranks[0]['mlp_calls']} for {ranks[0]['forwards']} micro-batches; "
          f"train loss {[round(r['train_loss'][0], 4) for r in ranks]}")


@pytest.mark.heavy
@pytest.mark.timeout(LAUNCH_TIMEOUT_S + 120)  # the launch fails first, with its log
def test_the_printed_two_node_plan_launches_on_two_machines_and_loads_once(tmp_path) -> None:
    """The 70B full fine-tune on 16 GPUs printed a single-node launch line and loaded the
    fp32 model in every process. Now its comment launches one `accelerate launch` per node
    (--num_machines, --machine_rank, --main_process_ip) and only process 0 reads the
    weights. Here that launch line, scaled down to 2 machines of 1 process on this one
    machine (127.0.0.1), runs the printed script of a tiny Llama."""
    big = P.PlannerInputs(PRESETS["llama-3.1-70b"], shards=16, tuning="full")
    printed = hf_module.hf_code(big)
    assert "--num_machines 2 --num_processes 16" in printed
    assert "--machine_rank $NODE_RANK --main_process_ip $MAIN_IP" in printed
    assert "torchrun --nnodes 2 --nproc_per_node 8" in printed
    assert "if args.process_index == 0:" in printed
    assert '"cpu_ram_efficient_loading": True' in printed
    p = P.PlannerInputs(PRESETS[PRESET_OF["llama"]], batch=1, accumulation=2, shards=2,
                        precision="mixed")
    measured = _launch(hf_module.hf_code(p), "llama", tmp_path, machines=2)
    ranks = measured["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert [r["node_rank"] for r in ranks] == [0, 1]  # one process on each machine
    assert [r["local_rank"] for r in ranks] == [0, 0]
    assert all(r["world"] == 2 and r["fsdp_units"] == r["layer_classes"].__len__()
               for r in ranks)
    _loaded_once_and_broadcast(ranks)
    assert all(r["losses_finite"] for r in ranks)
    print(f"two machines: {measured['seconds']:.1f} s for the launch")
