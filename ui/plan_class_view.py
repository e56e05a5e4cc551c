"""The planner page's account of a model's class (a preset's or a pasted config.json's):
the transformers family measured, the attention kernel planned, each layer type's bytes,
and where the class's layer keeps more or less than the course's formula, module by
module (planner.class_terms)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from i18n import units
from memory import footprint as P
from memory.class_layers import DENSE_MLP
from planner import class_terms
from ui.i18n import babel_locale, t
from ui.plan_words import gib

KERNELS = {"sdpa": "SDPA (fused)", "eager": "eager"}


def measured_class(p: P.PlannerInputs) -> None:
    """The section: family, kernel, layer types, the terms beyond the course's formula."""
    source = p.source
    if source is None:
        return
    st.subheader(t("Where each layer's memory comes from"))
    code = babel_locale()
    if p.fit() is None:
        st.markdown(t("QLoRA on a preset: each layer is priced by the course's formula, "
                      "held to bitsandbytes' real 4-bit layers (their fp32 norms and residual "
                      "stream keep more than 16-bit LoRA); the preset's shipped {family} "
                      "measurements hold no 4-bit variant. A pasted config.json's QLoRA is "
                      "measured on its class.", family=source.family))
        return
    kernels = getattr(source, "kernels", ("sdpa",))
    kernel = KERNELS.get(p.kernel, p.kernel)
    lines = [t("Measured on transformers' **{family}** class, one training step's forward "
               "at this batch and sequence length (fake tensors: shapes without data).",
               family=source.family),
             t("Attention kernel planned: **{kernel}**.", kernel=kernel)]
    if p.tuning == "qlora":
        lines.append(t("QLoRA: measured with bitsandbytes' 4-bit layers in place of the "
                       "linear layers transformers quantizes, and the norms, embeddings and "
                       "head in fp32, as peft's prepare_model_for_kbit_training leaves them "
                       "(the residual stream is then fp32)."))
    if any(kind.endswith(DENSE_MLP) for kind in source.layer_types):
        lines.append(t("Dense and MoE layers mixed: a layer type ending in \"{suffix}\" "
                       "runs a dense MLP, the others the experts; each is priced by its "
                       "kind.", suffix=DENSE_MLP))
    if "sdpa" not in kernels:
        lines.append(t("This class supports eager attention only: the code below loads it "
                       "with attn_implementation=\"eager\"."))
    window = getattr(source, "window", None)
    if window:
        lines.append(t("Sliding window of {window} tokens: from {window} tokens on, "
                       "transformers builds the window's mask and the layers keep it.",
                       window=units.number(window, locale=code)))
    experts = getattr(source, "experts", None)
    if experts:
        lines.append(t("{count} experts, {top_k} per token: the experts keep one row per "
                       "token and chosen expert (b·s·{top_k} rows) however the tokens are "
                       "routed, so the figures hold for balanced routing and for the worst "
                       "case (every token sent to the same experts) alike.",
                       count=experts[0], top_k=experts[1]))
    extra = P.logit_extra_bytes(p)
    if extra:
        causes = {"softcap": t("the output of the final logit soft-cap's tanh, as "
                               "Gemma 2's"),
                  "qlora-head": t("the 16-bit copy of the fp32 output head that autocast "
                                  "makes under QLoRA, kept for the gradient of its input")}
        lines.append(t("Around the loss the class keeps {size} more than the course's "
                       "formula: {causes}.", size=gib(extra), causes="; ".join(
                           causes[c] for c in class_terms.logit_extra_causes(p))))
    st.markdown("\n".join(f"- {line}" for line in lines))
    counts = class_terms.layer_counts(p)
    sizes = class_terms.per_type_bytes(p)
    st.dataframe(pd.DataFrame([{t("Layer type"): kind, t("Layers"): count,
                                t("Kept per layer"): gib(sizes[kind])}
                               for kind, count in counts.items()]), hide_index=True)
    terms = class_terms.extra_terms(p)
    course = class_terms.course_layer_bytes(p)
    st.caption(t("The class keeps {size} per layer (its largest layer type), the course's "
                 "formula {course}. Where they differ, module by module (b: micro-batch, s: "
                 "sequence length; the class's bytes):", size=gib(max(sizes.values())),
                 course=gib(course)))
    if terms:
        def size(n: int) -> str:  # a unit per size: a norm's extra 14 KiB is not "0.0 GiB"
            return units.format_bytes(n, locale=code)

        st.dataframe(pd.DataFrame([{
            t("Module"): term.module, t("Layer type"): term.slot,
            t("Class"): size(term.measured), t("Course"): size(term.course),
            t("Difference"): ("+" if term.extra > 0 else "−") + size(abs(term.extra)),
            t("Formula"): term.formula(code)}
            for term in terms]), hide_index=True)
    else:
        st.caption(t("Nothing: this class keeps what the course's formula counts."))
