"""The four sweeps of the curves page: what each varies, over which values, and what it
teaches. Pure data and figure choice; the running goes through ui.demo_runner. Texts are
catalog messages (N_), translated where they are shown."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go

from i18n import N_, gettext
from memory.config import ModelConfig
from memory.strategies import StrategySpec
from reports.sweep_figures import segment_figure, sweep_figure
from reports.timing import sweep_compute_note

# id -> (measured column, theory column, axis title, choice label)
MEMORY_METRICS: dict[str, tuple[str, str, str, str]] = {
    "held": ("activation_bytes", "predicted_activation_bytes",
             N_("Activations held for backward"), N_("held for backward")),
    "peak": ("peak_bytes", "predicted_peak_bytes", N_("Peak memory above the parameters"),
             N_("peak")),
}


@dataclass(frozen=True)
class Curve:
    title: str
    vary: str  # the sweep's parameter: layers, seq_len, batch or k (layers per segment)
    x_title: str
    fixes: tuple[str, ...]  # query names without a slider (the swept one)
    base: ModelConfig
    strategies: tuple[StrategySpec, ...]
    points: Callable[[ModelConfig], tuple[int, ...]]
    explanation: str

    def values(self, config: ModelConfig) -> tuple[int, ...]:
        return self.points(config)

    def values_text(self, config: ModelConfig, lang: str = "en") -> str:
        return f"{gettext(lang, self.x_title)} = " + ", ".join(map(str, self.values(config)))


def _divisors_up_to(layers: int) -> tuple[int, ...]:
    """Segment sizes for N layers: 1, 2, 4, ... up to N, plus round(sqrt N)."""
    sizes = {1, layers, max(1, round(math.sqrt(layers)))}
    k = 2
    while k < layers:
        sizes.add(k)
        k *= 2
    return tuple(sorted(sizes))


_NONE, _EVERY_LAYER = StrategySpec("none"), StrategySpec("every-layer")
_SELECTIVE = StrategySpec("selective", policy="save-matmuls")
_SMALL = ModelConfig(layers=8, hidden=128, heads=4, seq_len=64, batch=2, vocab=1024)

CURVES: dict[str, Curve] = {
    "depth": Curve(
        title=N_("Depth: layers 2 … 32"),
        vary="layers", x_title=N_("layers N"), fixes=("layers",), base=_SMALL,
        strategies=(_NONE, _EVERY_LAYER, StrategySpec("sqrt")),
        points=lambda c: (2, 4, 8, 16, 24, 32),
        explanation=N_(
            "Without checkpointing the bytes held for backward grow in step with depth: "
            "**O(N)**, a whole layer's internals per layer. `sqrt` keeps one input per "
            "segment of about √N layers, so its held bytes grow like **O(√N)** while the peak "
            "adds one segment's internals during recomputation. `every-layer` keeps only each "
            "layer's input, about 1/16 of a layer's internals, so its line is nearly flat, "
            "and in backward it rebuilds **one layer's worth** at a time (the grey dotted "
            "line). The *peak* view rises with depth for every strategy: it also holds the "
            "parameters' gradients, which checkpointing does not shrink. The counted compute "
            "grows in step with depth for all three, the checkpointed lines steeper by the "
            "extra forward; measured times follow it only roughly on a shared server (one "
            "busy moment lifts a point)."),
    ),
    "segment": Curve(
        title=N_("Layers per segment k at a fixed depth"),
        vary="k", x_title=N_("layers per segment k"), fixes=(),
        base=_SMALL.replace(layers=16), strategies=(),  # every-k:K for each K swept
        points=lambda c: _divisors_up_to(c.layers),
        explanation=N_(
            "Here k is the number of **layers per segment**; N/k segments. Each segment keeps "
            "its input (a boundary) and is rebuilt whole in backward. Small k keeps many "
            "boundaries (the diamonds fall with k); large k rebuilds a big segment at once "
            "(the peak rises with k). In general the peak is U-shaped, with its bottom at "
            "k ≈ √(N · boundary size / layer size) (Chen et al.). A transformer block's "
            "internals are about 16× its input, so for N ≤ 35 the bottom sits at k = 1: the "
            "curve mostly rises, and **checkpointing every layer beats √N segments**. "
            "Deeper models move the bottom to k = 2 and up (from 36 layers on, two-layer "
            "segments beat every layer); √N segments are best only when a layer's "
            "internals are about as small as its input, as in the plain chains Chen et al. "
            "analysed."),
    ),
    "seq": Curve(
        title=N_("Sequence length"),
        vary="seq_len", x_title=N_("sequence length s (tokens)"), fixes=("seq",), base=_SMALL,
        strategies=(_NONE, _EVERY_LAYER, _SELECTIVE),
        points=lambda c: (32, 64, 128, 256, 512),
        explanation=N_(
            "With fused attention the held bytes grow linearly in s (no s² attention matrix is "
            "stored); checkpointing divides the slope. Time grows a little faster than "
            "linearly because attention itself costs s² FLOPs."),
    ),
    "batch": Curve(
        title=N_("Batch"),
        vary="batch", x_title=N_("batch b"), fixes=("batch",), base=_SMALL,
        strategies=(_NONE, _EVERY_LAYER, _SELECTIVE),
        points=lambda c: (1, 2, 4, 8),
        explanation=N_(
            "Every activation is proportional to the batch, so memory is a straight line in b "
            "for every strategy; checkpointing lowers the slope. The freed memory buys a "
            "larger batch at the same peak: see *What fits in memory*."),
    ),
}


def curve_figure(name: str, frame: pd.DataFrame, config: ModelConfig, metric: str,
                 lang: str = "en") -> go.Figure:
    curve = CURVES[name]
    if curve.vary == "k":  # both memory measures: the trade-off is between them
        return segment_figure(frame, config.layers, x=_x_column(frame, curve), lang=lang)
    measured, theory, memory_title, _ = MEMORY_METRICS[metric]
    reference = None
    if curve.vary == "layers":  # what every-layer rebuilds at a time, whatever the depth
        from memory.theory import predicted_block_bytes

        reference = (gettext(lang, "one layer's internals"),
                     float(predicted_block_bytes(config)))
    return sweep_figure(frame, _x_column(frame, curve), gettext(lang, curve.x_title),
                        memory=measured, theory=theory,
                        memory_title=gettext(lang, memory_title), reference=reference,
                        title=gettext(lang, curve.title), lang=lang)


def curve_caption(name: str, frame: pd.DataFrame, config: ModelConfig, lang: str = "en"
                  ) -> str:
    """What the chart shows, read from it: for the segment sweep, where the lowest peak is;
    for the others, how the dots and dashed lines are drawn; then the counted compute
    beside the prediction (reports.timing.sweep_compute_note)."""
    curve = CURVES[name]
    if curve.vary == "k":
        from reports.sweep_figures import segment_verdict

        return " ".join(filter(None, (
            segment_verdict(frame, config.layers, x=_x_column(frame, curve), lang=lang),
            sweep_compute_note(frame, _x_column(frame, curve), lang,
                               gettext(lang, curve.x_title)))))
    return " ".join(filter(None, (gettext(lang, "Dots: measured · dashed lines: theory."),
                                  sweep_compute_note(frame, _x_column(frame, curve), lang,
                                                     gettext(lang, curve.x_title)))))


def _x_column(frame: pd.DataFrame, curve: Curve) -> str:
    for column in (curve.vary, "value", {"seq_len": "seq"}.get(curve.vary, curve.vary)):
        if column in frame:
            return column
    raise KeyError(f"the sweep's frame has no column for {curve.vary}: {list(frame.columns)}")


def methods_of(frame: pd.DataFrame) -> list[str]:
    return list(frame["measured_by"].dropna().unique()) if "measured_by" in frame else []
