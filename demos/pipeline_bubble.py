"""A pipeline's bubble, measured: two processes on the CPU talk over gloo and run
torch.distributed.pipelining's schedules (GPipe, 1F1B, and interleaved 1F1B with two
chunks per process) over m micro-batches, with and without every block checkpointed.
Each process times every forward and backward of a micro-batch through its stage(s)
(`forward_one_chunk`, `backward_one_chunk`); the step's span over both processes less a
process's busy time is its idle time, and idle over busy is the bubble that
memory.toolbox.bubble_fraction predicts: (p - 1)/m, (p - 1)/(v·m) interleaved.

`measure(m)` runs from the demo service's worker (a daemon process, which may not start
children of its own through multiprocessing): it launches `python -m demos.pipeline_bubble
OUT m` in a session of its own, which spawns the two ranks; a stopped or preempted step
kills that session, and every process of it exits when its parent goes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from demos.toolbox_settings import PIPE_MICROBATCHES

STAGES = 2  # processes, one pipeline rank each
CHUNKS = 2  # stages per process in the interleaved schedule
SCHEDULES = ("gpipe", "1f1b", "interleaved")
ROWS, HIDDEN, LAYERS = 256, 768, 4  # a micro-batch's rows, the width, linears per process
TIMEOUT_S = 120.0
ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ the launcher's side
def measure(
    microbatches: int, rows: int = ROWS, hidden: int = HIDDEN, timeout_s: float = TIMEOUT_S
) -> list[dict[str, Any]]:
    """Every schedule, without and with checkpointing, over `microbatches` of `rows` rows
    `hidden` wide: per schedule, checkpointing and rank, its busy seconds (wall, and the
    CPU time it had meanwhile), the step's span and the bubble predicted; and each timed
    forward and backward (rank, kind, start, end) for the timeline."""
    if microbatches not in PIPE_MICROBATCHES:
        raise ValueError(f"microbatches={microbatches}: allowed {PIPE_MICROBATCHES}")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "bubble.json"
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "demos.pipeline_bubble",
                str(out),
                str(microbatches),
                str(rows),
                str(hidden),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            log, _ = process.communicate(timeout=timeout_s)
        finally:  # a time-out, or the worker's step stopped: the ranks go too
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if process.returncode != 0 or not out.exists():
            raise RuntimeError(f"the pipeline run failed:\n{log[-3000:]}")
        return json.loads(out.read_text(encoding="utf-8"))


def bubbles(rows: list[dict[str, Any]]) -> dict[tuple[str, bool], dict[str, float]]:
    """Per (schedule, checkpointed): the measured idle over busy (summed over the ranks),
    the prediction, the step's span, the mean busy seconds and the share of their busy
    time the ranks had the CPU (well below 1: other work took the cores)."""
    found: dict[tuple[str, bool], dict[str, float]] = {}
    for row in rows:
        if row["kind"] != "rank":
            continue
        key = (row["schedule"], bool(row["checkpointed"]))
        entry = found.setdefault(
            key,
            {
                "idle": 0.0,
                "busy": 0.0,
                "cpu": 0.0,
                "span": row["span"],
                "predicted": row["predicted"],
                "ranks": 0,
            },
        )
        entry["idle"] += row["span"] - row["busy"]
        entry["busy"] += row["busy"]
        entry["cpu"] += row["cpu"]
        entry["ranks"] += 1
    for entry in found.values():
        entry["measured"] = entry["idle"] / entry["busy"]
        entry["cpu_share"] = entry["cpu"] / entry["busy"]
        entry["busy"] /= entry["ranks"]
    return found


# ------------------------------------------------------------------ the ranks' side
def _watch_parent() -> None:
    """Exit as soon as this process's parent is gone (the launcher, or the worker)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(0.5)

    threading.Thread(target=watch, daemon=True).start()


def exit_without_teardown() -> None:
    """End a rank whose work is done and written, skipping the interpreter's teardown:
    there a C++ thread left by a pipeline schedule's gloo sends, destroyed while still
    joinable, aborts the process at random ("terminate called without an active
    exception", one exit in five to twenty with torch 2.13 on this machine)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _stage_module(index: int, count: int, hidden: int, checkpointed: bool) -> Any:
    import torch
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    class Stage(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(index)
            self.layers = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(count))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:

                def block(t: torch.Tensor, layer: nn.Module = layer) -> torch.Tensor:
                    return torch.nn.functional.gelu(layer(t))

                x = checkpoint(block, x, use_reentrant=False) if checkpointed else block(x)
            return x

    return Stage()


def _step(
    rank: int, schedule: str, microbatches: int, checkpointed: bool, rows: int, hidden: int
) -> list[dict[str, Any]]:
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import (
        PipelineStage,
        Schedule1F1B,
        ScheduleGPipe,
        ScheduleInterleaved1F1B,
    )

    from memory.toolbox import bubble_fraction

    events: list[tuple[str, float, float, float]] = []  # kind, start, end, CPU seconds
    timing = {"on": False}

    def timed(kind: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        start, cpu = time.monotonic(), time.thread_time()
        result = call(*args, **kwargs)
        if timing["on"]:
            events.append((kind, start, time.monotonic(), time.thread_time() - cpu))
        return result

    class TimedStage(PipelineStage):
        def forward_one_chunk(self, *args: Any, **kwargs: Any) -> Any:
            return timed("F", super().forward_one_chunk, *args, **kwargs)

        def backward_one_chunk(self, *args: Any, **kwargs: Any) -> Any:
            return timed("B", super().backward_one_chunk, *args, **kwargs)

    chunks = CHUNKS if schedule == "interleaved" else 1
    total = STAGES * chunks
    indices = [rank + STAGES * c for c in range(chunks)]  # rank r holds r, r + p, ...
    stages = [
        TimedStage(
            _stage_module(i, LAYERS // chunks, hidden, checkpointed), i, total, torch.device("cpu")
        )
        for i in indices
    ]

    def loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return out.pow(2).mean()

    if schedule == "interleaved":
        runner = ScheduleInterleaved1F1B(stages, microbatches, loss_fn=loss)
    else:
        kind = ScheduleGPipe if schedule == "gpipe" else Schedule1F1B
        runner = kind(stages[0], microbatches, loss_fn=loss)
    torch.manual_seed(0)
    x = torch.randn(microbatches * rows, hidden)
    target = torch.zeros(microbatches * rows, hidden)

    def step() -> None:  # the first stage is rank 0's, the last rank 1's (p = 2)
        if rank == 0:
            runner.step(x)
        else:
            runner.step(target=target, losses=[])

    step()  # the first step infers the shapes the stages exchange
    dist.barrier()
    timing["on"] = True
    step()
    timing["on"] = False
    spans = [None] * STAGES
    dist.all_gather_object(spans, (min(e[1] for e in events), max(e[2] for e in events)))
    begin, end = min(s for s, _ in spans), max(e for _, e in spans)
    found = [
        {
            "kind": "rank",
            "schedule": schedule,
            "checkpointed": checkpointed,
            "rank": rank,
            "microbatches": microbatches,
            "busy": sum(e - s for _, s, e, _ in events),
            "cpu": sum(cpu for _, _, _, cpu in events),
            "span": end - begin,
            "predicted": bubble_fraction(STAGES, microbatches, chunks),
        }
    ]
    found += [
        {
            "kind": kind,
            "schedule": schedule,
            "checkpointed": checkpointed,
            "rank": rank,
            "microbatches": microbatches,
            "start": s - begin,
            "end": e - begin,
        }
        for kind, s, e, _ in events
    ]
    return found


def _rank(rank: int, store: str, out: str, microbatches: int, rows: int, hidden: int) -> None:
    import torch
    import torch.distributed as dist

    _watch_parent()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=STAGES)
    try:
        found: list[dict[str, Any]] = []
        for schedule in SCHEDULES:
            for checkpointed in (False, True):
                found += _step(rank, schedule, microbatches, checkpointed, rows, hidden)
        gathered: list[Any] = [None] * STAGES
        dist.all_gather_object(gathered, found)
        if rank == 0:
            Path(out).write_text(
                json.dumps([r for part in gathered for r in part]), encoding="utf-8"
            )
    finally:
        dist.destroy_process_group()
    exit_without_teardown()


def main(out: str, microbatches: int, rows: int, hidden: int) -> None:
    import torch.multiprocessing as mp

    _watch_parent()
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(
            _rank,
            args=(f"{folder}/store", out, microbatches, rows, hidden),
            nprocs=STAGES,
            join=True,
        )


if __name__ == "__main__":
    main(sys.argv[1], *(int(arg) for arg in sys.argv[2:5]))
