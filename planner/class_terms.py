"""Where a family's real decoder layer keeps more or less than the course's formula, term
by term.

The course's formula (memory.layer.layer_tensors) is the teaching model: a Llama-kind or
GPT-2-kind layer written op by op. A measured class (planner.class_memory) keeps what its
modules save; both are grouped by the layer's modules (the norms, the attention, the MLP,
and modules the course's layer has not: q/k norms, post-norms, experts) and compared at
the plan's batch and sequence length. Pure: numbers and module names out.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.class_layers import ClassFit, Poly
from memory.footprint import PlannerInputs
from memory.layer import layer_bytes

# The course's tensors (memory.layer's names) by the module of the layer that keeps them.
COURSE_MODULES = {
    "llama": (("input_layernorm", ("input", "ln1.")),
              ("self_attn", ("q.", "k.", "v", "attn.", "qkv", "lora.q", "lora.k", "lora.v",
                             "lora.o")),
              ("post_attention_layernorm", ("x2", "ln2.")),
              ("mlp", ("gate", "silu", "up", "gated", "lora.gate", "lora.up",
                       "lora.down"))),
    "gpt": (("ln_1", ("input", "ln1.")),
            ("attn", ("qkv", "q", "attn.", "drop1", "lora.qkv", "lora.o")),
            ("ln_2", ("x2", "ln2.")),
            ("mlp", ("fc", "gelu", "drop2", "lora.fc", "lora.proj"))),
}
SUBMODULES = ("q_norm", "k_norm", "q_layernorm", "k_layernorm", "experts", "gate",
              "router", "shared_expert")


@dataclass(frozen=True)
class ExtraTerm:
    """One module's bytes in the class against the course's formula for it (0: the
    course's layer has no such module), at the plan's sizes, and the class's formula."""

    module: str
    slot: str  # the layer type
    measured: int
    course: int
    poly: Poly | None  # the class's bytes in b and s (None: it keeps none)

    def formula(self, locale: str = "en") -> str:
        return self.poly.text(locale) if self.poly is not None else "0"

    @property
    def extra(self) -> int:
        return self.measured - self.course


def module_of(name: str) -> str:
    """A measured term's module, as compared: the top module, or a sub-module the
    course's layer has not (q/k norms, experts, the router)."""
    parts = name.split(".")
    if "lora_" in name:
        parts = [p for p in parts if not p.startswith("lora_") and p not in ("default",
                                                                             "base_layer")]
    for depth, part in enumerate(parts[1:], start=1):
        if part in SUBMODULES:
            return ".".join(parts[:depth + 1])
    return parts[0] or "residual"


def course_bytes(p: PlannerInputs, batch: int, seq: int) -> dict[str, int]:
    """The course's formula for the plan's layer, per module."""
    q = p.with_(source=None)
    out: dict[str, int] = {}
    kind = p.arch.kind
    for held in q.tensors(batch, seq):
        for module, prefixes in COURSE_MODULES[kind]:
            if held.name.startswith(prefixes):
                out[module] = out.get(module, 0) + held.bytes
                break
        else:
            out["other"] = out.get("other", 0) + held.bytes
    return out


def extra_terms(p: PlannerInputs, batch: int | None = None, seq: int | None = None
                ) -> tuple[ExtraTerm, ...]:
    """Per layer type, each module whose class keeps more or less than the course's
    formula (`extra` negative: less)."""
    fit = p.fit()
    if fit is None or p.source is None:
        return ()
    b = p.batch if batch is None else batch
    s = p.seq if seq is None else seq
    fit = fit.at(2)  # the formulas in b: the whole fit (a first plan's may be at b = 1 only)
    course = course_bytes(p, b, s)
    out = []
    for slot in dict.fromkeys(p.source.layer_types):
        measured: dict[str, int] = {}
        polys: dict[str, list[Poly]] = {}
        for term in fit.terms:
            if term.slot != slot:
                continue
            module = module_of(term.name)
            measured[module] = measured.get(module, 0) + fit.value(term, b, s)
            polys.setdefault(module, []).append(term.polys[fit.stretch(s)])
        for module in dict.fromkeys([*measured, *course]):
            value, base = measured.get(module, 0), course.get(module, 0)
            if value != base:
                out.append(ExtraTerm(module, slot, value, base,
                                     _sum(polys[module]) if module in polys else None))
    return tuple(out)


def _sum(polys: list[Poly]) -> Poly:
    g = tuple(sum(p.g[i] for p in polys) for i in range(3))
    h = tuple(sum(p.h[i] for p in polys) for i in range(3))
    one = tuple(sum(p.one[i] for p in polys) for i in range(3))
    return Poly(g, h, one)  # type: ignore[arg-type]


def course_layer_bytes(p: PlannerInputs) -> int:
    """The course's formula for one layer at the plan's sizes."""
    return layer_bytes(p.with_(source=None).tensors())


def per_type_bytes(p: PlannerInputs) -> dict[str, int]:
    """A measured class's bytes per layer type at the plan's sizes, and how many layers
    are of each type ({type: bytes}, counts in layer_counts)."""
    fit = p.fit()
    if fit is None or p.source is None:
        return {}
    return {t: fit.slot_bytes(t, p.batch, p.seq) for t in dict.fromkeys(p.source.layer_types)}


def layer_counts(p: PlannerInputs) -> dict[str, int]:
    if p.source is None:
        return {}
    out: dict[str, int] = {}
    for t in p.source.layer_types:
        out[t] = out.get(t, 0) + 1
    return out


def fitted_formula(fit: ClassFit, slot: str, s: int) -> str:
    """A slot's whole formula in b and s at sequence length s's stretch."""
    fit = fit.at(2)  # the formula in b: the whole fit
    return _sum([t.polys[fit.stretch(s)] for t in fit.terms if t.slot == slot]).text()


def logit_extra_causes(p: PlannerInputs) -> tuple[str, ...]:
    """Why a measured class keeps more around its loss than the course's formula
    (memory.footprint.logit_extra_bytes), as ids for the page to word: "softcap" (a final
    logit soft-cap keeps its tanh's output, as Gemma 2's), "qlora-head" (QLoRA under
    autocast keeps the 16-bit cast of the fp32 output head for its input's gradient)."""
    cfg = getattr(p.source, "cfg", None) or {}  # a pasted config.json (a preset has none)
    causes = []
    if cfg.get("final_logit_softcapping") or (cfg.get("text_config") or {}).get(
            "final_logit_softcapping"):
        causes.append("softcap")
    if p.tuning == "qlora" and p.autocast:
        causes.append("qlora-head")
    return tuple(causes)
