"""How to choose a memory tool: a decision procedure from the symptom to the tool (lesson 7).

Pure data and one function, so the interactive widget and the tests share it. The order is
the one a careful engineer follows: measure first, then the cheapest fix for the part of
memory that is actually too large.
"""

from __future__ import annotations

from dataclasses import dataclass

from i18n import DEFAULT, N_, gettext
from lessons.checkpoint_math import every_layer_best_up_to

# Where the peak sits, as the memory timeline or the profiler shows it.
PEAKS: dict[str, str] = {
    "fits": N_("It fits; I only want speed"),
    "layers": N_("In the layers (activations)"),
    "loss": N_("At the loss (logits of a large vocabulary)"),
    "state": N_("Before the first batch (weights, gradients, optimizer state)"),
    "one-sequence": N_("A single sequence does not fit even at batch 1"),
}
# How far over the budget the run is (used for the layers).
OVERS: dict[str, str] = {
    "little": N_("A little (under about a quarter)"),
    "lot": N_("A lot"),
}


@dataclass(frozen=True)
class Step:
    tool: str  # English, marked N_
    why: str  # English, marked N_; may hold {placeholders} filled from `params`
    params: tuple[tuple[str, int], ...] = ()

    def words(self, code: str = DEFAULT) -> tuple[str, str]:
        """The tool and the reason, in language `code`."""
        return gettext(code, self.tool), gettext(code, self.why, **dict(self.params))


MEASURE = Step(N_("Measure first"),
               N_("Peak memory (torch.cuda.max_memory_allocated) and time per step, with and "
                  "without each change; the memory timeline shows where the peak is."))


def recommend(peak: str, over: str = "little", layers: int = 32) -> list[Step]:
    """The tools to try, in order, for a peak at `peak` that is `over` the budget."""
    if peak not in PEAKS or over not in OVERS:
        raise ValueError(f"unknown symptom {peak!r} / {over!r}")
    steps = [MEASURE]
    if peak == "fits":
        steps.append(Step(N_("No checkpointing"),
                          N_("Memory is ample: turn it off and every step runs faster (check "
                             "that your recipe does not switch it on).")))
        return steps
    if peak == "state":
        steps += [
            Step(N_("8-bit optimizer"),
                 N_("AdamW's state drops from 8 to 2 bytes per parameter.")),
            Step(N_("QLoRA / adapters"),
                 N_("A 4-bit frozen base model, small trainable adapters.")),
            Step(N_("FSDP / ZeRO sharding"),
                 N_("Weights, gradients and optimizer state split over GPUs.")),
            Step(N_("Offload state"),
                 N_("Optimizer state in host memory, at the cost of transfers.")),
        ]
        return steps
    if peak == "loss":
        steps += [
            Step(N_("Chunked or fused linear + cross-entropy"),
                 N_("Recompute the logits a slice at a time; layer checkpointing cannot "
                    "shrink them.")),
            Step(N_("Smaller batch + gradient accumulation"),
                 N_("Same effective batch, fewer logits at once.")),
        ]
        return steps
    if peak == "one-sequence":
        steps += [
            Step(N_("Checkpoint every layer"),
                 N_("Keep only each layer's input; accumulation cannot split one sequence.")),
            Step(N_("Offload the checkpoints"),
                 N_("save_on_cpu moves the kept inputs to host memory.")),
            Step(N_("Sequence / context parallelism"),
                 N_("Spread the tokens of one sequence over GPUs.")),
        ]
        return steps
    # peak == "layers"
    steps.append(Step(N_("Smaller batch + gradient accumulation"),
                      N_("Free if a smaller batch per step still uses the accelerator well.")))
    if over == "little":
        steps += [
            Step(N_("Checkpoint some layers"), N_("Only as many blocks as you need to fit.")),
            Step(N_("Selective recomputation (attention without a fused kernel)"),
                 N_("Recompute only the attention scores; a few percent slower. With fused "
                    "attention (FlashAttention, SDPA's fused kernels) there are no scores to "
                    "drop and it frees nothing.")),
        ]
    steps.append(Step(N_("Checkpoint every layer"),
                      N_("About one extra forward; the default of the libraries.")))
    deepest = every_layer_best_up_to(2, 34)
    if layers > deepest:
        steps.append(Step(N_("Segments of two layers"),
                          N_("Deeper than {deepest} GPT-style layers, they keep less than "
                             "every layer, at the same compute."), (("deepest", deepest),)))
    steps.append(Step(N_("Offload the checkpoints"), N_("When the copy hides behind compute.")))
    return steps
