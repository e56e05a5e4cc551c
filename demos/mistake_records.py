"""The records of the lab of mistakes (demos.mistakes): the symptoms a learner sees,
the running statistics a case counts, one run as measured (Measured), a case measured three
times (CaseResult), a case itself (Case), and the small models' configurations. No torch."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from i18n import N_
from memory.config import ModelConfig

# Small enough that one case (three runs) takes well under a second on one CPU core, big
# enough that the blocks' activations outweigh the logits.
CASE_CONFIG = ModelConfig(layers=4, hidden=64, heads=2, seq_len=64, batch=4, vocab=256)
# Weights, gradients and AdamW's two moments outweigh the activations here (one short
# sequence, a wide vocabulary): the case "activations are not the problem".
STATE_CONFIG = ModelConfig(layers=2, hidden=128, heads=2, seq_len=16, batch=1, vocab=8192)
PEAK_TOLERANCE = 0.05  # "did not drop": within 5% of the plain run's peak


class Symptom(enum.Enum):
    """What a learner sees first; each leads to the cases that cause it."""

    PEAK_DID_NOT_DROP = "peak-did-not-drop"
    GRADIENTS_NONE = "gradients-none"
    RESULTS_DIFFER = "results-differ"
    SLOWER = "slower"
    WARNING = "warning"


SYMPTOM_TITLES: dict[Symptom, str] = {
    Symptom.PEAK_DID_NOT_DROP: N_("Peak memory did not drop"),
    Symptom.GRADIENTS_NONE: N_("Some gradients are None"),
    Symptom.RESULTS_DIFFER: N_("The loss or the gradients differ"),
    Symptom.SLOWER: N_("Slower than expected"),
    Symptom.WARNING: N_("A warning or an error"),
}


class Statistic(enum.Enum):
    """The running statistic a case counts (none for most)."""

    NONE = "none"
    BATCHNORM_UPDATES = "batchnorm-updates"
    SIDE_EFFECTS = "side-effects"
    CACHED_TOKENS = "cached-tokens"
    REENTRANT_CHECKPOINTS = "reentrant-checkpoints"
    CHECKPOINTING_FLAGS = "checkpointing-flags"  # modules with their library's flag on


@dataclass(frozen=True)
class Measured:
    """One run of a case, as measured. Bytes are live tensor bytes above the parameters
    (the live tracker's peak); a field a case does not measure is None."""

    peak_bytes: int | None = None
    peak_phase: str | None = None  # forward, recompute, backward, loss, optimizer
    flops: int | None = None
    none_grads: tuple[str, ...] = ()  # trainable parameters left without a gradient
    max_grad_diff: float | None = None  # largest |grad - plain grad| over all parameters
    loss: float | None = None
    statistic: float | None = None  # the case's Statistic, counted
    statistic_diff: float | None = None  # largest |running statistic - plain run's|
    state_bytes: int | None = None  # parameters + gradients + optimizer state, after the step
    parameter_bytes: int | None = None  # the weights (not counted in peak_bytes)
    offloaded_bytes: int | None = None  # saved for backward through the saved-tensor hooks
    kept_on_device_bytes: int | None = None  # saved for backward past those hooks
    saved_bytes: int | None = None  # saved for backward in forward, each storage once
    warning: str | None = None  # the first warning torch raised
    error: str | None = None  # the error torch raised (first line)
    error_type: str | None = None
    seconds: float = 0.0
    memory_events: list[list] | None = None  # the tracker's event log (LiveTracker.events)

    @staticmethod
    def from_json(data: dict[str, Any]) -> Measured:
        return Measured(**{**data, "none_grads": tuple(data.get("none_grads", ()))})


@dataclass(frozen=True)
class CaseResult:
    """A case measured three times: plain (no checkpointing), wrong, fixed; and whether
    the symptom showed in the wrong run and in the fixed one."""

    case: str
    plain: Measured
    wrong: Measured
    fixed: Measured
    wrong_shows: bool
    fixed_shows: bool
    config: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> CaseResult:
        return CaseResult(case=data["case"], plain=Measured.from_json(data["plain"]),
                          wrong=Measured.from_json(data["wrong"]),
                          fixed=Measured.from_json(data["fixed"]),
                          wrong_shows=bool(data["wrong_shows"]),
                          fixed_shows=bool(data["fixed_shows"]),
                          config=dict(data.get("config", {})))


@dataclass(frozen=True)
class Case:
    """One classic mistake: its stable id, the symptoms it shows, what to read, the code
    of the wrong and the fixed way, the lesson where the idea is taught, and its runner."""

    id: str
    symptoms: frozenset[Symptom]
    title: str  # catalog message
    why: str  # one sentence, catalog message
    fix: str  # the one-line fix in words, catalog message
    wrong_code: str  # code is not translated
    fixed_code: str
    lesson: str  # slug of the lesson that teaches the idea (lessons.catalog)
    run: Callable[[], tuple[Measured, Measured, Measured, dict[str, Any]]]
    shows: Callable[[Measured, Measured], bool]  # (run, plain) -> did the symptom show
    statistic: Statistic = Statistic.NONE
    # seconds the three runs take on an idle 2-core CPU once torch is warm, in the unit of
    # memory.theory.cpu_seconds: the demo service's wait estimates and speed history use it
    estimate_s: float = 0.2

