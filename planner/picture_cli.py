"""`python -m planner` for image models: a pasted diffusers config.json (a UNet, an SD3 or
Flux transformer) or a transformers vision encoder's (ViT, SigLIP, DINOv2, CLIP's vision
tower), or one of the image presets, planned by planner.picture_plan at
--resolution pixels. planner.cli dispatches here; a flag an image plan cannot take ends
with one line and exit 2, as every bad flag does there."""

from __future__ import annotations

import json
from typing import Any

from memory.hardware import GPUS, GiB
from planner.picture_plan import (
    ENCODERS,
    OPTIMIZERS,
    PRECISION_KEYS,
    QLORA_KINDS,
    TARGETS,
    TUNINGS,
    PictureError,
    PictureInputs,
)

DIFFUSERS_CLASSES = ("UNet2DConditionModel", "SD3Transformer2DModel",
                     "FluxTransformer2DModel")
VISION_TYPES = ("vit", "siglip_vision_model", "dinov2", "clip_vision_model")
TOWERS = ("siglip", "clip")
DEFAULT_RESOLUTION = {"vision-encoder": 224}
MAX_RESOLUTION = 8192


def picture_kind(cfg: Any) -> str | None:
    """The image model kind that builds a config.json (model_classes.kinds' claims, read
    without importing torch), None for any other."""
    if not isinstance(cfg, dict):
        return None
    name = cfg.get("_class_name")
    if name == "UNet2DConditionModel":
        return "unet"
    if name in DIFFUSERS_CLASSES:
        return "diffusion-transformer"
    model_type = cfg.get("model_type")
    if model_type in TOWERS and isinstance(cfg.get("vision_config"), dict):
        return "vision-encoder"
    return "vision-encoder" if model_type in VISION_TYPES else None


def side_unit(cfg: dict[str, Any], kind: str) -> int:
    """The side an image's side is a whole multiple of (the kinds' side_unit, read
    without importing torch): checked before anything is measured."""
    if kind == "unet":
        return 8 * 2 ** (len(cfg.get("block_out_channels") or (0,)) - 1)
    if kind == "diffusion-transformer":
        flux = cfg.get("_class_name") == "FluxTransformer2DModel"
        return 8 * (2 if flux else 1) * int(cfg.get("patch_size") or 1)
    part = cfg.get("vision_config") if isinstance(cfg.get("vision_config"), dict) else cfg
    return int(part.get("patch_size") or 16)


class Refused(ValueError):
    """One line for the command line (planner.cli wraps it in its PlanError)."""


def refuse_language_flags(args: Any) -> None:
    """The flags of a language model's plan that an image plan has no use for."""
    if args.seq is not None:
        raise Refused("--seq is the tokens of a language model's sample: an image model "
                      "takes --resolution (the image's side in pixels)")
    for flag in ("tp", "cp", "pp", "schedule", "microbatches", "chunks", "ep"):
        if getattr(args, flag) is not None or args.sp:
            raise Refused(f"--{flag if not args.sp else 'sp'}: the image planner plans one "
                          "GPU")
    if args.gpus != 1:
        raise Refused(f"--gpus {args.gpus}: the image planner plans one GPU; under data "
                      "parallelism (accelerate launch on several GPUs) each GPU holds what "
                      "this plan holds for its own --batch, so plan without --gpus")
    if args.optimizer not in OPTIMIZERS:
        raise Refused(f"--optimizer {args.optimizer}: the image planner plans "
                      f"{' and '.join(OPTIMIZERS)}")
    if args.lora_targets is None:
        args.lora_targets = "attention"
    if args.lora_targets not in TARGETS:
        raise Refused(f"--lora-targets {args.lora_targets}: one of {', '.join(TARGETS)}")
    if args.chunked_loss or args.some_layers is not None:
        raise Refused("--chunked-loss and --some-layers are a language model's flags")
    if args.placement == "sqrt":
        raise Refused("--placement sqrt checkpoints segments of about √N blocks, each "
                      "rebuilt whole; diffusers and transformers checkpoint block by block, "
                      "so an image plan places optimal, every or first-k")


def inputs(args: Any, cfg: dict[str, Any], kind: str, label: str) -> PictureInputs:
    refuse_language_flags(args)
    resolution = args.resolution or DEFAULT_RESOLUTION.get(kind, 1024)
    if not 1 <= resolution <= MAX_RESOLUTION:
        raise Refused(f"--resolution={resolution} is out of range 1..{MAX_RESOLUTION}")
    if not 1 <= args.batch <= 1024:
        raise Refused(f"--batch={args.batch} is out of range 1..1024")
    if not 1 <= args.lora_rank <= 4096:
        raise Refused(f"--lora-rank={args.lora_rank} is out of range 1..4096")
    if args.encoders is not None and kind == "vision-encoder":
        raise Refused("--encoders: a vision encoder has no VAE or text encoders")
    if args.tuning == "qlora" and kind not in QLORA_KINDS:
        raise Refused("--tuning qlora: the image planner plans QLoRA for diffusion "
                      "transformers (SD3, Flux: diffusers' 4-bit loading); this model trains "
                      "with --tuning full or lora")
    cached = args.cached_images if args.cached_images is not None else 0
    if not 0 <= cached <= 10**7:
        raise Refused(f"--cached-images={cached} is out of range 0..10000000")
    if args.gpu_gb is not None and not 0 < args.gpu_gb <= 4096:
        raise Refused(f"--gpu-gb={args.gpu_gb} is out of range (0, 4096]")
    if not 0 <= args.headroom < 100:
        raise Refused(f"--headroom={args.headroom:g} is out of range 0..<100 (percent)")
    assert args.precision in PRECISION_KEYS
    gpu = (int(args.gpu_gb * GiB) if args.gpu_gb is not None else
           GPUS[args.gpu or "h100"].bytes)
    tuning = args.tuning if args.tuning in TUNINGS else "full"
    return PictureInputs(cfg, resolution=resolution, batch=args.batch,
                         precision=args.precision, tuning=tuning, lora_rank=args.lora_rank,
                         lora_targets=args.lora_targets, optimizer=args.optimizer,
                         encoders=args.encoders or ENCODERS[0], cached_images=cached,
                         gpu_bytes=gpu, headroom=args.headroom / 100, label=label,
                         placement=args.placement or "optimal")


def _gib(n: float) -> str:
    return f"{n / GiB:,.2f} GiB"


def _verdict(row: dict[str, Any], p: PictureInputs) -> str:
    spare = row["spare_bytes"] + p.gpu_bytes * p.headroom  # against the whole GPU
    if spare < 0:
        return f"short by {_gib(-spare)}"
    if not row["fits"]:
        return f"only {_gib(spare)} to spare, less than the {p.headroom:.0%} kept free"
    return f"fits, {_gib(spare)} to spare"


def _name(row: dict[str, Any]) -> str:
    if row["strategy"] == "optimal":
        return f"optimal ({row['blocks_checkpointed']})"
    if row["strategy"] == "every-n":
        return f"every-n ({row['n']})"
    if row["strategy"] == "first-k":
        return f"first-k ({row['k']})"
    return row["strategy"]


def print_report(data: dict[str, Any], p: PictureInputs) -> None:
    m, s = data["model"], data["settings"]
    name = {"lora": "LoRA", "qlora": "QLoRA (a 4-bit NF4 base)"}.get(s["tuning"])
    tuning = (f"{name} rank {s['lora_rank']} on {s['lora_targets']} trains "
              f"{m['trainable_params'] / 1e6:,.1f}M" if name else "full fine-tuning")
    base = m["params"] - (m["trainable_params"] if name else 0)
    print(f"# {m['label']} ({m['class']}): {base / 1e9:,.3f}B parameters, "
          f"{m['blocks']} blocks; {tuning}; {s['resolution']} px, batch {s['batch']}, "
          f"{s['precision']}, {s['optimizer']}; GPU {_gib(p.gpu_bytes)}, "
          f"{p.headroom:.0%} kept free")
    blocks = data["blocks"]
    largest = max(blocks, key=lambda b: b["kept_bytes"])
    plain = sum(b["kept_bytes"] for b in blocks)
    ckpt = sum(b["checkpointed_bytes"] for b in blocks)
    print(f"# measured on the class under fake tensors at {s['resolution']} px: the blocks "
          f"keep {_gib(plain)} plain, {_gib(ckpt)} checkpointed; the largest block "
          f"{largest['name']} {_gib(largest['kept_bytes'])}; outside the blocks "
          f"{_gib(data['outside_bytes']['plain'])}")
    held = data["around_model_bytes"]
    if held:
        print("# besides the model: " + ", ".join(f"{k} {_gib(v)}" for k, v in held.items()))
    rec = data["recommendation"]
    for row in data["strategies"].values():
        key = data["recommended_row"]
        mark = ("  <- recommended" if rec["fits"] else "  <- closest") \
            if row is data["strategies"].get(key) else ""
        print(f"{_name(row):17} kept {_gib(row['activations_kept_bytes']):>11}  peak "
              f"{_gib(row['peak_bytes']):>11}  {_verdict(row, p)}{mark}")
    count = f"{rec['blocks_checkpointed']} of {m['blocks']} blocks checkpointed"
    if rec["fits"]:
        print(f"\nRecommended: {_name(rec)} ({count}), peak {_gib(rec['peak_bytes'])}, "
              "fits")
        print_placement(data)
    else:
        print(f"\nDoes not fit: even {_name(rec)} ({count}) peaks at "
              f"{_gib(rec['peak_bytes'])}, {_verdict(rec, p)}")
        print_alternatives(rec, m["blocks"], p)
    for part in ("model", "pipeline", "script"):
        if data["code"][part]:
            print("\n" + data["code"][part].rstrip())


def print_placement(data: dict[str, Any]) -> None:
    """The recommendation's recompute against every block and the first k blocks, each a
    share of a step's counted FLOPs, and the blocks it checkpoints."""
    placed, rec = data.get("placement"), data["recommendation"]
    if not placed:
        return

    def share(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    print(f"# recomputes {share(placed['recompute_share'])} of a step's FLOPs "
          f"({placed['step_flops'] / 1e12:,.2f} TFLOPs counted by torch); saves "
          f"{share(placed['saved_vs_every_layer'])} against every block, "
          f"{share(placed['saved_vs_first_k'])} against the first "
          f"{placed['first_k'] or '-'} blocks")
    if rec["strategy"] == "optimal":
        print("# checkpointed: " + ", ".join(rec["checkpointed_blocks"]))


def _flags(alt: dict[str, Any]) -> str:
    return " ".join(f"--{c['change'].replace('_', '-')} {c['value']}" for c in alt["changes"])


def print_alternatives(rec: dict[str, Any], blocks: int, p: PictureInputs) -> None:
    """A plan that does not fit: each alternative with its peak (every block
    checkpointed), best first; the one to take and whose code follows, or that none
    fits and no code is printed."""
    if rec["alternatives"]:
        print("Alternatives, best first (peak with every block checkpointed):")
    for alt in rec["alternatives"]:
        task = " [changes the task]" if alt["changes_the_task"] else ""
        print(f"   {_flags(alt)}{task}: peak {_gib(alt['every_layer_peak_bytes'])}, "
              f"{'fits' if alt['fits'] else 'does not fit'}")
    take = rec["take"]
    if take is None:
        print("Nothing listed fits: no code is printed (a larger GPU, a smaller image or "
              "fewer trained parameters would be needed).")
        return
    plan = take["plan"]
    print(f"Take {_flags(take)}: peak {_gib(take['every_layer_peak_bytes'])}, fits. "
          f"The code below is that plan's: {_name(plan)} ({plan['blocks_checkpointed']} of "
          f"{blocks} blocks checkpointed, as --placement places them), peak "
          f"{_gib(plan['peak_bytes'])}, {_verdict(plan, take_inputs(take, p))}")


def take_inputs(take: dict[str, Any], p: PictureInputs) -> PictureInputs:
    """The asked settings with the alternative's changes made (for its verdict)."""
    return p.with_(**{c["change"]: c["value"] for c in take["changes"]})


def run(args: Any, cfg: dict[str, Any], kind: str, label: str, repo: str | None,
        config_path: str) -> int:
    """Plan an image model from the parsed flags; print text or one JSON object."""
    from planner.picture_report import measured_for, report

    p = inputs(args, cfg, kind, label)
    from planner.picture_plan import check

    try:
        check(p, side_unit(cfg, kind), kind)
        data = report(p, measured_for(p), repo, config_path)
    except PictureError as error:
        raise Refused(str(error)) from None
    if args.json:
        print(json.dumps(data))
    else:
        print_report(data, p)
    return 0
