"""What the demo pages say about measured results: the shared core, no Streamlit.

The language's number locale (babel), a result's display label, the baseline and the best
strategy, table headers, file-name slugs, CSV headers and the published reference estimate.
The rest, by what it words: reports.timing (step times and compute),
compare_table (the compare table), peak_notes (where the peak is) and
fits_and_loss_tables (same result, what fits). Every text goes through the catalog in the
language `lang` the page passes (i18n.gettext) and numbers through i18n.units in that
language's style; the ui/ modules put them on the page.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from demos.results import EVENTS_COLUMN, StrategyResult
from i18n import N_, gettext, language
from memory.config import ModelConfig
from memory.strategies import spec_of_label
from memory.strategies import title as strategy_title
from memory.worked_examples import korthikanti_layer_bytes


def babel(lang: str) -> str:
    """The Babel locale i18n.units writes numbers in for a language code."""
    return language(lang).babel_locale


def config_slug(config: ModelConfig) -> str:
    return (f"L{config.layers}-h{config.hidden}-a{config.heads}-s{config.seq_len}"
            f"-b{config.batch}-V{config.vocab}-{config.dtype}")


def baseline_and_best(results: Sequence[StrategyResult]
                      ) -> tuple[StrategyResult | None, StrategyResult | None]:
    """The measured `none` result and the fitting strategy with the lowest peak."""
    fitted = [r for r in results if r.fits and r.peak_bytes is not None]
    base = next((r for r in fitted if r.strategy == "none"), None)
    others = [r for r in fitted if r.strategy != "none"]
    best = min(others, key=lambda r: r.peak_bytes) if others else None
    return base, best


def label(result: StrategyResult, lang: str = "en") -> str:
    """A result's display title in `lang` (memory.strategies.title of its record)."""
    return strategy_title(result.spec, lang)


def label_of(text: str, lang: str = "en", fallback: str | None = None) -> str:
    """The display title in `lang` of the strategy a table's "strategy" column names by
    its canonical text (a sweep, a what-fits search, training losses, the compiler page's
    points: memory.strategies.spec_of_label); the text itself (or `fallback`) when it
    names no strategy of the lab. Records are titled with memory.strategies.title."""
    spec = spec_of_label(str(text))
    return strategy_title(spec, lang) if spec is not None else fallback or str(text)


def header(lang: str, msgid: str) -> str:
    """A table header in `lang` (a message marked with N_ where the table is described)."""
    return gettext(lang, msgid)


def korthikanti(config: ModelConfig) -> float:
    """Korthikanti et al.'s estimate for all layers without checkpointing (16-bit, fused
    attention, 1-byte dropout masks), as published: a reference, not this model."""
    return config.layers * korthikanti_layer_bytes(config.batch, config.seq_len, config.hidden,
                                                   config.heads)


# ---------------------------------------------------------------- CSV headers

CSV_HEADERS: dict[str, str] = {
    "strategy": N_("strategy"), "label": N_("label"), "fits": N_("fits"), "error": N_("error"),
    "peak_bytes": N_("peak_bytes"), "activation_bytes": N_("activation_bytes"),
    "predicted_activation_bytes": N_("predicted_activation_bytes"),
    "predicted_peak_bytes": N_("predicted_peak_bytes"), "step_seconds": N_("step_seconds"),
    "loss": N_("loss"), "step": N_("step"), "max_grad_diff": N_("max_grad_diff"),
    "bitwise_equal": N_("bitwise_equal"), "measured_by": N_("measured_by"),
    "flops_counted": N_("flops_counted"), "flops_predicted": N_("flops_predicted"),
    "cpu_seconds": N_("cpu_seconds"),
}


def csv_frame(frame: pd.DataFrame, lang: str = "en") -> pd.DataFrame:
    """A frame for download with its known column names in `lang` (others kept; the
    tracker's event logs left out: they are the memory snapshot's download)."""
    return frame.drop(columns=[EVENTS_COLUMN], errors="ignore").rename(
        columns={c: gettext(lang, text) for c, text in CSV_HEADERS.items() if c in frame})

