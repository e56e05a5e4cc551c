"""The planner page (/plan): inputs bound to the URL, the memory per GPU, every
checkpointing choice, the recommendation with its lessons, and the code to use.

All numbers come from the memory model and planner/ (ids and bytes); ui.plan_words words
them in the session's language (its word tables are catalog messages, N_, keyed by the ids);
this module keeps the widgets and the layout.
"""

from __future__ import annotations

import functools
import textwrap

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from i18n import units
from lessons.catalog import lesson
from memory import footprint as P
from memory import hf_config
from memory.architectures import DEFAULT_PRESET, PRESETS, Architecture, ShapeError, custom
from memory.class_layers import LayerSource
from memory.parallel import Layout
from model_classes.causal_lm_config import ClassConfigError
from planner import class_worker
from planner import hf_code as hf_module
from planner import parallel_plan as PP
from planner import recommend as recommend_module
from planner import torch_code as torch_module
from planner.class_cache import from_config_json as class_config
from planner.preset_classes import preset_source
from reports.figure_style import separators
from ui import query
from ui.demo_display import paint_numbers_first
from ui.i18n import babel_locale, current_language, fmt_percent, pt, t, tn
from ui.navigation import page_link
from ui.plan_class_view import measured_class
from ui.plan_controls import (
    MeasuringNotice,
    class_problem,
    gpu_and_headroom,
    headline,
    optimizer_control,
    precision_control,
    rank_control,
    shards_control,
    targets_control,
    tuning_control,
)
from ui.plan_gpus_view import across_gpus, describe, layout_controls, spread_code
from ui.plan_picture_view import PictureModel, picture_model, picture_plan, picture_presets
from ui.plan_words import (
    APPROXIMATIONS,
    COLUMNS,
    CONFIG_PROBLEMS,
    PROBLEMS,
    REASONS,
    GiB,
    advice_title,
    gib,
    plan_title,
    preset_caption,
    row_name,
    verdict,
    word,
)

COLOURS = {"weights": "#1f4e79", "gradients": "#2e75b6", "optimizer": "#9dc3e6",
           "activations_kept": "#c55a11", "activations_rebuilt": "#f4b183",
           "logits": "#7030a0", "workspace": "#a6a6a6"}
SEQ_RANGE = (128, 131_072, 128)


# ---------------------------------------------------------------- inputs


Model = tuple[Architecture, LayerSource | None]


def _config_json() -> Model | PictureModel | str:
    """The architecture of a pasted config.json and its measured transformers class, or an
    image model's config (kept in the session, not in the link)."""
    class_worker.warm()  # the measuring processes' libraries, loaded while the learner pastes
    text = st.text_area(t("config.json"), key="plan_config_json", height=200,
                        max_chars=hf_config.MAX_TEXT_CHARS,
                        placeholder='{"model_type": "llama", "hidden_size": 4096, ...}',
                        help=t("The config.json of a Hugging Face decoder-only language "
                               "model (Llama, Mistral, Mixtral, Qwen, Gemma, Phi, OLMo, "
                               "GPT-2, GPT-NeoX, Falcon ...), as on its Hub page: each "
                               "layer's memory is measured on its transformers class. Or "
                               "an image model's: a diffusers UNet or diffusion transformer "
                               "(SDXL, SD3, Flux), a transformers vision encoder (ViT, "
                               "SigLIP, DINOv2, CLIP's vision tower)."))
    st.caption(t("A pasted config.json stays in this session; the link carries the other "
                 "settings."))
    if not text.strip():
        return t("Paste a config.json to plan for your own model.")
    try:
        pictured = picture_model(hf_config.parse(text))
        if pictured is not None:
            return pictured
        with st.spinner(t("Measuring the model's transformers class ...")):
            arch, source = class_config(text)
    except hf_config.ConfigJsonError as error:
        return t(CONFIG_PROBLEMS[error.problem], field=error.field, value=error.value,
                 limit=error.limit)
    except ClassConfigError as error:
        return class_problem(error)
    st.caption(preset_caption(arch))
    return arch, source


def _model_controls() -> Model | PictureModel | str:
    """The architecture (and a pasted config's class) from the URL-bound controls, an image
    model, or an error message."""
    pictures = picture_presets()
    key = query.choice("model", t("Model"), [*PRESETS, *pictures, "custom", "config"],
                       DEFAULT_PRESET, help=t("Language models first, then image models "
                                              "(diffusion models and vision encoders)."),
                       format_func=lambda k: PRESETS[k].label if k in PRESETS else
                       pictures[k] if k in pictures else word(k))
    if key in pictures:
        found = picture_model(key)
        assert found is not None
        return found
    if key == "config":
        return _config_json()
    if key != "custom":  # a preset: its class's terms, measured and shipped
        arch = PRESETS[key]
        st.caption(preset_caption(arch))
        return arch, preset_source(key)
    base = PRESETS[DEFAULT_PRESET]
    rows = [st.columns(3) for _ in range(3)]
    cells = [cell for row in rows for cell in row]
    with cells[0]:
        layers = query.int_slider("layers", t("Layers"), 1, 128, 1, base.layers)
    with cells[1]:
        hidden = query.int_slider("hidden", t("Hidden size"), 64, 16_384, 64, base.hidden)
    with cells[2]:
        heads = query.int_slider("heads", t("Attention heads"), 1, 128, 1, base.heads)
    with cells[3]:
        kv = query.int_slider("kv", t("Key/value heads"), 1, 128, 1, base.kv_heads,
                              help=t("Grouped-query attention: fewer key/value heads than "
                                     "query heads. Equal to the heads for plain multi-head."))
    with cells[4]:
        mlp = query.int_slider("mlp", t("MLP width"), 64, 65_536, 64, base.mlp_width)
    with cells[5]:
        vocab = query.int_slider("vocab", t("Vocabulary"), 256, 262_144, 256, 128_256)
    with cells[6]:
        mlp_kind = query.choice("act", t("MLP kind"), ["gelu", "swiglu"], "swiglu",
                                format_func=word)
    with cells[7]:
        norm = query.choice("norm", t("Norm"), ["layernorm", "rmsnorm"], "rmsnorm",
                            format_func=word)
    with cells[8]:
        tied = query.choice("tied", t("Tied embeddings"), ["no", "yes"], "no",
                            format_func=word) == "yes"
    try:
        return custom(layers, hidden, heads, kv, mlp, mlp_kind, norm, vocab, tied), None
    except ShapeError as error:
        return t("This model is not consistent: {problem}.",
                 problem=t(PROBLEMS[error.problem], **error.params))


def _training_controls(source: LayerSource | None) -> dict:
    out: dict = {}
    row = st.columns(3)
    with row[0]:
        out["seq"] = query.int_slider("seq", t("Sequence length"), *SEQ_RANGE, 4096,
                                      help=t("Tokens per sample (s)."))
    with row[1]:
        out["batch"] = query.int_slider("mb", t("Micro-batch"), 1, 64, 1, 1,
                                        help=t("Samples per forward/backward on one GPU (b)."))
    with row[2]:
        out["accumulation"] = query.int_slider(
            "accum", t("Gradient accumulation"), 1, 256, 1, 8,
            help=t("Micro-batches per optimizer step: more tokens per step, no more memory."))
    row = st.columns(3)
    with row[0]:
        out["precision"] = precision_control()
    with row[1]:
        out["optimizer"] = optimizer_control()
    with row[2]:
        out["tuning"] = tuning_control()
    row = st.columns(3)
    if out["tuning"] != "full":
        with row[0]:
            out["lora_rank"] = rank_control()
        with row[1]:
            out["lora_targets"] = targets_control("all-linear")
        row = st.columns(3)
    with row[0]:
        out["shards"] = shards_control()
    with row[1]:
        out["fused"] = query.choice("attn", t("Attention kernel"), ["fused", "math"], "fused",
                                    format_func=word) == "fused"
        if out["fused"] and source is not None and "sdpa" not in source.kernels:
            out["fused"] = False
            st.caption(t("The {family} class has no fused (SDPA) attention: planned with "
                         "its eager attention.", family=source.family))
    with row[2]:
        out["chunked_loss"] = query.choice(
            "loss", pt("planner input", "Loss"), ["full", "chunked"], "full",
            format_func=lambda k: word("whole" if k == "full" else k)) == "chunked"
    return out


def _checkpoint_controls(arch: Architecture) -> dict:
    out: dict = {"strategy": query.choice("ckpt", t("Checkpointing"), P.STRATEGIES,
                                          "every-layer", format_func=word)}
    if out["strategy"] == "some-layers":
        out["some_layers"] = query.int_slider(
            "k", t("Layers checkpointed"), 1, arch.layers, 1, max(1, arch.layers // 2),
            help=t("The first k layers keep only their input; the others keep everything."))
    if out["strategy"] == "budget":
        out["budget"] = query.float_slider(
            "budget", t("Activation memory budget"), 0.0, 1.0, 0.05, 0.5,
            help=t("0 saves only each compiled graph's inputs, 1 the compiler's default "
                   "choice; values between interpolate (an approximation here). Sets "
                   "torch._functorch.config.activation_memory_budget."))
    return out


def inputs() -> P.PlannerInputs | PictureModel | str:
    """The planner inputs from the URL-bound controls, an image model (whose own inputs
    ui.plan_picture_view draws), or an error message."""
    st.subheader(t("Model"))
    model = _model_controls()
    if isinstance(model, str | PictureModel):
        return model
    arch, source = model
    st.subheader(t("Training"))
    training = _training_controls(source)
    st.subheader(t("Checkpointing and GPU"))
    checkpointing = _checkpoint_controls(arch)
    gpu, headroom = gpu_and_headroom()
    return P.PlannerInputs(arch, gpu_bytes=gpu, headroom=headroom, source=source,
                           **training, **checkpointing)


# ---------------------------------------------------------------- outputs


def _wrapped(label: str, width: int = 22) -> str:
    """A bar's label over lines of about `width` characters: one long line ("2. Auf mehr
    GPUs verteilen (Sharding) (4 GPUs)") left a phone's plot a few pixels wide."""
    return "<br>".join(textwrap.wrap(label, width, break_long_words=False))


def memory_figure(plan: recommend_module.Plan) -> go.Figure:
    """Stacked horizontal bars of the memory per GPU: your setting, then each step of the
    recommendation (with the steps before it), with the GPU's memory as a line across."""
    rec = plan.recommendation
    bars = [(t("Yours:<br>{strategy}", strategy=word(plan.inputs.strategy)), plan.breakdown)]
    if rec.inputs != plan.inputs:
        for number, step in enumerate(rec.steps, start=1):
            assert step.inputs is not None
            bd = (P.breakdown(step.inputs) if step.layout is None else
                  PP.layout_breakdown(step.inputs, step.layout)[0])
            bars.append((_wrapped(f"{number}. {advice_title(step)}"), bd))
    fig = go.Figure()
    for component in P.COMPONENTS:
        fig.add_bar(name=word(component), orientation="h", marker_color=COLOURS[component],
                    y=[label for label, _ in bars],
                    x=[bd.parts()[component] / GiB for _, bd in bars],
                    hovertemplate="%{x:,.1f} GiB<extra>" + word(component) + "</extra>")
    gpu = plan.inputs.gpu_bytes
    # both labels above the plot (their bottom on its top edge: a bar that reaches the
    # line would run under a label inside it), on either side of their lines (the GPU's
    # to the right, the margin's to the left), so that neither is over a bar or the other
    fig.add_vline(x=gpu / GiB, line_dash="dash", line_color="#c00000",
                  annotation_text=t("GPU {size}", size=gib(gpu)),
                  annotation_position="top right", annotation_yanchor="bottom")
    if plan.inputs.headroom:
        fig.add_vline(x=plan.inputs.usable_bytes / GiB, line_dash="dot", line_color="#c00000",
                      annotation_text=t("{share} kept free", share=fmt_percent(
                          plan.inputs.headroom)), annotation_position="top left",
                      annotation_yanchor="bottom")
    fig.update_layout(barmode="stack", height=180 + 60 * len(bars),
                      title=t("Memory per GPU at the step's peak"),
                      separators=separators(current_language()),
                      xaxis_ticksuffix=" GiB", yaxis_autorange="reversed",
                      legend={"orientation": "h", "y": -0.3, "yanchor": "top",
                              "traceorder": "normal"},
                      margin={"l": 10, "r": 10, "t": 80, "b": 10})
    return fig


def strategy_table(plan: recommend_module.Plan) -> pd.DataFrame:
    code = babel_locale()
    rows = []
    for row in plan.rows:
        rows.append({
            "strategy": row_name(plan, row.strategy, row.saves),
            "peak": gib(row.peak),
            "fits": ("✓ " if row.fits else "✗ ") + verdict(row.spare, row.fits,
                                                             plan.inputs.headroom),
            "extra": "+" + fmt_percent(row.recompute_share),
            "batch": units.number(row.largest_batch, locale=code) if row.largest_batch
            else units.MISSING,
            "seq": units.number(row.longest_seq, locale=code) if row.longest_seq
            else units.MISSING,
        })
    return pd.DataFrame(rows).rename(columns={k: t(v) for k, v in COLUMNS.items()})


def _steps(rec: recommend_module.Recommendation, gpu: int) -> None:
    code = current_language()
    for number, step in enumerate(rec.steps, start=1):
        assert step.inputs is not None
        verdict = (t("fits, {size} to spare", size=gib(gpu - step.peak)) if step.fits else
                   t("still short by {size}", size=gib(step.peak - gpu)) if step.peak > gpu
                   else t("only {size} to spare, less than the {share} kept free",
                          size=gib(gpu - step.peak), share=fmt_percent(step.inputs.headroom)))
        strategy = step.with_strategy or "none"
        then = (t("Then {peak} per GPU without checkpointing: {verdict}.",
                  peak=gib(step.peak), verdict=verdict) if strategy == "none" else
                t("Then {peak} per GPU with checkpointing {strategy}: {verdict}.",
                  peak=gib(step.peak), strategy=word(strategy), verdict=verdict))
        choice = (" " + t("*A choice: this changes your task or your hardware; take it "
                          "only if you can.*") if step.choice else "")
        st.markdown(f"{number}. **{advice_title(step)}**: {t(REASONS[step.reason])} "
                    f"{then}{choice}")
        st.progress(min(1.0, step.peak / gpu),
                    text=f"{gib(step.peak)} / {gib(gpu)}")
        page_link(step.lesson, label=t("Why: {lesson}", lesson=lesson(step.lesson).title_in(code)),
                  icon=":material/school:")


def recommendation(plan: recommend_module.Plan) -> None:
    rec = plan.recommendation
    gpu = plan.inputs.gpu_bytes
    st.subheader(t("Recommendation"))
    yours = t("Your setting ({strategy}): {verdict}.", strategy=word(plan.inputs.strategy),
              verdict=verdict(plan.spare, plan.fits, plan.inputs.headroom))
    gpus = tn("{count} GPU", "{count} GPUs", rec.gpus)
    lead = (t("Recommended: **{plan}** ({gpus}, {peak} per GPU)", plan=plan_title(rec),
              gpus=gpus, peak=gib(rec.peak)) if rec.fits else
            t("Closest: **{plan}**, and it still does not fit: shorten the sequence or use "
              "a bigger GPU.", plan=plan_title(rec)))
    if rec.fits and rec.choices:  # the task as set fits nowhere on these GPUs
        lead = t("Nothing fits on {gpus} as you set the task. What would: **{plan}** "
                 "({more}, {peak} per GPU).",
                 gpus=tn("{count} GPU", "{count} GPUs", plan.inputs.shards),
                 plan=plan_title(rec), more=gpus, peak=gib(rec.peak))
    if rec.layout is not None and (rec.spread or plan.inputs.shards > 1):
        lead += " " + t("Layout: {layout}", layout=describe(rec.layout, rec.per_node))
    headline(f"{yours} {lead}", rec.fits)
    _steps(rec, gpu)
    for alternative in rec.alternatives:
        with st.expander(t("Or instead: {plan} ({gpus}, {peak} per GPU)",
                           plan=plan_title(alternative),
                           gpus=tn("{count} GPU", "{count} GPUs", alternative.gpus),
                           peak=gib(alternative.peak))):
            _steps(alternative, gpu)


def code(plan: recommend_module.Plan) -> None:
    st.subheader(t("Code for the recommended plan"))
    rec = plan.recommendation
    settings = rec.inputs
    if not rec.fits:
        st.info(t("No code: no plan fits. Take one of the changes above (more GPUs, LoRA, "
                  "a shorter sequence) and the code for it appears here."),
                icon=":material/info:")
        return
    if rec.spread:
        st.caption(t("The Hugging Face Trainer shards the training state (FSDP) and "
                     "nothing more: this plan's layout runs in PyTorch's own code."))
        spread_code(rec)
        return
    hf, torch_tab = st.tabs(["Hugging Face", "PyTorch"])
    hf.code(hf_module.hf_code(settings, current_language()), language="python")
    hf.caption(t("Names as in transformers {version}, peft {peft} and accelerate "
                 "{accelerate}; `train_dataset` is your tokenized dataset.",
                 version=hf_module.HF_VERSION, peft=hf_module.PEFT_VERSION,
                 accelerate=hf_module.ACCELERATE_VERSION))
    torch_tab.code(torch_module.torch_code(settings, current_language()), language="python")


def approximations(plan: recommend_module.Plan) -> None:
    st.subheader(t("What this plan approximates"))
    lines = []
    for item in plan.approximations:
        size = gib(item.bytes) if item.bytes is not None else ""
        lines.append("- " + t(APPROXIMATIONS[item.id], size=size, share=item.share or 0))
    lines.append("- " + t(
        "Per layer: {plain} kept for backward without checkpointing, {checkpoint} with it "
        "(the layer's input); exact op by op for PyTorch's GPT and Llama-style layers on the "
        "CPU (measured by the tests), with a GPU's 1-byte dropout masks and fp32 norm "
        "statistics.", plain=gib(plan.layer_bytes), checkpoint=gib(plan.checkpoint_bytes)))
    st.markdown("\n".join(lines))


def render() -> None:
    st.title(t("Plan your own run"))
    st.markdown(t("Pick a model, how you train it and your GPU: the planner adds up the "
                  "memory per GPU, tries every way of checkpointing and recommends the "
                  "cheapest one that fits, with the code to switch it on. Every setting is in "
                  "the link, so you can share a plan."))
    st.caption(t("Language models and image models alike: pick an image model (SDXL, "
                 "SD3.5, Flux, ViT, SigLIP) or paste its config.json, and plan it at a "
                 "resolution instead of a sequence length."))
    with class_worker.waiting(MeasuringNotice()):
        settings = inputs()
        if isinstance(settings, str):
            st.error(settings, icon=":material/error:")
            return
        if isinstance(settings, PictureModel):
            picture_plan(settings)
            return
        try:
            outputs(settings)
        except ClassConfigError as error:  # a fit measured mid-plan failed or hit a limit
            st.error(class_problem(error), icon=":material/error:")


@functools.lru_cache(maxsize=256)
def _plan(settings: P.PlannerInputs, layout: Layout | None, per_node: int
          ) -> recommend_module.Plan:
    """recommend_module.plan, kept per server process for the settings seen last (a
    shared link opened by a class, a learner's slider moved back): the search took 0.2-0.3
    s of CPU on every run of the page. Its inputs and its plan are frozen records."""
    return recommend_module.plan(settings, layout, per_node)


def outputs(settings: P.PlannerInputs) -> None:
    """Everything below the inputs: the layout across GPUs, the peak, the table, the
    class, the recommendation, the code, the GPUs, the approximations."""
    layout, per_node = layout_controls(settings)
    plan = _plan(settings, layout, per_node)
    positions = settings.arch.positions
    if positions and settings.seq > positions:
        st.warning(t("{model} learned positions for {positions:,} tokens only; the plan below "
                     "counts {seq:,} as if it had more.", model=settings.arch.label,
                     positions=positions, seq=settings.seq), icon=":material/warning:")
    st.divider()
    st.metric(t("Peak memory per GPU"), gib(plan.breakdown.total),
              verdict(plan.spare, plan.fits, plan.inputs.headroom),
              delta_color="normal" if plan.fits else "inverse",
              help=t("Weights, gradients and optimizer state (divided by the GPUs sharing "
                     "them), activations, the loss peak and an allowance for workspace."))
    st.caption(t("{params:,.2f}B parameters, {trained:,.3f}B trained · {tokens:,} tokens per "
                 "optimizer step", params=plan.params / 1e9, trained=plan.trainable / 1e9,
                 tokens=plan.tokens_per_step))
    paint_numbers_first()  # a session's first chart loads Plotly: the peak shows first
    st.plotly_chart(memory_figure(plan))
    st.subheader(t("Every checkpointing choice"))
    # The names column pinned and of medium width: the German table is wider than a laptop's
    # page and far wider than a phone's, and scrolled sideways it kept no row's name in view
    # (Streamlit's table has no wrapping cells).
    # The fits column wide enough for its verdict ("✗ short by 23.5 GiB") on a phone, the
    # names column for "Only some layers (the first 29 layers)" at a laptop's width.
    st.dataframe(strategy_table(plan), hide_index=True, column_config={
        t(COLUMNS["strategy"]): st.column_config.TextColumn(pinned=True, width="large"),
        t(COLUMNS["fits"]): st.column_config.TextColumn(width="medium")})
    if settings.source is not None:
        measured_class(settings)
    recommendation(plan)
    across_gpus(plan.recommendation)
    code(plan)
    approximations(plan)
