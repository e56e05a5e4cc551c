"""The planner page's image plans (/plan with an image preset, or a pasted diffusers or
transformers vision config.json): the inputs an image run takes instead of a sequence
length (the image's side in pixels on the model's grid, the batch, precision, full
fine-tuning, LoRA or, for a diffusion model, QLoRA, the frozen encoders on the GPU or
cached, the optimizer, one GPU),
and planner.picture_report's report drawn: the recommendation's headline, every
checkpointing choice with the recommended row marked, what the run holds besides the
trained model, and the code. Ids and bytes come from planner/; their words are catalog
messages here and in ui.plan_words; the shared controls are ui.plan_controls'."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from i18n import N_, units
from lessons.catalog import lesson
from memory import hf_config
from model_classes.causal_lm_config import ClassConfigError
from planner import class_worker
from planner.picture_cli import picture_kind, side_unit
from planner.picture_plan import ENCODERS, QLORA_KINDS, TUNINGS, PictureError, PictureInputs
from planner.picture_presets import PICTURE_PRESETS, preset_config
from planner.picture_report import PICTURE_SECONDS, plan_report
from ui import query
from ui.i18n import babel_locale, current_language, fmt_percent, t, tn
from ui.navigation import page_link
from ui.plan_controls import (
    MeasuringNotice,
    class_problem,
    gpu_and_headroom,
    headline,
    optimizer_control,
    precision_control,
    rank_control,
    targets_control,
    tuning_control,
)
from ui.plan_words import COLUMNS, REASONS, gib, verdict, word

MAX_SIDE = 4096  # the largest side offered, in pixels
BATCH_RANGE = (1, 64, 1)
SEEN = "plan_picture_model"  # the image model the side was last chosen for
HUB = "https://huggingface.co/"

KINDS = {"unet": N_("diffusion UNet"), "diffusion-transformer": N_("diffusion transformer"),
         "vision-encoder": N_("vision encoder")}
ENCODER_WORDS = {"resident": N_("on the GPU"),
                 "cached": N_("cached (latents and prompt embeddings made once)")}
HELD = {  # what each part the run holds besides the trained model is, by its id
    "vae": N_("Frozen: encodes each image into latents for the step (and decodes them "
              "back); no gradients, no optimizer state."),
    "text_encoder": N_("Frozen: turns each prompt into embeddings; no gradients, no "
                       "optimizer state."),
    "latents": N_("The batch's latents: its images as the VAE encodes them."),
    "text_embeddings": N_("The batch's prompt embeddings."),
    "pixels": N_("The batch's images, in pixels."),
    "latent_cache": N_("The cached latents of the data set's images, kept on the GPU in "
                       "place of the encoders."),
}
INPUT_NAMES = {"latents": N_("Latents"), "text_embeddings": N_("Prompt embeddings"),
               "pixels": N_("Pixels"), "latent_cache": N_("Latent cache")}
SUGGESTIONS = {"encoders": N_("Cached latents and embeddings"),
               "batch": N_("One image per step")}  # the optimizer's and tuning's: their words


@dataclass(frozen=True)
class PictureModel:
    """An image model to plan: a preset (`key` its name) or a pasted config ("config")."""

    key: str
    config: dict[str, Any]
    kind: str  # planner.picture_cli.picture_kind
    unit: int  # the side is a whole multiple of it, in pixels
    label: str
    repo: str | None  # its repository on the Hugging Face Hub (a preset's)

    @property
    def diffusion(self) -> bool:
        return "_class_name" in self.config


def picture_presets() -> dict[str, str]:
    """The image presets' names and labels, in the order the model choice shows them."""
    return {name: label for name, (_, label) in PICTURE_PRESETS.items()}


def picture_model(source: str | dict[str, Any]) -> PictureModel | None:
    """An image preset by name, or a parsed config.json when an image model kind builds
    it (None for any other config); memory.hf_config.ConfigJsonError for a config sized
    as no image model is."""
    if isinstance(source, str):
        repo, label = PICTURE_PRESETS[source]
        cfg, key = preset_config(source), source
    else:
        cfg, key, repo = source, "config", None
        label = str(cfg.get("_class_name") or cfg.get("model_type") or "")
    kind = picture_kind(cfg)
    if kind is None:
        return None
    if key == "config":  # its sizes bounded before anything is built (ConfigJsonError)
        hf_config.check_image_sizes(cfg)
    return PictureModel(key, cfg, kind, side_unit(cfg, kind), label, repo)


# ---------------------------------------------------------------- inputs


def default_side(m: PictureModel) -> int:
    """1,024 pixels for a diffusion model; a vision encoder's own image_size; on its grid
    and at most the largest side offered."""
    side = 1024
    if not m.diffusion:
        part = m.config.get("vision_config") if isinstance(m.config.get("vision_config"),
                                                           dict) else m.config
        side = int(part.get("image_size") or 224)
    return max(m.unit, min(side, MAX_SIDE) // m.unit * m.unit)


def _side_control(m: PictureModel) -> int:
    """The image's side, on the model's grid; another model starts from its own default."""
    seen = st.session_state.get(SEEN)
    if seen is not None and seen != m.key:
        st.session_state.pop("resolution", None)
        if "resolution" in st.query_params:
            del st.query_params["resolution"]
    st.session_state[SEEN] = m.key
    return query.int_slider(
        "resolution", t("Resolution (side in pixels)"), m.unit, MAX_SIDE // m.unit * m.unit,
        m.unit, default_side(m),
        help=t("The square image's side; this model takes multiples of {unit} pixels.",
               unit=m.unit))


def problem(m: PictureModel, p: PictureInputs) -> str | None:
    """A setting the image planner cannot plan, in one line; None when there is none."""
    if p.resolution % m.unit:
        near = max(1, round(p.resolution / m.unit)) * m.unit
        return t("This model takes sides that are multiples of {unit} pixels: {side} is "
                 "not one (try {near}).", unit=m.unit, side=p.resolution, near=near)
    return None


def one_gpu_note() -> None:
    """The image planner plans one GPU (no GPU count is offered); a link that asks for
    more (from a language model's plan) is told what that means for an image model."""
    if st.query_params.get("shards") not in (None, "1"):
        st.info(t("The image planner plans one GPU. Under data parallelism (accelerate "
                  "launch on several GPUs) each GPU holds what this plan holds for its own "
                  "images per step."), icon=":material/info:")


def picture_inputs(m: PictureModel) -> PictureInputs | str:
    """The image plan's inputs from the URL-bound controls, or a one-line message."""
    st.subheader(t("Training"))
    row = st.columns(3)
    with row[0]:
        side = _side_control(m)
    with row[1]:
        batch = query.int_slider("batch", t("Images per step"), *BATCH_RANGE, 1,
                                 help=t("The batch: images in one forward and backward."))
    with row[2]:
        precision = precision_control()
    row = st.columns(3)
    with row[0]:
        optimizer = optimizer_control()
    with row[1]:
        tuning = tuning_control(TUNINGS if m.kind in QLORA_KINDS else ("full", "lora"))
    rank, targets, encoders = 16, "attention", ENCODERS[0]
    row = st.columns(3)
    if tuning in ("lora", "qlora"):
        with row[0]:
            rank = rank_control()
        with row[1]:
            targets = targets_control("attention")
    if m.diffusion:
        with row[2]:
            encoders = query.choice(
                "encoders", t("VAE and text encoders"), ENCODERS, ENCODERS[0],
                format_func=lambda k: t(ENCODER_WORDS[k]),
                help=t("Frozen, they stay on the GPU through training, or run once over "
                       "the data set before it (cached) and leave the GPU."))
    st.subheader(t("GPU"))
    one_gpu_note()
    gpu, headroom = gpu_and_headroom()
    p = PictureInputs(m.config, resolution=side, batch=batch, precision=precision,
                      tuning=tuning, lora_rank=rank, lora_targets=targets,
                      optimizer=optimizer, encoders=encoders, gpu_bytes=gpu,
                      headroom=headroom, label=m.label)
    return problem(m, p) or p


# ---------------------------------------------------------------- outputs


class PictureNotice(MeasuringNotice):
    """The waiting notice while an image model's class is measured at settings the
    shipped measurements do not hold."""

    def text(self, waited: float) -> str:
        return t("Measuring the image model's class at these settings (not among the "
                 "shipped measurements): {seconds} s so far (stopped at {limit} s).",
                 seconds=int(waited), limit=int(self.limit))


def strategy_name(row: dict[str, Any]) -> str:
    """A checkpointing choice of an image plan in words: which blocks it checkpoints."""
    if row["strategy"] == "optimal":
        return tn("The least recompute: {count} chosen block",
                  "The least recompute: {count} chosen blocks", row["blocks_checkpointed"])
    if row["strategy"] == "first-k":
        return tn("The first block", "The first {count} blocks", row["k"])
    if row["strategy"] == "every-n":
        return t("Every n-th block, n = {n}", n=row["n"])
    if row["strategy"] == "every-layer":
        return t("Every block")
    return word("none")


def _whole_gpu_spare(row: dict[str, Any], p: PictureInputs) -> float:
    return p.gpu_bytes - row["peak_bytes"]


def strategy_table(data: dict[str, Any], p: PictureInputs) -> pd.DataFrame:
    """Every choice the page shows, the recommended row marked."""
    blocks = data["model"]["blocks"]
    rows = []
    for key, row in data["strategies"].items():
        mark = " " + t("· recommended") if key == data["recommended_row"] else ""
        rows.append({
            t(COLUMNS["strategy"]): strategy_name(row) + mark,
            t("Blocks checkpointed"): t("{count} of {blocks}", count=row[
                "blocks_checkpointed"], blocks=blocks),
            t("Activations kept"): gib(row["activations_kept_bytes"]),
            t(COLUMNS["peak"]): gib(row["peak_bytes"]),
            t("Recomputed (share of a step's FLOPs)"): "–" if row[
                "recompute_share"] is None else fmt_percent(row["recompute_share"], 1),
            t(COLUMNS["fits"]): ("✓ " if row["fits"] else "✗ ") + verdict(
                _whole_gpu_spare(row, p), row["fits"], p.headroom)})
    return pd.DataFrame(rows)


def change_name(alt: dict[str, Any]) -> str:
    """An alternative's changes in words: "QLoRA (4-bit base) + Cached latents ..."."""
    return " + ".join(word(c["value"]) if c["change"] in ("optimizer", "tuning") else
                      t(SUGGESTIONS[c["change"]]) for c in alt["changes"])


def _alternative(alt: dict[str, Any], p: PictureInputs) -> str:
    spare = p.gpu_bytes - alt["every_layer_peak_bytes"]
    return "- " + t("**{change}**, with every block checkpointed: {peak} per GPU, {verdict}",
                    change=change_name(alt), peak=gib(alt["every_layer_peak_bytes"]),
                    verdict=verdict(spare, alt["fits"], p.headroom))


def _take(take: dict[str, Any], blocks: int, p: PictureInputs) -> str:
    plan = take["plan"]
    return t("Take **{change}**: {plan} ({count} of {blocks} blocks checkpointed) then "
             "peaks at {peak} per GPU: {verdict}. The code below is that plan's.",
             change=change_name(take), plan=strategy_name(plan),
             count=plan["blocks_checkpointed"], blocks=blocks, peak=gib(plan["peak_bytes"]),
             verdict=verdict(p.gpu_bytes - plan["peak_bytes"], True, p.headroom))


def _placement(placed: dict[str, Any]) -> str:
    """Why the optimal placement: what it reruns, and saves against every block and the
    first blocks that fit, in shares of a step's counted FLOPs."""
    return t("Of the blocks whose checkpointing fits, these rerun the fewest FLOPs in "
             "backward: {share} of a step's FLOPs (counted by torch), {every} less than "
             "every block and {first} less than the first {count} blocks that fit.",
             share=fmt_percent(placed["recompute_share"], 1),
             every=fmt_percent(placed["saved_vs_every_layer"], 1),
             first=fmt_percent(placed["saved_vs_first_k"] or 0, 1),
             count=placed["first_k"] or 0)


def recommendation(data: dict[str, Any], p: PictureInputs) -> None:
    """The headline (as the language plan's), why, and, when the plan does not fit, its
    alternatives best first and the one to take."""
    rec, blocks = data["recommendation"], data["model"]["blocks"]
    st.subheader(t("Recommendation"))
    plan = strategy_name(rec)
    if rec["fits"]:
        lead = t("Recommended: **{plan}** ({count} of {blocks} blocks checkpointed, {peak} "
                 "per GPU): {verdict}.", plan=plan, count=rec["blocks_checkpointed"],
                 blocks=blocks, peak=gib(rec["peak_bytes"]),
                 verdict=verdict(_whole_gpu_spare(rec, p), True, p.headroom))
    else:
        lead = t("Closest: **{plan}** ({peak} per GPU), and it still does not fit: "
                 "{verdict}.", plan=plan, peak=gib(rec["peak_bytes"]),
                 verdict=verdict(_whole_gpu_spare(rec, p), False, p.headroom))
    headline(lead, rec["fits"])
    lines = []
    if not rec["fits"]:
        lines = [t("Even with every block checkpointed this does not fit. The alternatives, "
                   "best first:"), *(_alternative(alt, p) for alt in rec["alternatives"])]
        lines.append("\n" + (_take(rec["take"], blocks, p) if rec["take"] else t(
            "None of them fits, so no code is shown: this needs a larger GPU, a smaller "
            "image or fewer trained parameters.")))
    elif rec["strategy"] == "none":
        lines = [t(REASONS["fits-without-checkpointing"])]
    elif rec["strategy"] == "every-layer":
        lines = [t("Only checkpointing every block fits; it costs about one more forward "
                   "pass of the model.")]
    elif rec["strategy"] == "optimal" and data.get("placement"):
        lines = [_placement(data["placement"])]
    else:
        lines = [t("Checkpointing only as many blocks as needed to fit runs the fewest of "
                   "them again in backward: cheaper than every block.")]
    st.markdown("\n".join(lines))
    page_link("image-models", label=t("Why: {lesson}", lesson=lesson(
        "image-models").title_in(current_language())), icon=":material/school:")


def held(data: dict[str, Any], p: PictureInputs) -> None:
    """What the run holds besides the trained model: the frozen parts and the inputs."""
    st.subheader(t("Besides the trained model"))
    code = babel_locale()
    labels = {part["id"]: (part["label"], part["params"]) for part in data["frozen"]}
    rows = []
    for part, size in data["around_model_bytes"].items():
        name, params = labels.get(part, (t(INPUT_NAMES.get(part, part)), None))
        what = HELD.get("text_encoder" if part.startswith("text_encoder_") else part)
        rows.append({t("Part"): name,
                     t("Parameters"): units.number(params, locale=code) if params
                     else units.MISSING,
                     t("Memory"): units.format_bytes(size, locale=code),
                     t("What it holds"): t(what) if what else ""})
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, column_config={
            t("What it holds"): st.column_config.TextColumn(width="large")})
    if not data["model"]["family"] and not p.config.get("_class_name"):
        st.caption(t("A vision encoder trains on its own: no VAE, no text encoders."))
    elif p.encoders == "cached":
        st.caption(t("Cached: the VAE and text encoders run once over the data set before "
                     "training and leave the GPU; the step reads the latents and prompt "
                     "embeddings they made."))


def code_tabs(data: dict[str, Any]) -> None:
    """The printed code: the trained model, the frozen parts, the training script; the
    plan to take's when the asked one does not fit, none when nothing fits."""
    if data["code_for"] is None:
        return
    take = data["recommendation"]["take"]
    st.subheader(t("Code for the recommended plan") if take is None else
                 t("Code for the plan to take: {change}", change=change_name(take)))
    parts = [(t("Trained model"), data["code"]["model"], "python"),
             (t("Frozen parts"), data["code"]["pipeline"], "python"),
             (t("Training script"), data["code"]["script"], "bash")]
    parts = [part for part in parts if part[1]]
    for tab, (_, text, language) in zip(st.tabs([name for name, _, _ in parts]), parts,
                                        strict=True):
        tab.code(text, language=language)
    if data["code"]["script"]:
        st.caption(t("The script is diffusers' DreamBooth LoRA example for this family, "
                     "with only the flags it has."))


def picture_outputs(m: PictureModel, p: PictureInputs, data: dict[str, Any]) -> None:
    """Everything below the inputs of an image plan."""
    model, rec = data["model"], data["recommendation"]
    trained = (model["trainable_params"] if p.adapters else model["params"])
    caption = t("{name} ({kind}) · {params:,.2f}B parameters, {trained:,.1f}M trained · "
                "{blocks} blocks · sides in multiples of {unit} pixels",
                kind=t(KINDS[m.kind]), name=model["class"], params=model["params"] / 1e9,
                trained=trained / 1e6, blocks=model["blocks"], unit=m.unit)
    if m.repo:
        caption += f" · [{m.repo}]({HUB}{m.repo})"
    st.caption(caption)
    st.divider()
    st.metric(t("Peak memory per GPU"), gib(rec["peak_bytes"]),
              verdict(_whole_gpu_spare(rec, p), rec["fits"], p.headroom),
              delta_color="normal" if rec["fits"] else "inverse",
              help=t("The recommended choice's peak: the trained model's weights, gradients "
                     "and optimizer state, the frozen parts and inputs, the activations "
                     "kept and an allowance for workspace."))
    recommendation(data, p)
    st.subheader(t("Every checkpointing choice"))
    st.dataframe(strategy_table(data, p), hide_index=True, column_config={
        t(COLUMNS["strategy"]): st.column_config.TextColumn(pinned=True, width="medium")})
    held(data, p)
    code_tabs(data)


def picture_plan(m: PictureModel) -> None:
    """An image model's inputs and plan (a measurement at settings the shipped ones do not
    hold waits in its own process, with a notice)."""
    p = picture_inputs(m)
    if isinstance(p, str):
        st.error(p, icon=":material/error:")
        return
    try:
        with class_worker.waiting(PictureNotice(max(class_worker.TIME_LIMIT_S,
                                                    PICTURE_SECONDS))):
            data = plan_report(p, m.repo, language=current_language())
    except ClassConfigError as error:
        st.error(class_problem(error), icon=":material/error:")
        return
    except PictureError:  # a side off the measured class's grid (checked above)
        st.error(problem(m, p) or "", icon=":material/error:")
        return
    picture_outputs(m, p, data)
