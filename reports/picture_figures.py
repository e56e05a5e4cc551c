"""The /pictures page's figures, tables and sentences, from the runs demos.picture_models
measured: what each block saves for backward (a bar per block, plain beside checkpointed),
the same per image as the image grows (measured, beside the arithmetic of what grows:
C·H·W per feature map, (H/p)·(W/p) tokens), and each strategy's peak, counted FLOPs and
time (the verdict by CPU time or counted FLOPs: reports.timing). Pure functions, no
Streamlit; texts in the language `lang`."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from demos.picture_models import PictureRun
from demos.picture_settings import FAMILIES, growing_units
from i18n import format_number, gettext, ngettext
from i18n.units import MISSING, byte_unit, format_bytes
from reports import timing
from reports.figure_style import apply_layout, colour_of, empty_figure, largest
from reports.report import babel

# the lab's own strategies' colours (memory.strategies) for none and every layer; every
# n-th block has none of the lab's records: a colour of its own
COLOURS = {"none": colour_of("none"), "every-layer": colour_of("every-layer"),
           "every-n": "#d97706"}
ARITHMETIC = "#64748b"


def strategy_name(strategy: str, n: int, lang: str = "en") -> str:
    """"no checkpointing", "every block", "one block in 2"."""
    if strategy == "none":
        return gettext(lang, "no checkpointing")
    if strategy == "every-layer":
        return gettext(lang, "every block")
    return gettext(lang, "one block in {n}", n=n)


def run_name(run: PictureRun, lang: str = "en") -> str:
    return strategy_name(run.strategy, run.n, lang)


def short_name(path: str) -> str:
    """A block's path in a few characters (module names, not words): down_blocks.1
    .attentions.0.transformer_blocks.1 -> down1.attn0.t1, up_blocks.2.resnets.0 ->
    up2.res0, transformer_blocks.3 -> joint3, single_transformer_blocks.0 -> single0,
    encoder.layer.2 -> layer2."""
    parts = path.split(".")
    words = {"down_blocks": "down", "up_blocks": "up", "mid_block": "mid", "resnets": "res",
             "attentions": "attn", "transformer_blocks": "t",
             "single_transformer_blocks": "single", "layer": "layer", "layers": "layer"}
    if parts[0] in ("transformer_blocks", "single_transformer_blocks") and len(parts) == 2:
        return ("joint" if parts[0] == "transformer_blocks" else "single") + parts[1]
    if parts[0] in ("down_blocks", "up_blocks", "mid_block"):
        out, i = [], 0
        while i < len(parts):
            word = words.get(parts[i], parts[i])
            if i + 1 < len(parts) and parts[i + 1].isdigit():
                out.append(word + parts[i + 1])
                i += 2
            else:
                out.append(word)
                i += 1
        return ".".join(out)
    return f"layer{parts[-1]}" if parts[-1].isdigit() else path


def block_side(run: PictureRun, index: int) -> int:
    """The latent side a UNet block runs at (its level halves it); the latents' side for
    a transformer on latents; 0 for a vision encoder."""
    fam = FAMILIES[run.family]
    if fam.library_class == "UNet2DConditionModel":
        return (run.size // 8) >> run.levels[index]
    return 0


def block_figure(runs: Sequence[PictureRun], lang: str = "en") -> go.Figure:
    """Bytes saved for backward per block, one bar per strategy side by side, and what
    is saved outside the blocks as the last group."""
    title = gettext(lang, "Saved for backward, per block")
    done = [r for r in runs if r.fits and r.per_block]
    if not done:
        return empty_figure(title, gettext(lang, "No measurements"), lang)
    outside = gettext(lang, "outside the blocks")
    labels = [short_name(b) for b in done[0].blocks] + [outside]
    unit, scale = byte_unit(largest([*(v for r in done for v in r.per_block),
                                     *(sum(r.outside.values()) for r in done)]))
    fig = go.Figure()
    for run in done:
        name = run_name(run, lang)
        values = [*run.per_block, sum(run.outside.values())]
        kept = set(run.checkpointed)
        hover = []
        for i, path in enumerate([*run.blocks, outside]):
            side = block_side(run, i) if i < len(run.blocks) else 0
            where = f"<br>{side}×{side}" if side else ""
            mark = (gettext(lang, "checkpointed") if i in kept else
                    gettext(lang, "plain") if i < len(run.blocks) else "")
            hover.append(f"{path}{where}<br>{mark}")
        fig.add_bar(x=labels, y=[v / scale for v in values], name=name,
                    marker_color=COLOURS.get(run.strategy, ARITHMETIC), customdata=hover,
                    hovertemplate=(f"{name}<br>%{{customdata}}<br>%{{y:.2f}} {unit}"
                                   "<extra></extra>"))
    fig.update_layout(barmode="group", bargap=0.15)
    fig.update_xaxes(tickangle=-60, tickfont=dict(size=10))
    fig.update_yaxes(title_text=unit, rangemode="tozero")
    return apply_layout(fig, title, 430, lang)


def _per_image(run: PictureRun) -> float:
    return run.total / max(run.batch, 1)


def sweep_figure(runs: Sequence[PictureRun], lang: str = "en") -> go.Figure:
    """Bytes saved for backward per image against the image's side, one line per
    strategy; dashed, the arithmetic: the smallest image's bytes grown as what grows
    (growing_units)."""
    title = gettext(lang, "Saved for backward per image, as the image grows")
    done = [r for r in runs if r.fits and r.per_block]
    if not done:
        return empty_figure(title, gettext(lang, "No measurements"), lang)
    unit, scale = byte_unit(largest(_per_image(r) for r in done))
    fig = go.Figure()
    side = gettext(lang, "image side (pixels)")
    arithmetic = gettext(lang, "arithmetic: grows as {what}",
                         what=growth_words(done[0].family, lang))
    for strategy in dict.fromkeys(r.strategy for r in done):
        part = sorted((r for r in done if r.strategy == strategy), key=lambda r: r.size)
        name = run_name(part[0], lang)
        colour = COLOURS.get(strategy, ARITHMETIC)
        fig.add_scatter(x=[r.size for r in part], y=[_per_image(r) / scale for r in part],
                        mode="lines+markers", name=name, line=dict(color=colour, width=2),
                        marker=dict(size=8),
                        hovertemplate=f"{name}<br>%{{x}} px<br>%{{y:.2f}} {unit}<extra></extra>")
        first = part[0]
        units0 = growing_units(first.family, first.size)
        grown = [_per_image(first) * growing_units(r.family, r.size) / units0 for r in part]
        fig.add_scatter(x=[r.size for r in part], y=[g / scale for g in grown], mode="lines",
                        name=arithmetic, legendgroup="arithmetic",
                        showlegend=strategy == "none",
                        line=dict(color=colour, width=1.5, dash="dash"),
                        hovertemplate=(f"{arithmetic}<br>%{{x}} px<br>%{{y:.2f}} {unit}"
                                       "<extra></extra>"))
    fig.update_xaxes(title_text=side)
    fig.update_yaxes(title_text=unit, rangemode="tozero")
    return apply_layout(fig, title, 420, lang)


def growth_words(family: str, lang: str = "en") -> str:
    """What grows with the image in a family, in words: "C·H·W" or "(H/p)·(W/p)"."""
    fam = FAMILIES[family]
    if fam.grows == "map":
        return gettext(lang, "the full-resolution feature map C·H·W")
    if fam.owner == "transformer":
        return gettext(lang, "the tokens (H/16)·(W/16) and the text's")
    return gettext(lang, "the tokens (H/{p})·(W/{p})", p=fam.patch)


def sweep_table(runs: Sequence[PictureRun], lang: str = "en") -> pd.DataFrame:
    """Per image side: what grows (numbers of the feature map, or tokens), and per
    strategy the bytes saved per image, measured."""
    done = [r for r in runs if r.fits and r.per_block]
    if not done:
        return pd.DataFrame()
    loc = babel(lang)
    family = done[0].family
    fam = FAMILIES[family]
    grows = (gettext(lang, "Feature map C·H·W (numbers)") if fam.grows == "map" else
             gettext(lang, "Tokens, image and text") if fam.owner == "transformer" else
             gettext(lang, "Tokens"))
    rows = []
    for size in sorted({r.size for r in done}):
        row = {gettext(lang, "Image side"): gettext(lang, "{size} px", size=size),
               grows: format_number(growing_units(family, size), lang)}
        for run in (r for r in done if r.size == size):
            row[run_name(run, lang)] = format_bytes(_per_image(run), locale=loc)
        rows.append(row)
    return pd.DataFrame(rows)


def outside_table(runs: Sequence[PictureRun], lang: str = "en") -> pd.DataFrame:
    """What is saved outside the checkpointable blocks, by part, per strategy."""
    done = [r for r in runs if r.fits and r.per_block]
    if not done:
        return pd.DataFrame()
    loc = babel(lang)
    words = {"stem": gettext(lang, "input and output layers, embeddings"),
             "shared": gettext(lang, "inputs every block shares (time, text, position)"),
             "loss": gettext(lang, "the loss")}
    parts = list(dict.fromkeys(p for r in done for p in r.outside))
    rows = []
    for part in parts:
        row = {gettext(lang, "Where"): words.get(part, gettext(
            lang, "{part}: what diffusers never checkpoints there", part=part))}
        for run in done:
            row[run_name(run, lang)] = format_bytes(run.outside.get(part, 0), locale=loc)
        rows.append(row)
    return pd.DataFrame(rows)


def cost_table(runs: Sequence[PictureRun], lang: str = "en", device_kind: str = "cpu"
               ) -> pd.DataFrame:
    """Per strategy: counted FLOPs, CPU time, wall time with its spread, and the verdict
    against no checkpointing (by CPU time on a CPU, counted FLOPs on a GPU)."""
    base = next((r for r in runs if r.strategy == "none" and r.fits), None)
    rows = []
    for run in runs:
        rows.append({
            gettext(lang, "Checkpointing"): run_name(run, lang),
            gettext(lang, "Counted FLOPs"): timing.gflop_text(run.flops_counted, lang),
            gettext(lang, "CPU time"): timing.cpu_text(run, lang) or MISSING,  # type: ignore[arg-type]
            gettext(lang, "Wall time"): timing.time_text(run, lang),  # type: ignore[arg-type]
            gettext(lang, "Against no checkpointing"): timing.time_vs_none_text(
                run, base, lang, device_kind),  # type: ignore[arg-type]
        })
    return pd.DataFrame(rows)


def level_sentence(runs: Sequence[PictureRun], lang: str = "en") -> str:
    """For a UNet: the resolution whose blocks keep the most without checkpointing, and
    their share of what all blocks keep (the lesson's point: checkpoints pay most where
    the bytes are)."""
    base = next((r for r in runs if r.strategy == "none" and r.fits and r.per_block), None)
    if base is None or FAMILIES[base.family].grows != "map" or not base.blocks_total:
        return ""
    by_side: dict[int, int] = {}
    for i, nbytes in enumerate(base.per_block):
        side = block_side(base, i)
        by_side[side] = by_side.get(side, 0) + nbytes
    side, kept = max(by_side.items(), key=lambda item: item[1])
    full = max(by_side)
    text = gettext(lang, "Without checkpointing the blocks at {side} × {side} latents keep "
                         "the most: {share:.0%} of what the blocks keep.",
                   side=side, share=kept / base.blocks_total)
    if side != full:
        text += " " + gettext(lang, "Not the full-resolution ones ({full} × {full}): fewer "
                                    "channels there, and in this layout more transformer "
                                    "layers at the lower levels.", full=full)
    return text


def memory_sentence(runs: Sequence[PictureRun], lang: str = "en") -> str:
    """What checkpointing changed in what is saved and in the peak."""
    base = next((r for r in runs if r.strategy == "none" and r.fits), None)
    other = next((r for r in runs if r.strategy != "none" and r.fits), None)
    if base is None or other is None or not base.total or not base.peak_bytes:
        return ""
    loc = babel(lang)
    blocks = len(other.checkpointed)
    return ngettext(
        lang,
        "With {blocks} block checkpointed the step saves {kept} for backward instead of "
        "{plain} ({share:.0%}); its peak is {peak} instead of {plain_peak}.",
        "With {blocks} blocks checkpointed the step saves {kept} for backward instead of "
        "{plain} ({share:.0%}); its peak is {peak} instead of {plain_peak}.",
        blocks, blocks=blocks, kept=format_bytes(other.total, locale=loc),
        plain=format_bytes(base.total, locale=loc), share=other.total / base.total,
        peak=format_bytes(other.peak_bytes or 0, locale=loc),
        plain_peak=format_bytes(base.peak_bytes, locale=loc))
