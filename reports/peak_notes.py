"""Where each strategy's peak is and what set it, in words: the op, the phase and layer,
the largest part and whether checkpointing lowers it. Pure functions, no Streamlit."""

from __future__ import annotations

from collections.abc import Sequence

from demos.results import StrategyResult
from i18n import N_, gettext
from i18n.units import format_bytes
from memory.theory import PeakCause, peak_cause, shared_peaks
from reports.report import babel, label

# ---------------------------------------------------------------- where the peak is

PART_NAMES: dict[str, str] = {
    "activations": N_("the activations kept for backward (and rebuilt there)"),
    "logits": N_("the loss's logits-sized tensors"),
    "gradients": N_("the parameters' gradients"),
    "temporaries": N_("backward's temporary tensors"),
}
PART_ADVICE: dict[str, str] = {
    "activations": N_("checkpointing lowers exactly this part."),
    "logits": N_("checkpointing cannot lower it; lower the vocabulary (or batch × sequence) "
                 "to see the layers dominate."),
    "gradients": N_("checkpointing cannot lower them; raise the sequence length or the batch "
                    "to see the activations dominate."),
    "temporaries": N_("checkpointing does not lower them."),
}


def where_text(cause: PeakCause, lang: str = "en") -> str:
    """'in the backward pass of layer 0', 'at the loss', ..."""
    layer = cause.layer
    if cause.where == "forward":
        return gettext(lang, "in the forward pass, layer {layer}", layer=layer)
    if cause.where == "recompute":
        return gettext(lang, "in the recomputation of layer {layer}", layer=layer)
    if cause.where == "backward":
        return gettext(lang, "in the backward pass of layer {layer}", layer=layer)
    if cause.where == "loss":
        return gettext(lang, "at the loss")
    if cause.where == "loss-backward":
        return gettext(lang, "at the start of backward, the loss's gradient")
    return gettext(lang, "at the end of backward (embedding and LM head)")


def op_name(op: str | None) -> str:
    """'gelu_backward.default' -> 'gelu_backward'."""
    return (op or "").removesuffix(".default")


def peak_sentence(result: StrategyResult, lang: str = "en") -> str | None:
    """'**every-layer**: peak 11.3 MiB in the backward pass of layer 0 (`gelu_backward`).
    Largest part: the parameters' gradients, 6.0 MiB (53%): checkpointing cannot lower
    them.' From the run's own breakdown; None when it did not run."""
    cause = peak_cause(result)
    if cause is None:
        return None
    loc = babel(lang)
    text = gettext(lang, "**{strategy}**: peak {size} {where} (`{op}`).",
                   strategy=label(result, lang), size=format_bytes(cause.peak_bytes, locale=loc),
                   where=where_text(cause, lang), op=op_name(cause.op))
    text += " " + gettext(lang, "Largest part: {part}, {size} ({share:.0%}): {advice}",
                          part=gettext(lang, PART_NAMES[cause.part]),
                          size=format_bytes(cause.part_bytes, locale=loc), share=cause.share,
                          advice=gettext(lang, PART_ADVICE[cause.part]))
    return text


def shared_peak_notes(results: Sequence[StrategyResult], lang: str = "en") -> list[str]:
    """For strategies that reach exactly the same peak: what sets it, so the learner does
    not conclude that they do not differ."""
    notes = []
    by_name = {r.strategy: r for r in results}
    for names in shared_peaks(results):
        cause = peak_cause(by_name[names[0]])
        assert cause is not None
        notes.append(gettext(
            lang, "{names} reach the same peak, {size}: it is set by {part}, which these "
                  "strategies do not change, not by what they keep for backward.",
            names=", ".join(label(by_name[n], lang) for n in names),
            size=format_bytes(cause.peak_bytes, locale=babel(lang)),
            part=gettext(lang, PART_NAMES[cause.part])))
    return notes
