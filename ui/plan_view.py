"""The planner page (/plan): inputs bound to the URL, the memory per GPU, every
checkpointing choice, the recommendation with its lessons, and the code to use.

All numbers come from demos.planner (ids and bytes); this module words them. WORDS is the
one table of English words for the planner's ids (a translation layer can replace it).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from demos import planner as P
from demos.architectures import DEFAULT_PRESET, PRESETS, Architecture, custom
from lessons.catalog import lesson
from ui import query
from ui.navigation import page_link

GiB = P.GiB
WORDS: dict[str, str] = {
    # strategies
    "none": "No checkpointing", "selective": "Selective (recompute attention scores)",
    "some-layers": "Only some layers", "two-layer": "Two-layer segments",
    "every-layer": "Every layer", "budget": "Compiler memory budget",
    # components
    "weights": "Weights", "gradients": "Gradients", "optimizer": "Optimizer state",
    "activations_kept": "Activations: kept checkpoints",
    "activations_rebuilt": "Activations: layer being rebuilt",
    "logits": "Logits and loss peak", "workspace": "Workspace and fragmentation (allowance)",
    # remedies
    "chunked-loss": "Chunked loss", "adamw-8bit": "8-bit AdamW", "lora": "LoRA adapters",
    "qlora": "QLoRA (4-bit base)", "more-shards": "Shard over more GPUs",
    "smaller-batch": "Micro-batch 1 with more accumulation", "offload": "Offload to CPU memory",
    # inputs
    "fp32": "fp32", "mixed": "bf16 mixed (fp32 master weights)", "bf16": "pure bf16",
    "adamw": "AdamW", "sgd-momentum": "SGD with momentum", "full": "Full fine-tuning",
    "attention": "attention (q, k, v, o)", "all-linear": "all linear layers",
    "fused": "fused (flash)", "math": "math (stores the scores)", "custom": "Custom",
}
REASONS: dict[str, str] = {
    "fits-without-checkpointing": "Everything fits as it is: checkpointing would only make "
    "each step slower, so leave it off (and check that your recipe does not switch it on).",
    "scores-are-cheap-to-recompute": "The attention scores are large in memory but cheap to "
    "compute: recomputing only them fits for a few percent more arithmetic.",
    "only-as-many-layers-as-needed": "Checkpointing only as many layers as needed to fit "
    "recomputes the fewest layers.",
    "every-layer-fits": "Keeping only each layer's input fits; it costs about one more "
    "forward pass of the layers.",
    "two-layer-keeps-less": "In a model this deep, segments of two layers keep less than "
    "every layer, for the same recomputation.",
    "loss-in-chunks": "Computing the logits and the loss a chunk of tokens at a time keeps "
    "the b·s·V tensors small; layer checkpointing cannot shrink them.",
    "optimizer-state-shrinks": "AdamW's two fp32 states (8 bytes per parameter) shrink to "
    "2 bytes per parameter.",
    "train-adapters-only": "Frozen weights need no gradients and no optimizer state; only "
    "the small adapters train.",
    "four-bit-base": "The frozen base weights are stored in 4 bits instead of 16.",
    "shard-the-state": "FSDP / ZeRO-3 splits weights, gradients and optimizer state over "
    "the GPUs.",
    "same-tokens-per-step-with-accumulation": "A smaller micro-batch with more accumulation "
    "steps keeps the tokens per optimizer step and shrinks activations and logits.",
    "state-in-host-memory": "The optimizer state lives in CPU memory (ZeRO-Offload), at the "
    "cost of transfers each step.",
    "nothing-fits": "Even with all of the above this does not fit: shorten the sequence, "
    "use more GPUs or a bigger one.",
}
APPROXIMATIONS: dict[str, str] = {
    "workspace": "Workspace allowance (CUDA context, cuBLAS and attention workspaces): {size}.",
    "fragmentation": "Fragmentation allowance, {share:.0%} of everything allocated: {size}.",
    "peaks-added": "The layer being rebuilt and the loss peak are added as if they came at "
    "once; they come one after the other, so the peak is overstated by up to {size}.",
    "gpu-kernels": "Layer formulas: measured to the byte on the CPU; on a GPU the norm "
    "statistics, the attention log-sum-exp and 1-byte dropout masks follow the engine's "
    "CUDA rules, not yet measured on a GPU here (statistics and log-sum-exp: {size}).",
    "gpu-usable": "The GPU offers its label's size in GiB ({size}); the CUDA context is "
    "inside the workspace allowance.",
    "logits-fp32": "Around the loss: three fp32 b·s·V tensors (log-softmax, its gradient, the "
    "logits' gradient) plus the 16-bit logits ({size}); the engine measures this in fp32.",
    "lora-activations": "Adapters: activations counted as for full fine-tuning plus the "
    "rank-r intermediate of each adapter ({size}); frozen layers without an adapter need "
    "not keep their input, so this can overstate.",
    "adapter-backward": "With adapters, backward is counted as one forward (no weight "
    "gradients for the frozen base) when the extra compute is given as a share.",
    "qlora-bits": "QLoRA: {share:.3f} bits per frozen linear weight (NF4 plus "
    "double-quantized constants); embeddings and head stay 16-bit.",
    "fsdp-gather": "Sharding: two whole layers gathered in the compute dtype at a time "
    "({size}).",
    "compiler-budget": "Compiler budget {share:.0%}: modelled as keeping that share of each "
    "layer's activations and recomputing the cheapest tensors per byte first; torch.compile's "
    "partitioner decides on the real graph, so measure.",
    "chunk-size": "Chunked loss: {share:.0f} tokens per chunk.",
}
COLOURS = {"weights": "#1f4e79", "gradients": "#2e75b6", "optimizer": "#9dc3e6",
           "activations_kept": "#c55a11", "activations_rebuilt": "#f4b183",
           "logits": "#7030a0", "workspace": "#a6a6a6"}
SEQ_RANGE = (128, 131_072, 128)


def word(key: str) -> str:
    return WORDS.get(key, key)


def gib(size: float) -> str:
    return f"{size / GiB:,.1f} GiB"


# ---------------------------------------------------------------- inputs


def _model_controls() -> Architecture | str:
    """The architecture from the URL-bound controls, or an error message."""
    key = query.choice("model", "Model", [*PRESETS, "custom"], DEFAULT_PRESET,
                       format_func=lambda k: PRESETS[k].label if k in PRESETS else word(k))
    if key != "custom":
        arch = PRESETS[key]
        st.caption(f"{arch.layers} layers · hidden {arch.hidden:,} · {arch.heads} heads "
                   f"({arch.kv_heads} key/value) · MLP {arch.mlp_width:,} {arch.mlp} · "
                   f"{arch.norm} · vocabulary {arch.vocab:,} · {arch.params() / 1e9:.2f}B "
                   f"parameters. Source: {arch.source}")
        return arch
    base = PRESETS[DEFAULT_PRESET]
    rows = [st.columns(3) for _ in range(3)]
    cells = [cell for row in rows for cell in row]
    with cells[0]:
        layers = query.int_slider("layers", "Layers", 1, 128, 1, base.layers)
    with cells[1]:
        hidden = query.int_slider("hidden", "Hidden size", 64, 16_384, 64, base.hidden)
    with cells[2]:
        heads = query.int_slider("heads", "Attention heads", 1, 128, 1, base.heads)
    with cells[3]:
        kv = query.int_slider("kv", "Key/value heads", 1, 128, 1, base.kv_heads,
                              help="Grouped-query attention: fewer key/value heads than "
                                   "query heads. Equal to the heads for plain multi-head.")
    with cells[4]:
        mlp = query.int_slider("mlp", "MLP width", 64, 65_536, 64, base.mlp_width)
    with cells[5]:
        vocab = query.int_slider("vocab", "Vocabulary", 256, 262_144, 256, 128_256)
    with cells[6]:
        mlp_kind = query.choice("act", "MLP kind", ["gelu", "swiglu"], "swiglu",
                                format_func=lambda k: {"gelu": "GELU", "swiglu": "SwiGLU"}[k])
    with cells[7]:
        norm = query.choice("norm", "Norm", ["layernorm", "rmsnorm"], "rmsnorm",
                            format_func=lambda k: {"layernorm": "LayerNorm",
                                                   "rmsnorm": "RMSNorm"}[k])
    with cells[8]:
        tied = query.choice("tied", "Tied embeddings", ["no", "yes"], "no") == "yes"
    try:
        return custom(layers, hidden, heads, kv, mlp, mlp_kind, norm, vocab, tied)
    except ValueError as error:
        return f"This model is not consistent: {error}."


def _training_controls(arch: Architecture) -> dict:
    out: dict = {}
    row = st.columns(3)
    with row[0]:
        out["seq"] = query.int_slider("seq", "Sequence length", *SEQ_RANGE, 4096,
                                      help="Tokens per sample (s).")
    with row[1]:
        out["batch"] = query.int_slider("mb", "Micro-batch", 1, 64, 1, 1,
                                        help="Samples per forward/backward on one GPU (b).")
    with row[2]:
        out["accumulation"] = query.int_slider(
            "accum", "Gradient accumulation", 1, 256, 1, 8,
            help="Micro-batches per optimizer step: more tokens per step, no more memory.")
    row = st.columns(3)
    with row[0]:
        out["precision"] = query.choice("precision", "Precision", P.PRECISION_KEYS, "mixed",
                                        format_func=word)
    with row[1]:
        out["optimizer"] = query.choice("optim", "Optimizer", P.OPTIMIZER_KEYS, "adamw",
                                        format_func=word)
    with row[2]:
        out["tuning"] = query.choice("tuning", "Fine-tuning", P.TUNINGS, "lora",
                                     format_func=word)
    row = st.columns(3)
    if out["tuning"] != "full":
        with row[0]:
            out["lora_rank"] = int(query.choice("rank", "LoRA rank",
                                                ["4", "8", "16", "32", "64", "128"], "16"))
        with row[1]:
            out["lora_targets"] = query.choice("targets", "LoRA on", list(P.LORA_TARGETS),
                                               "all-linear", format_func=word)
        row = st.columns(3)
    with row[0]:
        out["shards"] = int(query.choice(
            "shards", "GPUs sharing the state", ["1", "2", "4", "8", "16", "32", "64"], "1",
            help="FSDP / ZeRO-3: weights, gradients and optimizer state divided by N."))
    with row[1]:
        out["fused"] = query.choice("attn", "Attention kernel", ["fused", "math"], "fused",
                                    format_func=word) == "fused"
    with row[2]:
        out["chunked_loss"] = query.choice("loss", "Loss", ["full", "chunked"], "full",
                                           format_func=lambda k: {"full": "whole logits",
                                                                  "chunked": "chunked"}[k]
                                           ) == "chunked"
    return out


def _checkpoint_controls(arch: Architecture) -> dict:
    out: dict = {"strategy": query.choice("ckpt", "Checkpointing", P.STRATEGIES, "every-layer",
                                          format_func=word)}
    if out["strategy"] == "some-layers":
        out["some_layers"] = query.int_slider(
            "k", "Layers checkpointed", 1, arch.layers, 1, max(1, arch.layers // 2),
            help="The first k layers keep only their input; the others keep everything.")
    if out["strategy"] == "budget":
        out["budget"] = query.float_slider(
            "budget", "Activation memory budget", 0.0, 1.0, 0.05, 0.5,
            help="torch._functorch.config.activation_memory_budget: 0 recomputes as much as "
                 "it can, 1 keeps everything (an approximation here).")
    return out


def _gpu_control() -> int:
    options = [*P.GPUS, "custom"]
    key = query.choice("gpu", "GPU memory", options, "24",
                       format_func=lambda k: f"{k} GB ({P.GPU_EXAMPLES[k]})" if k in P.GPUS
                       else "Other")
    if key == "custom":
        return query.int_slider("gpu_gib", "GPU memory (GiB)", 4, 256, 1, 32) * GiB
    return int(P.GPUS[key] * GiB)


def inputs() -> P.PlannerInputs | str:
    """The planner inputs from the URL-bound controls, or an error message."""
    st.subheader("Model")
    arch = _model_controls()
    if isinstance(arch, str):
        return arch
    st.subheader("Training")
    training = _training_controls(arch)
    st.subheader("Checkpointing and GPU")
    checkpointing = _checkpoint_controls(arch)
    gpu = _gpu_control()
    return P.PlannerInputs(arch, gpu_bytes=gpu, **training, **checkpointing)


# ---------------------------------------------------------------- outputs


def memory_figure(plan: P.Plan) -> go.Figure:
    """Stacked horizontal bars of the memory per GPU, your setting and the recommended
    one, with the GPU's memory as a line across them."""
    rec = plan.recommendation
    bars = [(f"Yours:<br>{word(plan.inputs.strategy)}", plan.breakdown)]
    if rec.inputs != plan.inputs:
        bars.append((f"Recommended:<br>{word(rec.strategy)}", P.breakdown(rec.inputs)))
    fig = go.Figure()
    for component in P.COMPONENTS:
        fig.add_bar(name=word(component), orientation="h", marker_color=COLOURS[component],
                    y=[label for label, _ in bars],
                    x=[bd.parts()[component] / GiB for _, bd in bars],
                    hovertemplate="%{x:,.1f} GiB<extra>" + word(component) + "</extra>")
    gpu = plan.inputs.gpu_bytes / GiB
    fig.add_vline(x=gpu, line_dash="dash", line_color="#c00000",
                  annotation_text=f"GPU {gpu:,.0f} GiB", annotation_position="top")
    fig.update_layout(barmode="stack", height=180 + 60 * len(bars),
                      title="Memory per GPU at the step's peak",
                      xaxis_ticksuffix=" GiB", yaxis_autorange="reversed",
                      legend={"orientation": "h", "y": -0.3, "yanchor": "top",
                              "traceorder": "normal"},
                      margin={"l": 10, "r": 10, "t": 60, "b": 10})
    return fig


def verdict(spare: float) -> str:
    return f"fits, {gib(spare)} to spare" if spare >= 0 else f"short by {gib(-spare)}"


def _row_name(plan: P.Plan, strategy: str, saves: bool) -> str:
    marks = [word(strategy)]
    if not saves and strategy != "none":
        marks.append("(saves nothing here)")
    if strategy == plan.inputs.strategy:
        marks.append("· yours")
    rec = plan.recommendation
    if strategy == rec.strategy and len(rec.steps) == 1:
        marks.append("· recommended")
    return " ".join(marks)


def strategy_table(plan: P.Plan) -> pd.DataFrame:
    rows = []
    for row in plan.rows:
        rows.append({
            "Checkpointing": _row_name(plan, row.strategy, row.saves),
            "Peak per GPU": gib(row.peak),
            "Fits": "✓ " + verdict(row.spare) if row.fits else "✗ " + verdict(row.spare),
            "Extra compute": f"+{row.recompute_share:.0%}",
            "Largest micro-batch": f"{row.largest_batch:,}" if row.largest_batch else "–",
            "Longest sequence": f"{row.longest_seq:,}" if row.longest_seq else "–",
        })
    return pd.DataFrame(rows)


def _advice_title(step: P.Advice) -> str:
    text = word(step.action)
    if step.action == "some-layers" and step.value:
        text += f" (the first {step.value})"
    if step.action == "more-shards" and step.value:
        text += f" ({step.value} GPUs)"
    return text


def recommendation(plan: P.Plan) -> None:
    rec = plan.recommendation
    st.subheader("Recommendation")
    yours = (f"Your setting, {word(plan.inputs.strategy).lower()}: "
             f"{verdict(plan.spare)}. ")
    lead = yours + (f"Recommended: **{word(rec.strategy)}**" if rec.fits else
                    f"Closest: **{word(rec.strategy)}**, and it still does not fit.")
    (st.success if rec.fits else st.warning)(lead, icon=":material/lightbulb:")
    for number, step in enumerate(rec.steps, start=1):
        where = (f" with {word(step.with_strategy).lower()} checkpointed"
                 if step.with_strategy else "")
        st.markdown(f"{number}. **{_advice_title(step)}**: {REASONS[step.reason]} "
                    f"Peak then {gib(step.peak)}{where} "
                    f"({verdict(plan.inputs.gpu_bytes - step.peak)}).")
        page_link(step.lesson, label=f"Why: {lesson(step.lesson).title}",
                  icon=":material/school:")


def code(plan: P.Plan) -> None:
    st.subheader("Code for the recommended setting")
    settings = plan.recommendation.inputs
    hf, torch_tab = st.tabs(["Hugging Face", "PyTorch"])
    hf.code(P.hf_code(settings), language="python")
    hf.caption(f"Names as in transformers {P.HF_VERSION}.")
    torch_tab.code(P.torch_code(settings), language="python")


def approximations(plan: P.Plan) -> None:
    st.subheader("What this plan approximates")
    lines = []
    for item in plan.approximations:
        size = gib(item.bytes) if item.bytes is not None else ""
        lines.append("- " + APPROXIMATIONS[item.id].format(size=size, share=item.share or 0))
    lines.append(f"- Per layer: {gib(plan.layer_bytes)} kept for backward without "
                 f"checkpointing, {gib(plan.checkpoint_bytes)} with it (the layer's input); "
                 "exact op by op for PyTorch's GPT and Llama-style layers on the CPU "
                 "(measured by the tests), with a GPU's 1-byte dropout masks and fp32 norm "
                 "statistics.")
    st.markdown("\n".join(lines))


def render() -> None:
    st.title("Plan your own run")
    st.markdown("Pick a model, how you train it and your GPU: the planner adds up the "
                "memory per GPU, tries every way of checkpointing and recommends the "
                "cheapest one that fits, with the code to switch it on. Every setting is in "
                "the link, so you can share a plan.")
    settings = inputs()
    if isinstance(settings, str):
        st.error(settings, icon=":material/error:")
        return
    plan = P.plan(settings)
    positions = settings.arch.positions
    if positions and settings.seq > positions:
        st.warning(f"{settings.arch.label} learned positions for {positions:,} tokens only; "
                   f"the plan below counts {settings.seq:,} as if it had more.",
                   icon=":material/warning:")
    st.divider()
    st.metric("Peak memory per GPU", gib(plan.breakdown.total), verdict(plan.spare),
              delta_color="normal" if plan.fits else "inverse",
              help="Weights, gradients and optimizer state (divided by the GPUs sharing "
                   "them), activations, the loss peak and an allowance for workspace.")
    st.caption(f"{plan.params / 1e9:,.2f}B parameters, {plan.trainable / 1e9:,.3f}B "
               f"trained · {plan.tokens_per_step:,} tokens per optimizer step")
    st.plotly_chart(memory_figure(plan))
    st.subheader("Every checkpointing choice")
    st.dataframe(strategy_table(plan), hide_index=True)
    recommendation(plan)
    code(plan)
    approximations(plan)
