"""The widgets the demo pages share, and the models they open with.

Model sliders bound to the URL query (ranges follow the device), the strategy picker and
the strategy descriptions it shows, and the what-fits budget slider's range and help.
The defaults come from memory.config.demo_default: one source for the UI and the engine.
The strategy picker is where a page's strategies come in as text (the query string, the
widget): it hands the pages `StrategySpec` records (memory.strategies).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import streamlit as st

from demos.device import DeviceInfo
from i18n import N_
from memory import strategies
from memory.config import DTYPES_FOR_DEVICE, ModelConfig, demo_default, slider_ranges
from memory.strategies import StrategySpec
from ui import query
from ui.demo_runner import device
from ui.i18n import current_language, t

LABELS: dict[str, tuple[str, str]] = {
    # query name -> (slider label, help): catalog messages, translated where shown
    "layers": (N_("Layers"), N_("Transformer blocks: activation memory grows with each one.")),
    "hidden": (N_("Hidden size"), N_("Width of the residual stream (h).")),
    "heads": (N_("Attention heads"), N_("Must divide the hidden size.")),
    "seq": (N_("Sequence length"), N_("Tokens per sample (s).")),
    "batch": (N_("Batch"), N_("Samples per step (b).")),
    "vocab": (N_("Vocabulary"), N_("Tokens the LM head scores: the logits are b·s·vocab "
                                   "numbers.")),
}
MODEL_FIELDS = ("layers", "hidden", "heads", "seq", "batch", "vocab", "dtype", "arch")
# ModelConfig.arch -> what the architecture control shows (memory.config.ARCHS)
ARCH_LABELS: dict[str, str] = {
    "gpt": N_("GPT-2-style"),
    "llama": N_("Llama-style"),
}

TRAINING_DEFAULT = ModelConfig(layers=4, hidden=64, heads=4, seq_len=32, batch=8, vocab=128)
# activations outweigh the logits (b·s·h·layers against b·s·V), as in demo_default
FIT_DEFAULT = ModelConfig(layers=8, hidden=128, heads=4, seq_len=256, batch=1, vocab=1024)
FIT_STRATEGIES = (StrategySpec("none"), StrategySpec("every-layer"),
                  StrategySpec("selective", policy="save-matmuls"))


def default_config(info: DeviceInfo | None = None) -> ModelConfig:
    """The model a demo opens with on this device."""
    return demo_default((info or device()).kind)


def fit_default(info: DeviceInfo | None = None) -> ModelConfig:
    """The what-fits model: small on a CPU; on a GPU the GPU demo model, batch 1."""
    info = info or device()
    return default_config(info).replace(batch=1) if info.kind == "cuda" else FIT_DEFAULT


def model_controls(fields: Sequence[str] = MODEL_FIELDS, *, columns: int = 4,
                   defaults: ModelConfig | None = None, **overrides: Any) -> ModelConfig:
    """Sliders for the model and batch, bound to the URL query; `overrides` fix fields
    without a widget (e.g. dropout). Ranges follow the device (slider_ranges)."""
    info = device()
    base = (defaults or default_config(info)).replace(**overrides)
    ranges = slider_ranges(info.kind)
    where = t("on this GPU") if info.kind == "cuda" else t("on this CPU")
    values: dict[str, Any] = {}
    cells: list = []
    for number, name in enumerate(fields):
        if number % columns == 0:  # a row at a time: on a phone they stack in field order
            cells = st.columns(columns)
        with cells[number % columns]:
            if name == "dtype":
                options = DTYPES_FOR_DEVICE[info.kind]
                values["dtype"] = query.choice("dtype", t("Number format"), options,
                                               base.dtype, where=where,
                                               help=t("Bytes per number: 4 for float32, 2 for "
                                                      "bfloat16/float16."))
                continue
            if name == "arch":
                values["arch"] = query.choice(
                    "arch", t("Layer architecture"), list(ARCH_LABELS), base.arch, where=where,
                    format_func=lambda arch: t(ARCH_LABELS[arch]),
                    help=t("The layer the model stacks. GPT-2-style: LayerNorm, learned "
                           "positions, a 4h GELU MLP. Llama-style: RMSNorm, rotary positions, "
                           "grouped-query attention (half as many key/value heads), a SwiGLU "
                           "MLP. The theory predicts what either keeps, to the byte on a CPU."))
                continue
            field = query.CONFIG_FIELDS[name]
            lo, hi, step = ranges[field]
            label, help_text = LABELS[name]
            values[field] = query.int_slider(name, t(label), int(lo), int(hi), int(step),
                                             int(getattr(base, field)), help=t(help_text),
                                             where=where)
    return base.replace(**values)


def strategy_options(kind: str | None = None) -> list[StrategySpec]:
    """The strategies a learner can pick on this device (`none` excluded): each record's
    examples (memory.strategies)."""
    return strategies.examples(kind or device().kind)


def strategy_picker(default: Sequence[str], *, name: str = "strategy",
                    label: str | None = None,
                    options: Sequence[StrategySpec] | None = None
                    ) -> tuple[StrategySpec, ...]:
    """Multiselect bound to ?strategy=a,b, showing each strategy's translated title; the
    strategies offered (`options`, default this device's) as records, `none` first (it is
    always measured, as the baseline). The URL and `default` name strategies by their
    canonical text ("every-k:2"), looked up among the offered records' labels: the text
    becomes a record here, and an unknown text is dropped with a warning (ui.query)."""
    offered = {spec.label: spec for spec in (options or strategy_options())}
    lang = current_language()
    titles = {text: strategies.title(spec, lang) for text, spec in offered.items()}
    picked = query.multi_choice(name, label or t("Strategies to compare with no checkpointing"),
                                list(offered), default, implied=("none",),
                                format_func=titles.__getitem__,
                                help="\n\n".join(f"**{titles[text]}**: "
                                                 f"{strategies.describe(spec, lang)}"
                                                 for text, spec in offered.items()))
    return (StrategySpec("none"), *(offered[text] for text in picked))


def budget_range(info: DeviceInfo | None = None) -> tuple[int, int, int, int]:
    """(low, high, step, default) in MiB. On a GPU the default is its real free memory."""
    info = info or device()
    if info.kind == "cuda" and info.total_bytes:
        total = info.total_bytes // 2**20
        free = (info.free_bytes or info.total_bytes) // 2**20
        step = 256
        return step, total - total % step, step, max(step, free - free % step)
    return 16, 512, 16, 128


def budget_help(info: DeviceInfo | None = None) -> str:
    info = info or device()
    if info.kind == "cuda":
        return t("Defaults to the GPU's free memory right now.")
    return t("The CPU has no fixed memory limit for this demo, so the budget plays the part "
             "of a GPU's memory: a run whose measured peak exceeds it does not fit.")
