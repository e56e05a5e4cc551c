"""How to choose a memory tool: a decision procedure from the symptom to the tool (lesson 7).

Pure data and one function, so the interactive widget and the tests share it. The order is
the one a careful engineer follows: measure first, then the cheapest fix for the part of
memory that is actually too large.
"""

from __future__ import annotations

from dataclasses import dataclass

from lessons.checkpoint_math import every_layer_best_up_to

# Where the peak sits, as the memory timeline or the profiler shows it.
PEAKS: dict[str, str] = {
    "fits": "It fits; I only want speed",
    "layers": "In the layers (activations)",
    "loss": "At the loss (logits of a large vocabulary)",
    "state": "Before the first batch (weights, gradients, optimizer state)",
    "one-sequence": "A single sequence does not fit even at batch 1",
}
# How far over the budget the run is (used for the layers).
OVERS: dict[str, str] = {
    "little": "A little (under about a quarter)",
    "lot": "A lot",
}


@dataclass(frozen=True)
class Step:
    tool: str
    why: str


MEASURE = Step("Measure first", "Peak memory (torch.cuda.max_memory_allocated) and time per "
               "step, with and without each change; the memory timeline shows where the peak is.")


def recommend(peak: str, over: str = "little", layers: int = 32) -> list[Step]:
    """The tools to try, in order, for a peak at `peak` that is `over` the budget."""
    if peak not in PEAKS or over not in OVERS:
        raise ValueError(f"unknown symptom {peak!r} / {over!r}")
    steps = [MEASURE]
    if peak == "fits":
        steps.append(Step("No checkpointing", "Memory is ample: turn it off and every step "
                          "runs faster (check that your recipe does not switch it on)."))
        return steps
    if peak == "state":
        steps += [
            Step("8-bit optimizer", "AdamW's state drops from 8 to 2 bytes per parameter."),
            Step("QLoRA / adapters", "A 4-bit frozen base model, small trainable adapters."),
            Step("FSDP / ZeRO sharding", "Weights, gradients and optimizer state split over GPUs."),
            Step("Offload state", "Optimizer state in host memory, at the cost of transfers."),
        ]
        return steps
    if peak == "loss":
        steps += [
            Step("Chunked or fused linear + cross-entropy", "Recompute the logits a slice at a "
                 "time; layer checkpointing cannot shrink them."),
            Step("Smaller batch + gradient accumulation", "Same effective batch, fewer logits "
                 "at once."),
        ]
        return steps
    if peak == "one-sequence":
        steps += [
            Step("Checkpoint every layer", "Keep only each layer's input; accumulation cannot "
                 "split one sequence."),
            Step("Offload the checkpoints", "save_on_cpu moves the kept inputs to host memory."),
            Step("Sequence / context parallelism", "Spread the tokens of one sequence over GPUs."),
        ]
        return steps
    # peak == "layers"
    steps.append(Step("Smaller batch + gradient accumulation", "Free if a smaller batch per "
                      "step still uses the accelerator well."))
    if over == "little":
        steps += [
            Step("Selective recomputation", "Recompute only the cheap operations; a few percent "
                 "slower."),
            Step("Checkpoint some layers", "Only as many blocks as you need to fit."),
        ]
    steps.append(Step("Checkpoint every layer", "About one extra forward; the default of the "
                      "libraries."))
    deepest = every_layer_best_up_to(2, 34)
    if layers > deepest:
        steps.append(Step("Segments of two layers", f"Deeper than {deepest} GPT-style layers, "
                          "they keep less than every layer, at the same compute."))
    steps.append(Step("Offload the checkpoints", "When the copy hides behind compute."))
    return steps
