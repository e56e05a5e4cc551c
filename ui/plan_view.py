"""The planner page (/plan): inputs bound to the URL, the memory per GPU, every
checkpointing choice, the recommendation with its lessons, and the code to use.

All numbers come from the memory model and planner/ (ids and bytes); this module words them in the
session's language: the word tables below are catalog messages (N_), translated where
they are shown; names (fp32, AdamW, LoRA, GELU ...) stay as they are.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from demos.reports.figure_style import separators
from i18n import N_, units
from lessons.catalog import lesson
from memory import footprint as P
from memory import hardware, hf_config
from memory.architectures import DEFAULT_PRESET, PRESETS, Architecture, ShapeError, custom
from memory.hardware import GPUS
from planner import hf_code as hf_module
from planner import recommend as recommend_module
from planner import torch_code as torch_module
from ui import query
from ui.i18n import babel_locale, current_language, fmt_percent, pt, t, tn
from ui.navigation import page_link

GiB = hardware.GiB
NAMES: dict[str, str] = {  # ids whose words are names, the same in every language
    "fp32": "fp32", "adamw": "AdamW", "gelu": "GELU",
    "swiglu": "SwiGLU", "layernorm": "LayerNorm", "rmsnorm": "RMSNorm",
}
WORDS: dict[str, str] = {
    # strategies
    "none": N_("No checkpointing"), "selective": N_("Selective (recompute attention scores)"),
    "some-layers": N_("Only some layers"), "two-layer": N_("Two-layer segments"),
    "every-layer": N_("Every layer"), "budget": N_("Compiler memory budget"),
    # components
    "weights": N_("Weights"), "gradients": N_("Gradients"), "optimizer": N_("Optimizer state"),
    "activations_kept": N_("Activations: kept checkpoints"),
    "activations_rebuilt": N_("Activations: layer being rebuilt"),
    "logits": N_("Logits and loss peak"),
    "workspace": N_("Workspace and fragmentation (allowance)"),
    # remedies
    "chunked-loss": N_("Chunked loss"), "lora": N_("LoRA adapters"),
    "qlora": N_("QLoRA (4-bit base)"), "more-gpus": N_("Shard over more GPUs"),
    "adamw-8bit": N_("8-bit AdamW"),
    "fused-attention": N_("Fused attention (SDPA)"),
    "smaller-batch": N_("Micro-batch 1 with more accumulation"),
    "offload": N_("Offload to CPU memory"),
    # inputs
    "mixed": N_("bf16 mixed (fp32 master weights)"), "bf16": N_("pure bf16"),
    "sgd-momentum": N_("SGD with momentum"), "full": N_("Full fine-tuning"),
    "attention": N_("attention (q, k, v, o)"), "all-linear": N_("all linear layers"),
    "fused": N_("SDPA (fused: recomputes the scores)"),
    "math": N_("eager (stores the scores)"),
    "custom": N_("Custom"), "config": N_("Paste a config.json"),
    "whole": N_("whole logits"), "chunked": N_("chunked"),
    "no": N_("no"), "yes": N_("yes"), "other-gpu": N_("Other (GiB)"),
}
REASONS: dict[str, str] = {
    "fits-without-checkpointing": N_(
        "Everything fits as it is: checkpointing would only make each step slower, so leave "
        "it off (and check that your recipe does not switch it on)."),
    "scores-are-cheap-to-recompute": N_(
        "The attention scores are large in memory but cheap to compute: the fused attention "
        "kernel (SDPA) keeps none of them and recomputes them in its backward. Switching "
        "to it fits, for a few percent more arithmetic."),
    "fused-kernel-keeps-no-scores": N_(
        "The layer being rebuilt still holds its attention scores with eager attention; the "
        "fused kernel (SDPA) keeps none of them and recomputes them in its backward."),
    "only-as-many-layers-as-needed": N_(
        "Checkpointing only as many layers as needed to fit recomputes the fewest layers."),
    "every-layer-keeps-least": N_(
        "Checkpoint every layer first: it keeps the least of the choices Hugging Face's "
        "switch offers, for about one more forward pass of the layers."),
    "every-layer-fits": N_(
        "Keeping only each layer's input fits; it costs about one more forward pass of the "
        "layers."),
    "two-layer-keeps-less": N_(
        "In a model this deep, segments of two layers keep less than every layer, for the "
        "same recomputation."),
    "loss-in-chunks": N_(
        "Computing the logits and the loss a chunk of tokens at a time keeps the b·s·V "
        "tensors small; layer checkpointing cannot shrink them."),
    "optimizer-state-shrinks": N_(
        "AdamW's two fp32 states (8 bytes per parameter) shrink to 2 bytes per parameter."),
    "train-adapters-only": N_(
        "Frozen weights need no gradients and no optimizer state; only the small adapters "
        "train."),
    "four-bit-base": N_("The frozen base weights are stored in 4 bits instead of 16."),
    "shard-the-state": N_(
        "FSDP / ZeRO-3 splits weights, gradients and optimizer state over the GPUs; fewer "
        "accumulation steps keep the tokens per optimizer step."),
    "same-tokens-per-step-with-accumulation": N_(
        "A smaller micro-batch with more accumulation steps keeps the tokens per optimizer "
        "step and shrinks activations and logits."),
    "state-in-host-memory": N_(
        "FSDP's CPU offload keeps the parameter shards, their gradients and the optimizer "
        "state in CPU memory and runs the optimizer step there: more than ZeRO-Offload, "
        "which leaves the parameters on the GPU. Every step pays the transfers."),
    "nothing-fits": N_(
        "Even with all of the above this does not fit: shorten the sequence, use more GPUs "
        "or a bigger one."),
}
APPROXIMATIONS: dict[str, str] = {
    "workspace": N_(
        "Workspace allowance (CUDA context, cuBLAS and attention workspaces): {size}."),
    "fragmentation": N_(
        "Fragmentation allowance, {share:.0%} of everything allocated: {size}."),
    "peaks-added": N_(
        "The layer being rebuilt and the loss peak are added as if they came at once; they "
        "come one after the other, so the peak is overstated by up to {size}."),
    "gpu-kernels": N_(
        "Layer formulas: measured to the byte on the CPU; on a GPU the norm statistics, the "
        "attention log-sum-exp and 1-byte dropout masks follow the engine's CUDA rules, not "
        "yet measured on a GPU here (statistics and log-sum-exp: {size})."),
    "gpu-usable": N_(
        "GPU memory: the total that nvidia-smi reports ({size} here), less than the data "
        "sheet's GB; the CUDA context is inside the workspace allowance."),
    "logits-fp32": N_(
        "Around the loss: three fp32 b·s·V tensors (log-softmax, its gradient, the logits' "
        "gradient) plus the 16-bit logits ({size}); the engine measures this in fp32."),
    "lora-activations": N_(
        "Adapters as PEFT runs them: frozen layers keep only what the input gradients need; "
        "each adapter keeps its input (an fp32 copy when the model runs in 16-bit) and its "
        "rank-r intermediate ({size}), measured on tiny models in fp32 and bf16. Under mixed "
        "precision (autocast) these are counted in 16-bit, not measured."),
    "adapter-backward": N_(
        "With adapters, backward is counted as one forward (no weight gradients for the "
        "frozen base) when the extra compute is given as a share."),
    "qlora-bits": N_(
        "QLoRA: {share:.3f} bits per frozen linear weight (NF4 plus double-quantized "
        "constants); embeddings and head stay 16-bit."),
    "fsdp-gather": N_(
        "Sharding: two whole layers gathered in the compute dtype at a time ({size})."),
    "compiler-budget": N_(
        "Compiler budget {share:.0%}, an approximation: torch.compile's partitioner saves "
        "only a graph's inputs at 0 and its default choice at 1, and interpolates between "
        "those two sizes. Modelled here with each layer compiled as its own graph: its input, "
        "plus that share of the way to what the plain layer keeps (the default keeps at most "
        "that), dropping the tensors cheapest to recompute per byte first. The partitioner "
        "decides on the real graph, so measure."),
    "chunk-size": N_("Chunked loss: {share:,.0f} tokens per chunk."),
}
PROBLEMS: dict[str, str] = {  # memory.architectures.ShapeError's problems
    "at-least-one": N_("every size must be at least 1"),
    "hidden-heads": N_("the hidden size ({hidden:,}) must be a multiple of the attention "
                       "heads ({heads})"),
    "heads-kv": N_("the attention heads ({heads}) must be a multiple of the key/value heads "
                   "({kv_heads})"),
    "kind": N_("unknown MLP kind or norm"),
}
CONFIG_PROBLEMS: dict[str, str] = {  # memory.hf_config.ConfigJsonError's problems
    "not-json": N_("This is not a JSON object; paste the whole config.json."),
    "family": N_("The model type {value} is not one the planner knows (GPT-2, Llama, Mistral, "
                 "Qwen2, Gemma)."),
    "missing": N_("The config.json has no field {field}."),
    "bad-value": N_("The field {field} must be a positive whole number."),
    "shape": N_("The sizes in this config.json are not consistent."),
}
COLOURS = {"weights": "#1f4e79", "gradients": "#2e75b6", "optimizer": "#9dc3e6",
           "activations_kept": "#c55a11", "activations_rebuilt": "#f4b183",
           "logits": "#7030a0", "workspace": "#a6a6a6"}
SEQ_RANGE = (128, 131_072, 128)
DEFAULT_GPU = "a10"


def word(key: str) -> str:
    """An id's words in the session's language (names as they are)."""
    return NAMES[key] if key in NAMES else t(WORDS[key]) if key in WORDS else key


def gib(size: float) -> str:
    return f"{units.number(size / GiB, 1, locale=babel_locale())} GiB"


# ---------------------------------------------------------------- inputs


def _preset_caption(arch: Architecture) -> str:
    if not arch.source:
        return t("{layers} layers · hidden {hidden:,} · {heads} heads ({kv} key/value) · MLP "
                 "{mlp:,} {kind} · {norm} · vocabulary {vocab:,} · {params:,.2f}B parameters",
                 layers=arch.layers, hidden=arch.hidden, heads=arch.heads, kv=arch.kv_heads,
                 mlp=arch.mlp_width, kind=word(arch.mlp), norm=word(arch.norm),
                 vocab=arch.vocab, params=arch.params() / 1e9)
    return t("{layers} layers · hidden {hidden:,} · {heads} heads ({kv} key/value) · MLP "
             "{mlp:,} {kind} · {norm} · vocabulary {vocab:,} · {params:,.2f}B parameters · "
             "[source]({url})", layers=arch.layers, hidden=arch.hidden, heads=arch.heads,
             kv=arch.kv_heads, mlp=arch.mlp_width, kind=word(arch.mlp), norm=word(arch.norm),
             vocab=arch.vocab, params=arch.params() / 1e9, url=arch.source.split()[0])


def _config_json() -> Architecture | str:
    """The architecture of a pasted config.json (kept in the session, not in the link)."""
    text = st.text_area(t("config.json"), key="plan_config_json", height=200,
                        placeholder='{"model_type": "llama", "hidden_size": 4096, ...}',
                        help=t("The config.json of a Hugging Face model (GPT-2, Llama, "
                               "Mistral, Qwen2 or Gemma family), as on its Hub page."))
    st.caption(t("A pasted config.json stays in this session; the link carries the other "
                 "settings."))
    if not text.strip():
        return t("Paste a config.json to plan for your own model.")
    try:
        arch = hf_config.architecture(text)
    except hf_config.ConfigJsonError as error:
        return t(CONFIG_PROBLEMS[error.problem], field=error.field, value=error.value)
    st.caption(_preset_caption(arch))
    return arch


def _model_controls() -> Architecture | str:
    """The architecture from the URL-bound controls, or an error message."""
    key = query.choice("model", t("Model"), [*PRESETS, "custom", "config"], DEFAULT_PRESET,
                       format_func=lambda k: PRESETS[k].label if k in PRESETS else word(k))
    if key == "config":
        return _config_json()
    if key != "custom":
        arch = PRESETS[key]
        st.caption(_preset_caption(arch))
        return arch
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
        return custom(layers, hidden, heads, kv, mlp, mlp_kind, norm, vocab, tied)
    except ShapeError as error:
        return t("This model is not consistent: {problem}.",
                 problem=t(PROBLEMS[error.problem], **error.params))


def _training_controls() -> dict:
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
        out["precision"] = query.choice("precision", t("Precision"), P.PRECISION_KEYS, "mixed",
                                        format_func=word)
    with row[1]:
        out["optimizer"] = query.choice("optim", t("Optimizer"), P.OPTIMIZER_KEYS, "adamw",
                                        format_func=word)
    with row[2]:
        out["tuning"] = query.choice("tuning", t("Fine-tuning"), P.TUNINGS, "lora",
                                     format_func=word)
    row = st.columns(3)
    if out["tuning"] != "full":
        with row[0]:
            out["lora_rank"] = int(query.choice("rank", t("LoRA rank"),
                                                ["4", "8", "16", "32", "64", "128"], "16"))
        with row[1]:
            out["lora_targets"] = query.choice("targets", t("LoRA on"), list(P.LORA_TARGETS),
                                               "all-linear", format_func=word)
        row = st.columns(3)
    with row[0]:
        out["shards"] = int(query.choice(
            "shards", t("GPUs you have"), ["1", "2", "4", "8", "16", "32", "64"], "1",
            help=t("More than one: FSDP / ZeRO-3 divides weights, gradients and optimizer "
                   "state over them.")))
    with row[1]:
        out["fused"] = query.choice("attn", t("Attention kernel"), ["fused", "math"], "fused",
                                    format_func=word) == "fused"
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


def _gpu_control() -> int:
    options = [*hardware.GPUS, "custom"]
    key = query.choice("gpu", t("GPU"), options, DEFAULT_GPU,
                       format_func=lambda k: (f"{GPUS[k].name} · {gib(GPUS[k].bytes)}"
                                              if k in GPUS else word("other-gpu")),
                       help=t("The total memory nvidia-smi reports for each card."))
    if key == "custom":
        return query.int_slider("gpu_gib", t("GPU memory (GiB)"), 4, 256, 1, 32) * GiB
    return hardware.GPUS[key].bytes


def inputs() -> P.PlannerInputs | str:
    """The planner inputs from the URL-bound controls, or an error message."""
    st.subheader(t("Model"))
    arch = _model_controls()
    if isinstance(arch, str):
        return arch
    st.subheader(t("Training"))
    training = _training_controls()
    st.subheader(t("Checkpointing and GPU"))
    checkpointing = _checkpoint_controls(arch)
    gpu = _gpu_control()
    return P.PlannerInputs(arch, gpu_bytes=gpu, **training, **checkpointing)


# ---------------------------------------------------------------- outputs


def memory_figure(plan: recommend_module.Plan) -> go.Figure:
    """Stacked horizontal bars of the memory per GPU: your setting, then each step of the
    recommendation (with the steps before it), with the GPU's memory as a line across."""
    rec = plan.recommendation
    bars = [(t("Yours:<br>{strategy}", strategy=word(plan.inputs.strategy)), plan.breakdown)]
    if rec.inputs != plan.inputs:
        for number, step in enumerate(rec.steps, start=1):
            assert step.inputs is not None
            bars.append((f"{number}. {_advice_title(step)}", P.breakdown(step.inputs)))
    fig = go.Figure()
    for component in P.COMPONENTS:
        fig.add_bar(name=word(component), orientation="h", marker_color=COLOURS[component],
                    y=[label for label, _ in bars],
                    x=[bd.parts()[component] / GiB for _, bd in bars],
                    hovertemplate="%{x:,.1f} GiB<extra>" + word(component) + "</extra>")
    gpu = plan.inputs.gpu_bytes
    fig.add_vline(x=gpu / GiB, line_dash="dash", line_color="#c00000",
                  annotation_text=t("GPU {size}", size=gib(gpu)), annotation_position="top")
    fig.update_layout(barmode="stack", height=180 + 60 * len(bars),
                      title=t("Memory per GPU at the step's peak"),
                      separators=separators(current_language()),
                      xaxis_ticksuffix=" GiB", yaxis_autorange="reversed",
                      legend={"orientation": "h", "y": -0.3, "yanchor": "top",
                              "traceorder": "normal"},
                      margin={"l": 10, "r": 10, "t": 60, "b": 10})
    return fig


def verdict(spare: float) -> str:
    if spare >= 0:
        return t("fits, {size} to spare", size=gib(spare))
    return t("short by {size}", size=gib(-spare))


def _row_name(plan: recommend_module.Plan, strategy: str, saves: bool) -> str:
    marks = [word(strategy)]
    if not saves and strategy != "none":
        marks.append(t("(saves nothing here)"))
    if strategy == plan.inputs.strategy:
        marks.append(t("· yours"))
    rec = plan.recommendation
    if strategy == rec.strategy and rec.inputs == plan.inputs.with_(
            strategy=strategy, some_layers=rec.inputs.some_layers):
        marks.append(t("· recommended"))
    return " ".join(marks)


COLUMNS = {  # the strategy table's columns: id -> header
    "strategy": N_("Checkpointing"), "peak": N_("Peak per GPU"), "fits": N_("Fits"),
    "extra": N_("Extra compute"), "batch": N_("Largest micro-batch"),
    "seq": N_("Longest sequence"),
}


def strategy_table(plan: recommend_module.Plan) -> pd.DataFrame:
    code = babel_locale()
    rows = []
    for row in plan.rows:
        rows.append({
            "strategy": _row_name(plan, row.strategy, row.saves),
            "peak": gib(row.peak),
            "fits": ("✓ " if row.fits else "✗ ") + verdict(row.spare),
            "extra": "+" + fmt_percent(row.recompute_share),
            "batch": units.number(row.largest_batch, locale=code) if row.largest_batch
            else units.MISSING,
            "seq": units.number(row.longest_seq, locale=code) if row.longest_seq
            else units.MISSING,
        })
    return pd.DataFrame(rows).rename(columns={k: t(v) for k, v in COLUMNS.items()})


def _advice_title(step: recommend_module.Advice) -> str:
    name = word(step.action)
    if step.action == "some-layers" and step.value:
        return tn("{name} (the first layer)", "{name} (the first {count} layers)",
                  int(step.value), name=name)
    if step.action == "more-gpus" and step.value:
        return tn("{name} ({count} GPU)", "{name} ({count} GPUs)", int(step.value), name=name)
    return name


def plan_title(rec: recommend_module.Recommendation) -> str:
    """The whole plan in one line: every step's name (the GPU count follows it)."""
    return " + ".join(word(step.action) if step.action == "more-gpus" else
                      _advice_title(step) for step in rec.steps)


def _steps(rec: recommend_module.Recommendation, gpu: int) -> None:
    code = current_language()
    for number, step in enumerate(rec.steps, start=1):
        assert step.inputs is not None
        then = t("Then {peak} per GPU with checkpointing {strategy}: {verdict}.",
                 peak=gib(step.peak), strategy=word(step.with_strategy or "none"),
                 verdict=(t("fits") if step.fits else
                          t("still short by {size}", size=gib(step.peak - gpu))))
        choice = (" " + t("*A choice: this changes your task or your hardware; take it "
                          "only if you can.*") if step.choice else "")
        st.markdown(f"{number}. **{_advice_title(step)}**: {t(REASONS[step.reason])} "
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
              verdict=verdict(plan.spare))
    gpus = tn("{count} GPU", "{count} GPUs", rec.gpus)
    lead = (t("Recommended: **{plan}** ({gpus}, {peak} per GPU)", plan=plan_title(rec),
              gpus=gpus, peak=gib(rec.peak)) if rec.fits else
            t("Closest: **{plan}**, and it still does not fit: shorten the sequence or use "
              "a bigger GPU.", plan=plan_title(rec)))
    (st.success if rec.fits else st.warning)(f"{yours} {lead}", icon=":material/lightbulb:")
    _steps(rec, gpu)
    for alternative in rec.alternatives:
        with st.expander(t("Or instead: {plan} ({gpus}, {peak} per GPU)",
                           plan=plan_title(alternative),
                           gpus=tn("{count} GPU", "{count} GPUs", alternative.gpus),
                           peak=gib(alternative.peak))):
            _steps(alternative, gpu)


def code(plan: recommend_module.Plan) -> None:
    st.subheader(t("Code for the recommended plan"))
    settings = plan.recommendation.inputs
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
    settings = inputs()
    if isinstance(settings, str):
        st.error(settings, icon=":material/error:")
        return
    plan = recommend_module.plan(settings)
    positions = settings.arch.positions
    if positions and settings.seq > positions:
        st.warning(t("{model} learned positions for {positions:,} tokens only; the plan below "
                     "counts {seq:,} as if it had more.", model=settings.arch.label,
                     positions=positions, seq=settings.seq), icon=":material/warning:")
    st.divider()
    st.metric(t("Peak memory per GPU"), gib(plan.breakdown.total), verdict(plan.spare),
              delta_color="normal" if plan.fits else "inverse",
              help=t("Weights, gradients and optimizer state (divided by the GPUs sharing "
                     "them), activations, the loss peak and an allowance for workspace."))
    st.caption(t("{params:,.2f}B parameters, {trained:,.3f}B trained · {tokens:,} tokens per "
                 "optimizer step", params=plan.params / 1e9, trained=plan.trainable / 1e9,
                 tokens=plan.tokens_per_step))
    st.plotly_chart(memory_figure(plan))
    st.subheader(t("Every checkpointing choice"))
    st.dataframe(strategy_table(plan), hide_index=True)
    recommendation(plan)
    code(plan)
    approximations(plan)
