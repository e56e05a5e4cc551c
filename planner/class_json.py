"""A measured class's fit as JSON and back (exact: every coefficient a fraction's text):
what planner.class_cache keeps on disk and what a measuring process (planner.class_worker)
sends back. Pure: no torch."""

from __future__ import annotations

from fractions import Fraction

from memory.class_layers import ClassFit, Poly, Term


def _fraction(text: str) -> Fraction:
    return Fraction(text)


def fit_to_json(fit: ClassFit) -> dict:
    def poly(p: Poly) -> list[list[str]]:
        return [[str(c) for c in p.g], [str(c) for c in p.h], [str(c) for c in p.one]]

    out = {"breaks": list(fit.breaks), "trainable": fit.trainable,
           "terms": [{"slot": t.slot, "name": t.name, "kind": t.kind, "padded": t.padded,
                      "polys": [poly(p) for p in t.polys]} for t in fit.terms]}
    if fit.one_only:
        out["one_only"] = True
    return out


def fit_from_json(data: dict) -> ClassFit:
    def poly(rows: list[list[str]]) -> Poly:
        g, h, one = (tuple(_fraction(c) for c in row) for row in rows)
        return Poly(g, h, one)  # type: ignore[arg-type]

    terms = tuple(Term(row["slot"], row["name"], row["kind"], tuple(poly(p) for p in row["polys"]),
                       bool(row["padded"])) for row in data["terms"])
    return ClassFit(terms, tuple(data["breaks"]), int(data["trainable"]),
                    one_only=bool(data.get("one_only", False)))
