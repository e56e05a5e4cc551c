"""What a learner can set in lesson 10's live measurements, and the sizes of their tiny
models (no torch here, so the lesson page can draw its choices without importing it):
the parts measured (demos.toolbox, demos.toolbox_runs), each part's one setting with
its values and default, and the job options that name a part at a setting
(serving.toolbox_jobs)."""

from __future__ import annotations

from typing import Any

# The lesson's four sequences (lessons.toolbox_values.PACK_LENGTHS) at a 50th of their
# lengths, and two more shapes. No longest or total length may equal a dimension of the
# packing model: its tensors are sorted by whether a dimension is the sequence's length.
PACK_PRESETS: dict[str, tuple[int, ...]] = {
    "lesson": (41, 14, 7, 20),
    "two": (30, 7),
    "one-long": (60, 3, 3, 3),
}
PACK_MODEL = {
    "hidden_size": 36,
    "intermediate_size": 76,
    "num_hidden_layers": 2,
    "num_attention_heads": 3,
    "num_key_value_heads": 3,
    "vocab_size": 97,
}
AUTOCAST_DTYPES = ("bfloat16", "float16")
AUTOCAST_SHAPE = (6, 16)  # tokens × width of the small block's input
LORA_WIDTH, LORA_OUT, LORA_TOKENS, LORA_RANK, LORA_DROPOUT = 48, 40, 5, 4, 0.1
FLOP_LAYERS = (2, 4, 8)
FLOP_REPEATS = 5  # timed steps per strategy, interleaved; the median is shown
PIPE_MICROBATCHES = (2, 4, 8)  # demos.pipeline_bubble's micro-batches a step

# part -> (its setting's name or None, the values it takes, the default)
SETTINGS: dict[str, tuple[str | None, tuple[Any, ...], Any]] = {
    "packing": ("lengths", tuple(PACK_PRESETS), "lesson"),
    "autocast": ("dtype", AUTOCAST_DTYPES, "bfloat16"),
    "lora": (None, (), None),
    "flops": ("layers", FLOP_LAYERS, 4),
    "checkpoint-error": (None, (), None),
    "pipeline": ("microbatches", PIPE_MICROBATCHES, 4),
}
PARTS = tuple(SETTINGS)


def options(part: str, value: Any = None) -> dict[str, Any]:
    """A job's options for `part` at its setting's `value` (the default when None);
    ValueError for a part or a value the lesson does not offer."""
    if part not in SETTINGS:
        raise ValueError(f"part={part!r}: allowed {', '.join(PARTS)}")
    name, allowed, default = SETTINGS[part]
    if name is None:
        return {"part": part}
    value = default if value is None else value
    if value not in allowed:
        raise ValueError(f"{name}={value!r}: allowed {allowed}")
    return {"part": part, name: value}


def setting(job_options: dict[str, Any]) -> Any:
    """The setting job options (`options`' dict) name for their part, checked; None for a
    part without one."""
    part = job_options["part"]
    name = SETTINGS[part][0]
    return options(part, job_options.get(name)).get(name) if name else None
