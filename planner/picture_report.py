"""An image plan as one JSON-ready report (what `python -m planner --json` prints for an
image model, and what a page renders): the model, the settings, each block's kept bytes
plain and checkpointed, what the run holds besides the model, each checkpointing
choice's peak, the recommendation and its code. The class is measured in a process of
its own (planner.class_worker, task "picture"), once per config and variant, and kept
(planner.picture_cache)."""

from __future__ import annotations

import json
import threading
from typing import Any

from i18n import DEFAULT
from model_classes.causal_lm_config import ClassConfigError
from planner import picture_code as code
from planner import picture_parts as parts
from planner import picture_plan as plan
from planner.picture_plan import PictureInputs

# a full-size UNet's steps under fake tensors take seconds each: eight of them and two
# builds on a busy machine
PICTURE_SECONDS = 300.0
_MEASURED: dict[tuple, dict[str, Any]] = {}
_LOCK = threading.Lock()


def measured_for(p: PictureInputs) -> dict[str, Any]:
    """The class's measurement for the plan's variant (planner.picture_measure.measure),
    kept for the process."""
    from planner import class_worker, picture_cache

    key = (json.dumps(p.config, sort_keys=True), p.measure_key())
    with _LOCK:
        found = _MEASURED.get(key)
    if found is None:
        found = picture_cache.load(p.config, p.measure_key())
    if found is None:
        precision, rank, targets, batch = p.measure_key()
        found = class_worker.measure(
            "picture", p.config, precision, rank, targets, batch,
            seconds=max(class_worker.TIME_LIMIT_S, PICTURE_SECONDS))
        picture_cache.store(p.config, p.measure_key(), found)
    with _LOCK:
        _MEASURED[key] = found
    return found


def settings(p: PictureInputs) -> dict[str, Any]:
    return {"resolution": p.resolution, "batch": p.batch, "precision": p.precision,
            "tuning": p.tuning, "lora_rank": p.lora_rank if p.adapters else None,
            "lora_targets": p.lora_targets if p.adapters else None,
            "optimizer": p.optimizer,
            "encoders": p.encoders if "_class_name" in p.config else None,
            "cached_images": p.cached_images, "gpu_bytes": p.gpu_bytes,
            "headroom": p.headroom, "placement": p.placement}


def _row(r: plan.Row, p: PictureInputs, b: plan.Blocks) -> dict[str, Any]:
    return {"strategy": r.strategy, "n": r.n if r.strategy == "every-n" else None,
            "k": r.k if r.strategy == "first-k" else None,
            "blocks_checkpointed": r.checkpointed, "activations_kept_bytes": r.kept,
            "activations_rebuilt_bytes": r.rebuilt, "peak_bytes": r.peak, "fits": r.fits,
            "spare_bytes": r.spare, "breakdown": r.parts,
            "checkpointed_blocks": [b.names[i] for i in r.picked],
            "recompute_flops": r.recompute,
            "recompute_share": r.recompute / b.step_flops if r.recompute is not None
            and b.step_flops else None}


def placement(rows: list[plan.Row], best: plan.Row, b: plan.Blocks) -> dict[str, Any] | None:
    """What the recommended placement recomputes against every block checkpointed and
    against the fewest first blocks that fit, each a share of a step's FLOPs (forward and
    backward, counted); None without FLOP counts."""
    if not b.step_flops or best.recompute is None:
        return None
    every = next(r for r in rows if r.strategy == "every-layer")
    firsts = [r for r in rows if r.strategy in ("none", "first-k") and r.fits]

    def saved(other: plan.Row | None) -> float | None:
        if other is None or other.recompute is None:
            return None
        return (other.recompute - best.recompute) / b.step_flops

    return {"step_flops": b.step_flops, "recompute_flops": best.recompute,
            "recompute_share": best.recompute / b.step_flops,
            "saved_vs_every_layer": saved(every),
            "first_k": firsts[0].checkpointed if firsts else None,
            "saved_vs_first_k": saved(firsts[0] if firsts else None)}


def _code(p: PictureInputs, measured: dict[str, Any], r: plan.Row, repo: str | None,
          config_path: str, language: str) -> dict[str, str]:
    """The code of the plan `p` checkpointed as the row `r`: the trained model, the
    frozen parts, the training script's command."""
    targets = measured["lora_targets"][p.lora_targets] if p.adapters else None
    s = settings(p)
    if "_class_name" not in p.config:
        return {"model": code.vision_code(s, p.config, r.strategy, r.n, r.k, repo,
                                          config_path, targets, measured["class"],
                                          language, r.picked),
                "pipeline": "", "script": code.script_command(s, p.config, r.strategy, repo,
                                                              targets or [], language)}
    return {"model": code.diffusers_code(s, p.config, r.strategy, r.n, r.k, repo,
                                         config_path, targets, language, r.picked),
            "pipeline": code.pipeline_code(p.config, p.precision, p.encoders, repo,
                                           language),
            "script": code.script_command(s, p.config, r.strategy, repo, targets or [],
                                          language)}


NO_CODE = {"model": "", "pipeline": "", "script": ""}


def _alternative(a: plan.Alternative) -> dict[str, Any]:
    b = plan.blocks(a.measured, a.inputs.batch, a.inputs.resolution)
    return {"changes": [{"change": change, "value": value} for change, value in a.changes],
            "changes_the_task": a.changes_the_task, "fits": a.fits,
            "every_layer_peak_bytes": a.every.peak, "settings": settings(a.inputs),
            "plan": {**_row(a.best, a.inputs, b), "key": a.best.key}}


def report(p: PictureInputs, measured: dict[str, Any], repo: str | None = None,
           config_path: str = "config.json", language: str = DEFAULT,
           measure: Any = None) -> dict[str, Any]:
    """Everything a page or the command line shows of an image plan (see the module's
    docstring); bytes, ids and code (its comments in `language`).

    A plan that does not fit lists its alternatives (planner.picture_plan.alternatives;
    `measure`, measured_for by default, measures those that need another variant); the
    first, when it fits, is the one to take (`take`), and the code is its plan's, as
    the language planner's recommendation takes the first choice that fits. When nothing
    fits there is no code."""
    unit = int(measured["unit"])
    plan.check(p, unit, measured["kind"])
    blocks = plan.blocks(measured, p.batch, p.resolution)
    rows = plan.candidates(p, measured, blocks)
    best = plan.recommend(rows, p.placement)
    shown = plan.table(rows, best)
    fam = parts.family(p.config)
    frozen = parts.frozen_bytes(fam, p.precision, p.encoders)
    alternatives: list[plan.Alternative] = []
    if not best.fits:
        def same_or_measured(q: PictureInputs) -> dict[str, Any] | None:
            if q.measure_key() == p.measure_key():
                return measured
            try:
                return (measure or measured_for)(q)
            except ClassConfigError:  # that variant failed or hit a limit: not offered
                return None

        alternatives = plan.alternatives(p, measured["kind"], same_or_measured)
    take = alternatives[0] if alternatives and alternatives[0].fits else None
    if best.fits:
        printed = _code(p, measured, best, repo, config_path, language)
    elif take is not None:
        printed = _code(take.inputs, take.measured, take.best, repo, config_path, language)
    else:
        printed = dict(NO_CODE)
    return {
        "model": {"label": p.label or measured["class"], "class": measured["class"],
                  "kind": measured["kind"], "params": measured["params"],
                  "trainable_params": measured["trainable"],
                  "quantized_params": measured.get("quantized_params", 0)
                  if p.tuning == "qlora" else 0,
                  "blocks": len(blocks.plain), "side_unit": unit,
                  "family": fam.name if fam else None},
        "settings": settings(p),
        "blocks": [{"name": name, "type": kind, "kept_bytes": plain,
                    "checkpointed_bytes": ckpt}
                   for name, kind, plain, ckpt in zip(blocks.names, blocks.types,
                                                      blocks.plain, blocks.checkpointed,
                                                      strict=True)],
        "outside_bytes": {"plain": blocks.outside_plain,
                          "checkpointed": blocks.outside_checkpointed},
        "frozen": [{"id": part.id, "label": part.label, "params": part.params,
                    "bytes": frozen[part.id]} for part in (fam.parts if fam else ())
                   if part.id in frozen],
        "around_model_bytes": plan.around(p),
        "strategies": {r.key: _row(r, p, blocks) for r in shown},
        "recommended_row": best.key,
        "placement": placement(rows, best, blocks),
        "recommendation": {**_row(best, p, blocks), "key": best.key,
                           "alternatives": [_alternative(a) for a in alternatives],
                           "take": None if take is None else _alternative(take)},
        # whose code: the asked plan's when it fits, else the alternative taken, else none
        "code_for": "asked" if best.fits else "take" if take is not None else None,
        "code": printed,
    }


def plan_report(p: PictureInputs, repo: str | None = None, config_path: str = "config.json",
                language: str = DEFAULT) -> dict[str, Any]:
    """The report of a plan, its class measured (or read back) first: what a page calls."""
    return report(p, measured_for(p), repo, config_path, language)
