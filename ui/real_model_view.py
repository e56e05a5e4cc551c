"""The real-model page's pieces: its controls and the measured-beside-predicted table."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from demos.real_models import (
    Measurement,
    Setup,
    code,
    lab_layers,
    planner_peak_range,
    predicted_layers,
    run_live,
)
from i18n import N_
from i18n.units import column_unit, format_bytes, format_bytes_in
from memory.architectures import PRESETS
from memory.footprint import PlannerInputs
from memory.layer import layer_bytes
from model_classes.quantized import qlora_available
from model_classes.tiny import family, tiny_architecture
from ui import demo_display as display
from ui import query
from ui.i18n import current_language, fmt_decimal, fmt_number, t

STRATEGIES = {"none": N_("off"), "every-layer": N_("every layer"),
              "every-n": N_("every 2nd layer (every_n_layers=2)"),
              "first-k": N_("the first 2 layers")}
TUNINGS = {"full": N_("full fine-tuning"), "lora": N_("LoRA r=16, all linear layers"),
           "lora-attention": N_("LoRA r=16, attention only"),
           "qlora": N_("QLoRA: a 4-bit NF4 base, LoRA r=16 on all linear layers")}
DTYPES = {"fp32": "fp32", "bf16": "bf16",
          "mixed": N_("mixed: bf16 autocast (fp32 weights; LoRA over a bf16 base)")}
ATTENTIONS = {"sdpa": "sdpa", "eager": "eager"}
PADDING = {"off": N_("off"), "on": N_("on")}
CLASSES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}
LAYERS, BATCH, SEQ = 4, 2, 64


def controls() -> Setup:
    top = st.columns(2)
    with top[0]:
        preset = query.choice("model", t("Model family"), list(PRESETS), "llama-3.1-8b",
                              format_func=lambda key: PRESETS[key].label)
    with top[1]:
        strategy = query.choice("ckpt", t("Checkpointing"), list(STRATEGIES), "none",
                                format_func=lambda key: t(STRATEGIES[key]))
    row = st.columns(4)
    with row[0]:
        tunings = [k for k in TUNINGS if k != "qlora" or qlora_available()]
        tuning = query.choice("tuning", t("Training"), tunings, "full",
                              format_func=lambda key: t(TUNINGS[key]))
    with row[1]:
        dtype = query.choice("dtype", t("Precision"), list(DTYPES), "bf16",
                             format_func=lambda key: t(DTYPES[key]))
    with row[2]:
        attention = query.choice("attention", t("Attention kernel"), list(ATTENTIONS), "sdpa",
                                 help=t("transformers' attn_implementation"))
    with row[3]:
        padding = query.choice("padding", t("Padding mask"), list(PADDING), "off",
                               format_func=lambda key: t(PADDING[key]),
                               help=t("Batches with padded sequences pass an attention mask; "
                                      "with SDPA, transformers then repeats keys and values "
                                      "to every query head."))
    return Setup(tiny_architecture(preset, layers=LAYERS), batch=BATCH, seq=SEQ, dtype=dtype,
                 attention=attention, strategy=strategy, n=2, k=2,
                 lora_rank=0 if tuning == "full" else 16,
                 lora_targets="attention" if tuning == "lora-attention" else "all-linear",
                 padding=padding == "on", qlora=tuning == "qlora")


def describe(setup: Setup) -> str:
    a = setup.arch
    return t("A {cls} built from a scaled-down {label} config with random weights (nothing "
             "downloaded): {layers} layers, hidden size {hidden}, {heads} heads ({kv} for "
             "keys and values), MLP width {mlp}, activation {act}, {vocab} tokens in the "
             "vocabulary; one training step on {batch} × {seq} tokens on the server's CPU.",
             cls=CLASSES[family(a)], label=PRESETS[a.key.removesuffix("-tiny")].label,
             layers=a.layers, hidden=a.hidden, heads=a.heads, kv=a.kv_heads,
             mlp=a.mlp_width, act=a.activation, vocab=a.vocab, batch=setup.batch,
             seq=setup.seq)


def table(m: Measurement) -> pd.DataFrame:
    lang = current_language()
    setup = m.setup
    planned = predicted_layers(setup, m.checkpointed)
    lab = lab_layers(setup, m.checkpointed)
    rows = []
    names = [t("Layer {index}", index=i) for i in range(len(m.per_layer))] + [t("All layers")]
    measured, planner, lab = [*m.per_layer, m.layers_total], [*planned, sum(planned)], [
        *lab, sum(lab)]
    # one unit per column (its total's): never KiB in the rows above MiB in the total
    units = [column_unit(column) for column in (measured, planner, lab)]
    for name, got, plan, own, ckpt in zip(
            names, measured, planner, lab,
            [i in m.checkpointed for i in range(len(m.per_layer))] + [None], strict=True):
        rows.append({
            t("Decoder layer"): name,
            t("Checkpointed"): "" if ckpt is None else (t("yes") if ckpt else t("no")),
            t("Measured"): format_bytes_in(got, units[0], locale=lang),
            t("Planner"): format_bytes_in(plan, units[1], locale=lang),
            t("Measured ÷ planner"): fmt_decimal(got / plan, 2),
            t("Lab model"): format_bytes_in(own, units[2], locale=lang),
        })
    return pd.DataFrame(rows)


def at_full_size(setup: Setup) -> str:
    """One plain layer of the preset at its real size, as the planner now predicts it and
    as the lab model's formula (without the libraries' terms) would."""
    preset = setup.arch.key.removesuffix("-tiny")
    arch = PRESETS[preset]
    seq = min(4096, arch.positions or 4096)
    p = PlannerInputs(arch, seq=seq, batch=1, precision=setup.dtype,
                      tuning=("qlora" if setup.qlora else "lora") if setup.lora_rank
                      else "full",
                      lora_targets=setup.lora_targets, attention=setup.attention)
    lab = p.with_(arch=arch.with_(act=""), attention="sdpa", tuning="full")
    lang = current_language()
    return t("At its real size ({label}, one sequence of {seq} tokens, on a GPU) the planner "
             "predicts {bytes} for one plain decoder layer of this setting; the lab model's "
             "formula, without what the libraries add, {lab}.", label=arch.label,
             seq=fmt_number(seq),
             bytes=format_bytes(layer_bytes(p.tensors()), locale=lang),
             lab=format_bytes(layer_bytes(lab.tensors()), locale=lang))


def show(setup: Setup) -> None:
    st.code(code(setup), language="python")
    with st.spinner(t("Running one training step of the real model…")):
        m = run_live(setup)
    lang = current_language()
    planned = sum(predicted_layers(setup, m.checkpointed))
    cols = st.columns(3)
    cols[0].metric(t("Kept by the layers, measured"), format_bytes(m.layers_total, locale=lang))
    cols[1].metric(t("Planner's prediction"), format_bytes(planned, locale=lang))
    cols[2].metric(t("Lab model, same shapes"),
                   format_bytes(sum(lab_layers(setup, m.checkpointed)), locale=lang))
    st.dataframe(table(m), hide_index=True, width="stretch")
    st.caption(describe(setup))
    st.markdown(at_full_size(setup))
    if setup.qlora:
        st.caption(t("QLoRA as the code above loads it: the model saved and loaded back in "
                     "4-bit NF4 through bitsandbytes, then prepare_model_for_kbit_training, "
                     "which makes every weight that is not 4-bit fp32; in bf16 the step runs "
                     "under autocast (the Trainer's bf16=True)."))
    elif not qlora_available():
        st.caption(t("QLoRA is not offered here: its 4-bit layers need bitsandbytes, which is "
                     "not installed on this server."))
    st.caption(t("Measured with torch's saved-tensor hooks: each storage once, parameters "
                 "apart, attributed to the decoder layer running when it was saved; a "
                 "checkpointed layer keeps its input. Outside the layers (embeddings, final "
                 "norm, head, loss) the step kept {outside} more; its peak was {peak} above "
                 "the parameters (gradients included).",
                 outside=format_bytes(m.outside, locale=lang),
                 peak=format_bytes(m.peak or 0, locale=lang)))
    band = planner_peak_range(setup)
    if band is not None and m.peak:
        st.caption(peak_comparison(m.peak, band))
    name = f"real-model-{setup.arch.key}-{setup.strategy}"
    display.snapshot_button(
        [(f"strategy {setup.strategy}", m.memory_events)], m.parameter_bytes, name, setup,
        t("The memory snapshot holds this step. Each storage is named by the op and the "
          "decoder layer that made it in forward; transformers checkpoints a layer's forward "
          "below the hooks that name the layer, so its recomputation shows as backward."))


def peak_comparison(peak: int, band) -> str:
    """The measured step peak beside the planner's: its pieces as if at once, the
    difference and its size, and the planner's band (memory.footprint.step_peak_range)."""
    lang = current_language()
    pieces = t("The planner's step peak adds its pieces as if they came at once "
               "(gradients, activations kept, the layer being rebuilt, the loss): {pieces} "
               "here, {ratio} × the measured peak.",
               pieces=format_bytes(band.pieces, locale=lang),
               ratio=fmt_decimal(band.pieces / peak, 2))
    diff = format_bytes(abs(band.pieces - peak), locale=lang)
    if peak <= band.pieces:
        gap = t("The measured peak is {diff} lower: the pieces come one after the other "
                "(the loss before any gradient, the last gradients after most activations "
                "are freed).", diff=diff)
    else:
        gap = t("The measured peak is {diff} higher: the pieces leave out backward's own "
                "temporaries and what is kept outside the decoder layers, which show when "
                "gradients are few.", diff=diff)
    inside = band.lower <= peak <= band.upper
    verdict = t("The planner's band for the peak runs from {lower} (the largest moment every "
                "step passes through) to {upper} (the pieces and one plain layer more for "
                "backward's temporaries); the measured peak lies {where}. On a GPU the "
                "planner adds a workspace allowance and a share for fragmentation on top.",
                lower=format_bytes(band.lower, locale=lang),
                upper=format_bytes(band.upper, locale=lang),
                where=t("inside it") if inside else t("outside it"))
    return " ".join([pieces, gap, verdict])
