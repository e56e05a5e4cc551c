"""`python -m planner`: the planner for a preset or a pasted config.json, from a terminal
or a script (--json for one JSON object). A bad option, layout or config.json ends with one
line on stderr and exit code 2, never a traceback: a config.json is read up to
memory.hf_config.MAX_TEXT_CHARS bytes and refused before anything is built when it sizes a
model as no real one is; its class is measured in a process of its own, under a time and a
memory limit (planner.class_worker)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

from command_line import CourseParser
from i18n.languages import CODES
from i18n.units import format_bytes
from memory import footprint as P
from memory import parallel as M
from memory.architectures import DEFAULT_PRESET, PRESETS
from memory.hardware import GPUS, GiB
from memory.hf_config import MAX_TEXT_CHARS, ConfigJsonError, check_image_sizes, parse
from memory.layer import layer_bytes
from model_classes.causal_lm_config import ClassConfigError
from planner.picture_cli import Refused, picture_kind
from planner.picture_plan import ENCODERS
from planner.picture_presets import PICTURE_PRESETS, preset_config

# what --framework may name: each printed code's key in the JSON's "code"
FRAMEWORKS = {"hf": "huggingface", "torch": "pytorch", "deepspeed": "deepspeed",
              "megatron": "megatron", "all": ""}


class PlanError(ValueError):
    """A bad option or config.json: one line for stderr."""


def build_parser() -> CourseParser:
    p = CourseParser(prog="python -m planner",
                     description="Plan a fine-tuning run: memory per GPU, every checkpointing "
                                 "choice, the recommendation and its code.")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--config", help="a Hugging Face config.json of any decoder-only "
                                         "causal LM transformers builds, a diffusers "
                                         "UNet, SD3 or Flux transformer, or a ViT, "
                                         "SigLIP, DINOv2 or CLIP vision encoder: its "
                                         "layers are measured on the real class")
    source.add_argument("--model", choices=[*PRESETS, *PICTURE_PRESETS], default=None,
                        help=f"a preset (default {DEFAULT_PRESET})")
    p.add_argument("--seq", type=int, default=None,
                   help="tokens per sample of a language model (default: 4096)")
    images = p.add_argument_group("image models")
    images.add_argument("--resolution", type=int, default=None,
                        help="an image model's square side in pixels (default: 1024; a "
                             "vision encoder's: 224)")
    images.add_argument("--encoders", choices=list(ENCODERS), default=None,
                        help="a diffusion model's VAE and text encoders on the GPU "
                             "(resident, the default), or their outputs cached once")
    images.add_argument("--cached-images", dest="cached_images", type=int, default=None,
                        help="images whose latents --encoders cached keeps on the GPU "
                             "(default: the batch's)")
    p.add_argument("--batch", type=int, default=1, help="micro-batch per GPU")
    p.add_argument("--accumulation", type=int, default=8, help="micro-batches per step")
    p.add_argument("--precision", choices=list(P.PRECISION_KEYS), default="mixed")
    p.add_argument("--attention", choices=["sdpa", "eager"], default="sdpa",
                   help="the attention kernel (attn_implementation)")
    p.add_argument("--tuning", choices=list(P.TUNINGS), default="full")
    p.add_argument("--lora-rank", dest="lora_rank", type=int, default=16)
    p.add_argument("--lora-targets", dest="lora_targets", choices=list(P.LORA_TARGETS),
                   default=None, help="the layers LoRA adapts (default: all-linear; an "
                                      "image model's: attention, as diffusers' scripts)")
    p.add_argument("--optimizer", choices=list(P.OPTIMIZER_KEYS), default="adamw")
    p.add_argument("--chunked-loss", dest="chunked_loss", action="store_true")
    p.add_argument("--strategy", choices=list(P.STRATEGIES), default="every-layer",
                   help="your current checkpointing (the table covers every choice)")
    p.add_argument("--placement", choices=["optimal", "sqrt", "every", "first-k"],
                   default=None,
                   help="an image model's recommended checkpoints: optimal (the blocks that "
                        "recompute the fewest FLOPs within the GPU's budget, the default), "
                        "every (every block), first-k (the fewest first blocks that fit); "
                        "sqrt (segments of about √N blocks) is a chain's placement, which "
                        "block-by-block checkpointing cannot apply; --json lists the "
                        "blocks chosen")
    p.add_argument("--some-layers", dest="some_layers", type=int, default=None,
                   help="layers checkpointed by --strategy some-layers")
    gpu = p.add_mutually_exclusive_group()
    gpu.add_argument("--gpu-gb", dest="gpu_gb", type=float, default=None,
                     help="memory per GPU in GiB (default 80 GB: an H100's 79.6 GiB)")
    gpu.add_argument("--gpu", choices=list(GPUS), default=None, help="a GPU preset")
    p.add_argument("--gpus", type=int, default=1, help="GPUs you have (FSDP when > 1)")
    p.add_argument("--headroom", type=float, default=P.DEFAULT_HEADROOM * 100,
                   help="percent of the GPU's memory a plan keeps free (default "
                        "%(default)g); the table and the recommendation apply it alike")
    par = p.add_argument_group("many GPUs (a layout; without one, --gpus > 1 recommends one)")
    par.add_argument("--tp", type=int, default=None, help="tensor parallel size")
    par.add_argument("--sp", action="store_true", help="sequence parallelism (with --tp)")
    par.add_argument("--cp", type=int, default=None, help="context parallel size")
    par.add_argument("--pp", type=int, default=None, help="pipeline parallel size")
    par.add_argument("--schedule", choices=list(M.SCHEDULES), default=None,
                     help="pipeline schedule (default 1f1b)")
    par.add_argument("--microbatches", type=int, default=None,
                     help="micro-batches per step through the pipeline (default "
                          "--accumulation)")
    par.add_argument("--chunks", type=int, default=None,
                     help="model chunks per GPU under the interleaved schedule (default 2)")
    par.add_argument("--ep", type=int, default=None, help="expert parallel size (MoE)")
    par.add_argument("--gpus-per-node", dest="gpus_per_node", type=int, default=8,
                     help="GPUs per node (tensor parallelism stays inside one)")
    p.add_argument("--language", choices=list(CODES), default="en",
                   help="the language of the code's comments")
    p.add_argument("--framework", choices=list(FRAMEWORKS), default=None,
                   help="the code printed: hf (Hugging Face), torch, deepspeed (its "
                        "config), megatron (Megatron-LM's flags) or all (default: hf for "
                        "one GPU's plan, torch across GPUs; --json holds them all)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


# What a config.json the checks let through may still make the libraries raise: one line
# and exit 2 too, as for any bad config (the measurement's own errors are PlanErrors)
UNPLANNABLE = (MemoryError, RecursionError, OverflowError, ArithmeticError, ValueError,
               RuntimeError)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return run(args)
    except PlanError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except UNPLANNABLE as exc:
        words = str(exc).strip().splitlines()
        print(f"{parser.prog}: error: cannot plan this: {type(exc).__name__}"
              + (f": {words[0][:300]}" if words else ""), file=sys.stderr)
        return 2


def read_config(path: str) -> str:
    """A config.json's text, read up to MAX_TEXT_CHARS bytes (a longer file, /dev/zero
    included, is refused at once); PlanError when it cannot be read or is no UTF-8."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_TEXT_CHARS + 1)
    except OSError as error:
        raise PlanError(f"cannot read {path}: {error.strerror}") from None
    if len(data) > MAX_TEXT_CHARS:
        raise PlanError(f"{path}: longer than {MAX_TEXT_CHARS:,} bytes: no config.json is")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PlanError(f"{path}: not UTF-8 text") from None


def picture(args) -> int | None:
    """Plan an image model (planner.picture_cli) when the preset or config.json is one;
    None for a language model, whose plan refuses the image flags."""
    from planner import picture_cli

    if args.model in PICTURE_PRESETS:
        repo, label = PICTURE_PRESETS[args.model]
        cfg, path = preset_config(args.model), f"{args.model}.json"
    elif args.config:
        text = read_config(args.config)
        try:
            cfg = json.loads(text)
        except json.JSONDecodeError:
            return None  # worded by the language model's reading
        repo, label, path = None, "", args.config
    else:
        cfg = None
    kind = picture_kind(cfg)
    if kind is None:
        if args.placement is not None:
            raise PlanError("--placement places checkpoints on an image model's blocks, "
                            "which differ; a language model's decoder layers are equal "
                            "(any k of them recompute the same): --strategy some-layers "
                            "--some-layers k")
        for flag in ("resolution", "encoders", "cached_images"):
            if getattr(args, flag) is not None:
                raise PlanError(f"--{flag.replace('_', '-')} is an image model's flag: a "
                                "language model takes --seq (tokens per sample)")
        return None
    if args.config:  # a pasted image config's sizes, before anything is built
        try:
            check_image_sizes(parse(text))
        except ConfigJsonError as error:
            raise PlanError(f"{args.config}: {error}") from None
    try:
        return picture_cli.run(args, cfg, kind, label, repo, path)
    except Refused as error:
        raise PlanError(str(error)) from None


def inputs(args) -> P.PlannerInputs:
    if args.seq is None:
        args.seq = 4096
    if args.lora_targets is None:
        args.lora_targets = "all-linear"
    if args.config:
        text = read_config(args.config)
        from planner.class_cache import from_config_json

        try:
            arch, source = from_config_json(text)
        except (ConfigJsonError, ClassConfigError) as error:
            raise PlanError(f"{args.config}: {error}") from None
    else:  # a preset: its class's terms, measured and shipped (planner.preset_classes)
        from planner.preset_classes import preset_source

        name = args.model or DEFAULT_PRESET
        arch, source = PRESETS[name], preset_source(name)
    for name, low, high in (("seq", 1, P.MAX_SEQ), ("batch", 1, P.MAX_BATCH),
                            ("accumulation", 1, 4096), ("lora_rank", 1, 4096),
                            ("gpus", 1, 4096)):
        value = getattr(args, name)
        if not low <= value <= high:
            raise PlanError(f"--{name.replace('_', '-')}={value} is out of range "
                            f"{low}..{high}")
    if args.gpu_gb is not None and not 0 < args.gpu_gb <= 4096:
        raise PlanError(f"--gpu-gb={args.gpu_gb} is out of range (0, 4096]")
    if not 0 <= args.headroom < 100:
        raise PlanError(f"--headroom={args.headroom:g} is out of range 0..<100 (percent)")
    gpu = (int(args.gpu_gb * GiB) if args.gpu_gb is not None else
           GPUS[args.gpu or "h100"].bytes)
    some = args.some_layers if args.some_layers is not None else max(1, arch.layers // 2)
    return P.PlannerInputs(
        arch, seq=args.seq, batch=args.batch, accumulation=args.accumulation,
        precision=args.precision, optimizer=args.optimizer, tuning=args.tuning,
        lora_rank=args.lora_rank, lora_targets=args.lora_targets, shards=args.gpus,
        fused=args.attention == "sdpa" and (source is None or "sdpa" in source.kernels),
        source=source, chunked_loss=args.chunked_loss,
        strategy=args.strategy, some_layers=max(1, min(arch.layers, some)), gpu_bytes=gpu,
        headroom=args.headroom / 100)


LAYOUT_FLAGS = ("tp", "cp", "pp", "schedule", "microbatches", "chunks", "ep")
# What a measured class keeps around its loss beyond the course's formula, by cause
# (planner.class_terms.logit_extra_causes).
LOGIT_EXTRA_WORDS = {"softcap": "the final logit soft-cap's tanh output",
                     "qlora-head": "under QLoRA with autocast, the 16-bit copy of the fp32 "
                                   "output head"}


def layout(args, p: P.PlannerInputs) -> M.Layout | None:
    """The layout the flags give, its data-parallel size filling --gpus, checked against
    the model and the node (planner.parallel_plan.check_layout); None when no layout flag
    is given. A mixture-of-experts model's experts (p.source.experts) are what --ep
    needs."""
    experts = getattr(p.source, "experts", None)
    given = [name for name in LAYOUT_FLAGS if getattr(args, name) is not None]
    if not given and not args.sp:
        return None
    for name in ("tp", "cp", "pp", "microbatches", "chunks", "ep", "gpus_per_node"):
        value = getattr(args, name)
        if value is not None and not 1 <= value <= 4096:
            raise PlanError(f"--{name.replace('_', '-')}={value} is out of range 1..4096")
    if args.sp and not (args.tp or 1) > 1:
        raise PlanError("--sp splits what tensor parallelism leaves whole: it needs --tp 2 "
                        "or more")
    if (args.ep or 1) > 1 and experts is None:
        raise PlanError("--ep splits the experts of a mixture-of-experts model: give its "
                        "config.json with --config (the presets are dense)")
    if (args.ep or 1) > 1 and experts is not None and experts[0] % args.ep:
        raise PlanError(f"--ep={args.ep} must divide the model's {experts[0]} experts")
    schedule = args.schedule or "1f1b"
    pp = args.pp or 1
    chunks = args.chunks or (2 if schedule == "interleaved" else 1)
    micro = args.microbatches or max(args.accumulation, pp)
    try:
        from planner.parallel_plan import check_layout, with_dp

        filled = with_dp(M.Layout(tp=args.tp or 1, sp=args.sp, cp=args.cp or 1, pp=pp,
                                  schedule=schedule, microbatches=micro, chunks=chunks),
                         args.gpus)
        check_layout(filled, p.arch, args.gpus_per_node)
        return replace(filled, ep=args.ep or 1)  # checked against the dp x cp it filled
    except M.LayoutError as error:
        raise PlanError(str(error)) from None


def parallel_report(rec, per_node: int) -> dict:
    """The plan across GPUs, the same one as the recommendation's: its layout (the
    learner's, or the one searched in the course's order, with the layouts tried on the
    learner's GPUs), every strategy on its most loaded GPU with the plan's settings, and
    when the task as set fits no layout of the learner's GPUs, the choice that fits."""
    from planner import parallel_plan as PP
    from planner.recommend import layout_reason

    search = rec.closest or rec
    chosen = rec.layout
    rows = PP.gpu_rows(rec.inputs, chosen)
    reason, params = layout_reason(rec)
    return {
        "layout": PP.layout_dict(chosen, per_node),
        "chosen_by": "flags" if rec.chosen_by == "learner" else "recommendation",
        "reason": {"id": reason, **params},
        "strategy": rec.strategy, "fits": rec.fits, "peak_bytes": rec.peak,
        "gpus": chosen.gpus, "nodes": PP.nodes(chosen.gpus, per_node),
        "steps": [{"action": s.action, "layout": PP.layout_dict(s.layout, per_node),
                   "strategy": s.row.strategy, "peak_bytes": s.row.peak,
                   "fits": s.row.fits} for s in search.layout_steps],
        "fits_on": (None if rec.closest is None or not rec.fits else
                    {"gpus": chosen.gpus, "nodes": PP.nodes(chosen.gpus, per_node),
                     "layout": PP.layout_dict(chosen, per_node), "strategy": rec.strategy,
                     "peak_bytes": rec.peak,
                     "changes": [s.action for s in rec.steps if s.choice]}),
        "strategies": {
            r.strategy: {"activations_kept_bytes": r.kept,
                         "activations_rebuilt_bytes": r.rebuilt, "state_bytes": r.state,
                         "logits_bytes": r.logits, "peak_bytes": r.peak, "fits": r.fits,
                         "stage": r.stage, "layout": PP.layout_dict(chosen, per_node)}
            for r in rows.values()},
        "experts": experts_report(rec.inputs, chosen),
    }


def experts_report(p: P.PlannerInputs, chosen: M.Layout) -> dict | None:
    """A mixture-of-experts model's experts on one GPU of the layout (None: dense)."""
    from planner.parallel_plan import expert_split

    experts = getattr(p.source, "experts", None)
    if not experts:
        return None
    split = expert_split(p, chosen, experts)
    return {"ep": split.ep, "experts": split.experts, "experts_per_gpu": split.per_gpu,
            "top_k": split.top_k, "expert_params": p.arch.expert_params,
            "state_bytes": split.state, "sharded_over_gpus": split.sharded_over,
            "gathered_layer_bytes": split.gathered,
            "layer_activation_bytes": split.layer_activations,
            "routing": "balanced: each GPU's experts process top_k times its own tokens, "
                       "whatever ep is"}


def _settings(p: P.PlannerInputs) -> dict:
    return {"seq": p.seq, "batch": p.batch, "accumulation": p.accumulation,
            "precision": p.precision, "attention": "sdpa" if p.fused else "eager",
            "tuning": p.tuning, "lora_rank": p.lora_rank if p.tuning != "full" else None,
            "lora_targets": p.lora_targets if p.tuning != "full" else None,
            "optimizer": p.optimizer, "chunked_loss": p.chunked_loss, "gpus": p.shards,
            "strategy": p.strategy,
            "some_layers": p.some_layers if p.strategy == "some-layers" else None,
            "gpu_bytes": p.gpu_bytes, "headroom": p.headroom}


def plan_code(rec, language: str) -> dict:
    """The code of a plan that fits (none for one that does not): the Hugging Face script
    and the plain PyTorch code on one GPU or FSDP alone; the PyTorch layout code for a
    layout beyond FSDP (the Trainer shards the state only); DeepSpeed's and Megatron's."""
    from planner.framework_code import framework_code
    from planner.hf_code import GPUS_PER_NODE, hf_code
    from planner.parallel_code import parallel_code
    from planner.torch_code import torch_code

    if not rec.fits:
        return {}
    if rec.spread:
        return {"huggingface": None,
                "pytorch": parallel_code(rec.inputs, rec.layout, language, rec.per_node),
                **framework_code(rec.inputs, rec.layout, rec.per_node, language)}
    return {"huggingface": hf_code(rec.inputs, language),
            "pytorch": torch_code(rec.inputs, language),
            **framework_code(rec.inputs, None, GPUS_PER_NODE, language)}


def _recommendation(rec, language: str) -> dict:
    from planner import parallel_plan as PP

    return {
        "title": " + ".join(step.action for step in rec.steps),
        "fits": rec.fits, "gpus": rec.gpus, "strategy": rec.strategy,
        "peak_bytes": rec.peak,
        "steps": [{"action": s.action, "value": s.value, "reason": s.reason,
                   "changes_the_task": s.choice, "checkpointing": s.with_strategy,
                   "peak_bytes": s.peak, "fits": s.fits,
                   "spare_bytes": rec.inputs.gpu_bytes - s.peak} for s in rec.steps],
        "settings": _settings(rec.inputs),
        "layout": (None if rec.layout is None else
                   PP.layout_dict(rec.layout, rec.per_node)),
        "code": plan_code(rec, language),
    }


def report(p: P.PlannerInputs, language: str = "en", layout: M.Layout | None = None,
           per_node: int = 8) -> dict:
    """Everything the plan page shows, as JSON-ready values (bytes, ids, code); across
    GPUs (p.shards > 1 or a layout) the learner's `layout` or the recommended one, and a
    `parallel` object describing the same plan as the recommendation."""
    from planner.recommend import plan

    result = plan(p, layout, per_node)
    rec = result.recommendation
    arch = p.arch
    table = p.with_(some_layers=result.table_layers)  # the settings the rows are for
    recommended = {**_recommendation(rec, language),
                   "alternatives": [_recommendation(a, language) for a in rec.alternatives]}
    return {
        "model": {"label": arch.label, "family": arch.family or arch.kind,
                  "layers": arch.layers, "hidden": arch.hidden, "heads": arch.heads,
                  "kv_heads": arch.kv_heads, "head_dim": arch.head_dim,
                  "mlp_width": arch.mlp_width, "vocab": arch.vocab, "tied": arch.tied,
                  "params": arch.params()},
        "settings": _settings(p),
        "layer_activation_bytes": layer_bytes(p.tensors()),
        "checkpoint_bytes": result.checkpoint_bytes,
        "strategies": {
            row.strategy: {
                "activations_kept_bytes": P.activations(table, row.strategy).kept,
                "activations_rebuilt_bytes": P.activations(table, row.strategy).rebuilt,
                "peak_bytes": row.peak, "fits": row.fits, "spare_bytes": row.spare,
                "recompute_share": row.recompute_share,
                "largest_batch": row.largest_batch, "longest_seq": row.longest_seq,
                "breakdown": row.breakdown.parts()}
            for row in result.rows},
        "table_some_layers": result.table_layers,
        "recommended_row": result.recommended_row,
        "recommendation": recommended,
        "approximations": [{"id": a.id, "bytes": a.bytes, "share": a.share}
                           for a in result.approximations],
        "class": class_report(p),
        "parallel": (None if rec.layout is None else  # the same plan, the same code
                     {**parallel_report(rec, rec.per_node), "code": recommended["code"]}),
    }


def class_report(p: P.PlannerInputs) -> dict | None:
    """Where the layers' bytes come from: the family, the kernel, the bytes per layer type
    and each module where the class keeps more or less than the course's formula
    (beyond_course, `extra` negative: less); None where the plan takes the course's
    formula (a custom model; QLoRA on a preset: memory.footprint.PlannerInputs.fit)."""
    from planner import class_terms

    fit = p.fit()
    if fit is None:  # the course's formula: a custom model, or QLoRA on a preset
        return None
    return {
        "family": p.source.family, "kernel": p.kernel,
        "kernels_supported": list(getattr(p.source, "kernels", ())),
        "window": getattr(p.source, "window", None),
        # grouped_mm keeps b·s·top_k expert rows whatever the routing: balanced and worst
        # case (every token to the same experts) keep the same bytes
        "experts": (None if not getattr(p.source, "experts", None) else
                    {"count": p.source.experts[0], "top_k": p.source.experts[1],
                     "routing": "any: balanced and worst case alike"}),
        "layer_types": class_terms.layer_counts(p),
        "layer_type_bytes": class_terms.per_type_bytes(p),
        "layer_type_formulas": {t: class_terms.fitted_formula(fit, t, p.seq)
                                for t in class_terms.layer_counts(p)},
        "course_layer_bytes": class_terms.course_layer_bytes(p),
        "logit_extra_bytes": P.logit_extra_bytes(p),
        "logit_extra_causes": list(class_terms.logit_extra_causes(p)),
        "beyond_course": [{"module": t.module, "layer_type": t.slot, "measured": t.measured,
                           "course": t.course, "extra": t.extra, "formula": t.formula()}
                          for t in class_terms.extra_terms(p)],
    }


def _gib(n: float) -> str:
    return f"{n / GiB:,.1f} GiB"


def _verdict(spare: float, fits: bool, p: P.PlannerInputs) -> str:
    """As the page words it: fits with what is to spare, within the GPU but not its
    headroom, or short."""
    if spare < 0:
        return f"short by {_gib(-spare)}"
    if not fits:
        return f"only {_gib(spare)} to spare, less than the {p.headroom:.0%} kept free"
    return f"fits, {_gib(spare)} to spare"


def run(args) -> int:
    try:
        return _run(args)
    except ClassConfigError as error:  # a measurement that failed or hit a limit mid-plan
        raise PlanError(f"{args.config or args.model}: {error}") from None


def _run(args) -> int:
    planned = picture(args)
    if planned is not None:
        return planned
    p = inputs(args)
    if not 1 <= args.gpus_per_node <= 4096:
        raise PlanError(f"--gpus-per-node={args.gpus_per_node} is out of range 1..4096")
    given = layout(args, p)
    data = report(p, args.language, given, args.gpus_per_node)
    if args.json:
        print(json.dumps(data))
        return 0
    print(f"# {p.arch.label}: {p.arch.params() / 1e9:,.2f}B parameters; one layer keeps "
          f"{_gib(data['layer_activation_bytes'])} for backward; GPU {_gib(p.gpu_bytes)} "
          f"x {p.shards}, {p.headroom:.0%} kept free")
    cls = data["class"]
    if cls:
        print(f"# measured on transformers' {cls['family']} class, {cls['kernel']} attention"
              + (f", window {cls['window']:,}" if cls["window"] else "") + "; per layer: "
              + ", ".join(f"{n} x {t} {_gib(cls['layer_type_bytes'][t])}"
                          for t, n in cls["layer_types"].items()))
        if cls["experts"]:
            print(f"#   {cls['experts']['count']} experts, {cls['experts']['top_k']} per "
                  "token: the same bytes for balanced routing and the worst case")
        print(f"#   the class keeps {_gib(max(cls['layer_type_bytes'].values()))} per layer, "
              f"the course's formula {_gib(cls['course_layer_bytes'])}")
        for term in cls["beyond_course"]:
            sign = "+" if term["extra"] > 0 else "-"
            print(f"#   {'more' if term['extra'] > 0 else 'less'} than the course's formula: "
                  f"{term['module']} ({term['layer_type']}) "
                  f"{sign}{format_bytes(abs(term['extra']))}: the class keeps "
                  + (f"{format_bytes(term['measured'])} ({term['formula']} bytes), "
                     if term["measured"] else "none, ")
                  + (f"the course's formula {format_bytes(term['course'])}" if term["course"]
                     else "none in the course's formula"))
        if cls["logit_extra_bytes"]:
            print(f"#   around the loss: +{_gib(cls['logit_extra_bytes'])} ("
                  + "; ".join(LOGIT_EXTRA_WORDS[c] for c in cls["logit_extra_causes"]) + ")")
    for strategy, row in data["strategies"].items():
        name = (f"{strategy} ({data['table_some_layers']})" if strategy == "some-layers"
                else strategy)
        mark = "  <- recommended" if strategy == data["recommended_row"] else ""
        print(f"{name:17} peak {_gib(row['peak_bytes']):>12}  "
              f"{_verdict(row['spare_bytes'], row['fits'], p)}{mark}")
    rec = data["recommendation"]
    print(f"\nRecommended: {rec['title']} ({'fits' if rec['fits'] else 'does not fit'}, "
          f"{rec['gpus']} GPU{'s' if rec['gpus'] > 1 else ''})")
    for number, step in enumerate(rec["steps"], start=1):
        choice = " [changes the task]" if step["changes_the_task"] else ""
        value = f" {step['value']}" if step["value"] is not None else ""
        state = _verdict(step["spare_bytes"], step["fits"], p)
        print(f"{number}. {step['action']}{value}{choice}: peak {_gib(step['peak_bytes'])}, "
              f"{state}")
    for alt in rec["alternatives"]:
        print(f"   or: {alt['title']} (peak {_gib(alt['peak_bytes'])})")
    par = data.get("parallel")
    if par is not None:
        print_parallel(par, p)
    for text in printed_code(data, args.framework):
        print("\n" + text)
    return 0


def printed_code(data: dict, framework: str | None) -> list[str]:
    """The code --framework names, all of it the recommendation's (one plan). Without
    --framework: the Hugging Face script, or PyTorch's for a layout beyond FSDP. A plan
    that does not fit prints none, and one line saying so; a framework the plan's layout
    does not run in (the Trainer beyond FSDP) says so too."""
    code = data["recommendation"]["code"]
    if not code:
        return ["# No code: no plan fits. Take a change above (more GPUs, LoRA, a shorter "
                "sequence)."]
    texts = {"hf": code["huggingface"] or "# The Hugging Face Trainer shards the training "
             "state (FSDP) and nothing more: this plan's layout runs in the PyTorch code "
             "(--framework torch).", "torch": code["pytorch"],
             "deepspeed": code["deepspeed"], "megatron": code["megatron"]}
    if framework is None:
        return [texts["torch" if code["huggingface"] is None else "hf"]]
    if framework == "all":
        return [f"# ---- {FRAMEWORKS[name]}\n{text}" for name, text in texts.items()]
    return [texts[framework]]


def _layout_text(lay: dict) -> str:
    parts = [f"{name}={lay[name]}" for name in ("tp", "cp", "pp", "ep", "dp")
             if lay[name] > 1]
    if lay["sp"]:
        parts.append("sp")
    if lay["pp"] > 1:
        parts.append(f"{lay['schedule']} x {lay['microbatches']} micro-batches")
    return (", ".join(parts) or "one GPU") + f" ({lay['gpus']} GPUs, {lay['nodes']} nodes)"


def print_parallel(par: dict, p: P.PlannerInputs) -> None:
    """The many-GPU section: the steps to the layout, then each strategy on its most
    loaded GPU."""
    print(f"\nAcross GPUs ({par['chosen_by']}): {_layout_text(par['layout'])}, "
          f"{par['strategy']}, peak {_gib(par['peak_bytes'])} per GPU, "
          f"{'fits' if par['fits'] else 'does not fit'}")
    for number, step in enumerate(par["steps"], start=1):
        print(f"{number}. {step['action']}: {_layout_text(step['layout'])}, "
              f"{step['strategy']} peak {_gib(step['peak_bytes'])}")
    if par["fits_on"]:
        more = par["fits_on"]
        print(f"   fits on {more['gpus']} GPUs ({more['nodes']} nodes): "
              f"{_layout_text(more['layout'])}, {more['strategy']}")
    if par.get("experts"):
        ex = par["experts"]
        print(f"experts: {ex['experts_per_gpu']} of {ex['experts']} per GPU (ep={ex['ep']}), "
              f"their state {_gib(ex['state_bytes'])}, one layer's gathered "
              f"{_gib(ex['gathered_layer_bytes'])}, kept per layer and micro-batch "
              f"{_gib(ex['layer_activation_bytes'])} (balanced routing)")
    for strategy, row in par["strategies"].items():
        print(f"{strategy:17} kept {_gib(row['activations_kept_bytes']):>11}  peak "
              f"{_gib(row['peak_bytes']):>11}  {row['stage']} stage  "
              f"{'fits' if row['fits'] else 'does not fit'}")
