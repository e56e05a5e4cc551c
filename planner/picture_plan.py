"""The planner for image models: a diffusers UNet or diffusion transformer (SDXL, SD 1.5,
SD3 and 3.5, Flux) or a transformers vision encoder (ViT, SigLIP, DINOv2, CLIP's vision
tower), trained at a resolution, batch, precision and tuning on one GPU: what each
block keeps for backward, every checkpointing choice's peak, and the recommendation
(when nothing fits, the alternatives: other settings, each planned whole).

What a block keeps is measured on the real class (planner.picture_measure: fitted under
fake tensors in t = (side / unit)², exact at every whole multiple of the unit), plainly
and checkpointed. A plan adds, at the step's peak (during backward, when the first
checkpointed block is rebuilt):

* the trained model's weights, gradients and optimizer state (LoRA: the frozen base in
  the weight dtype, the adapters in fp32 under mixed precision, as the training scripts
  cast them with cast_training_params; QLoRA: the base's linear weights in 4-bit NF4 and
  the rest in fp32, counted as the language planner counts them,
  memory.footprint.qlora_base_bytes);
* what the run keeps beside it (planner.picture_parts): a diffusion model's VAE and text
  encoders, or, cached, the latents of the data set; the batch's inputs;
* the blocks' kept bytes under the strategy, and what a checkpointed block's rebuild
  keeps while backward runs through it (the largest checkpointed block's plain bytes);
* the GPU's allowances as the language planner counts them (memory.hardware: the
  workspace and the allocator's fragmentation).

Pure arithmetic on the measurement (no torch): ids and numbers out, JSON-ready
(`report`), for the command line and a page alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import combinations
from typing import Any

from memory.class_layers import ClassFit
from memory.footprint import DEFAULT_HEADROOM, OPTIMIZER_KEYS, QUANTIZED, qlora_base_bytes
from memory.hardware import FRAGMENTATION, GPUS, WORKSPACE_BYTES
from memory.precisions import PRECISIONS, optimizer_state_bytes
from planner import picture_parts as parts
from planner import picture_placement as placement
from planner.class_json import fit_from_json

PRECISION_KEYS = ("mixed", "bf16", "fp32")
TUNINGS = ("full", "lora", "qlora")  # QLoRA: a diffusion transformer's (QLORA_KINDS)
# diffusers' 4-bit quantizer loads them, and their measurement builds one block of each
# type (a UNet is measured whole: with its 4-bit layers, SDXL's needs more than a
# measurement's memory limit, so its QLoRA is not planned)
QLORA_KINDS = ("diffusion-transformer",)
OPTIMIZERS = OPTIMIZER_KEYS
ENCODERS = ("resident", "cached")
TARGETS = ("attention", "all-linear")
STRATEGIES = ("none", "optimal", "first-k", "every-n", "every-layer")
MARGIN = DEFAULT_HEADROOM  # the share of the GPU a recommendation keeps free
# how the recommendation places checkpoints (`recommend`): the least recompute that fits,
# every block, or the fewest first blocks that fit
PLACEMENTS = ("optimal", "every", "first-k")


class PictureError(ValueError):
    """A setting the plan cannot take (a side that is no multiple of the unit): one
    line."""


@dataclass(frozen=True)
class PictureInputs:
    """An image training run on one GPU."""

    config: dict[str, Any]
    resolution: int = 1024  # the square image's side in pixels
    batch: int = 1
    precision: str = "mixed"
    tuning: str = "lora"
    lora_rank: int = 16
    lora_targets: str = "attention"
    optimizer: str = "adamw"
    encoders: str = "resident"  # the VAE and text encoders on the GPU, or "cached"
    cached_images: int = 0  # images whose latents a cached run keeps (0: the batch's)
    gpu_bytes: int = GPUS["h100"].bytes
    headroom: float = MARGIN
    label: str = ""
    placement: str = "optimal"  # one of PLACEMENTS

    def with_(self, **changes: Any) -> PictureInputs:
        return replace(self, **changes)

    @property
    def adapters(self) -> bool:
        """LoRA's adapters are trained (LoRA, or QLoRA over a 4-bit base)."""
        return self.tuning in ("lora", "qlora")

    @property
    def rank(self) -> int:
        return self.lora_rank if self.adapters else 0

    @property
    def usable_bytes(self) -> float:
        return self.gpu_bytes * (1 - self.headroom)

    def measure_key(self) -> tuple:
        """What the measurement depends on (planner.picture_measure.measure's args)."""
        precision = self.precision
        if self.tuning == "qlora":  # loaded in bf16 under autocast, or in fp32: no pure bf16
            precision = QUANTIZED + ("fp32" if precision == "fp32" else "mixed")
        return (precision, self.rank, self.lora_targets if self.rank else "attention",
                1 if self.batch == 1 else 2)


def check(p: PictureInputs, unit: int, kind: str | None = None) -> None:
    """PictureError for a side the class cannot take whole, or QLoRA on a vision encoder
    (`kind`: planner.picture_cli.picture_kind's)."""
    if p.tuning == "qlora" and kind is not None and kind not in QLORA_KINDS:
        raise PictureError("--tuning qlora: the image planner plans QLoRA for diffusion "
                           "transformers (SD3, Flux: diffusers' 4-bit loading); this model "
                           "trains with full fine-tuning or LoRA")
    if p.resolution <= 0 or p.resolution % unit:
        near = max(1, round(p.resolution / unit)) * unit
        raise PictureError(f"--resolution={p.resolution}: this model takes sides that are "
                           f"multiples of {unit} pixels (e.g. {near})")


# ---------------------------------------------------------------- the blocks


def _slot_bytes(fit: ClassFit, slot: str, b: int, t: int) -> int:
    """A slot's terms at (b, t), each term's first stretch (an image fit has one); the
    GPU's log-sum-exp padding to 32 tokens is left out (none at sides whose attention
    token counts are multiples of 32: SDXL, SD3 and Flux at 512, 768, 1024 pixels)."""
    return sum(term.polys[0](b, t) for term in fit.terms if term.slot == slot)


@dataclass(frozen=True)
class Blocks:
    """Each block's kept bytes plain and checkpointed, and outside the blocks; each
    block's forward FLOPs (what its rebuild reruns) and the step's, when the measurement
    counted them (else empty and 0)."""

    names: tuple[str, ...]
    types: tuple[str, ...]
    plain: tuple[int, ...]
    checkpointed: tuple[int, ...]
    outside_plain: int
    outside_checkpointed: int
    flops: tuple[float, ...] = ()
    step_flops: float = 0.0


def blocks(measured: dict[str, Any], batch: int, side: int) -> Blocks:
    """The measured fits at a batch and side (a multiple of the unit)."""
    unit = int(measured["unit"])
    t = (side // unit) ** 2
    fits = {s: fit_from_json(f) for s, f in measured["fits"].items()}
    types = tuple(measured["block_types"])
    slots = ["first" if i == 0 else kind for i, kind in enumerate(types)]
    per = {s: tuple(_slot_bytes(fit, slot, batch, t) for slot in slots)
           for s, fit in fits.items()}
    flops, step = placement.block_flops(measured, batch, side) or ((), 0.0)
    return Blocks(tuple(measured["block_names"]), types, per["none"], per["every-layer"],
                  _slot_bytes(fits["none"], "outside", batch, t),
                  _slot_bytes(fits["every-layer"], "outside", batch, t), flops, step)


def chosen(strategy: str, count: int, n: int = 2, k: int = 1) -> tuple[int, ...]:
    """The checkpointed blocks of a strategy, as the libraries pick them (diffusers'
    BlockPicker, transformers' every_n_layers: blocks 0, n, 2n ...); "optimal"'s are
    picked by `optimal_blocks`."""
    if strategy == "none":
        return ()
    if strategy == "every-layer":
        return tuple(range(count))
    if strategy == "every-n":
        return tuple(range(0, count, n))
    if strategy == "first-k":
        return tuple(range(min(k, count)))
    raise ValueError(strategy)


def kept(b: Blocks, picked: tuple[int, ...]) -> tuple[list[int], int, int]:
    """(each block's kept bytes, outside the blocks, the rebuild's transient: the largest
    checkpointed block's plain bytes) with the blocks `picked` checkpointed. Outside:
    what the checkpointed run keeps there once any block is checkpointed (tensors a
    checkpoint holds for several blocks), exact for none and every block, at most that
    in between."""
    on = set(picked)
    per = [b.checkpointed[i] if i in on else b.plain[i] for i in range(len(b.plain))]
    outside = b.outside_checkpointed if on else b.outside_plain
    rebuilt = max((b.plain[i] for i in on), default=0)
    return per, outside, rebuilt


def activation_budget(p: PictureInputs, measured: dict[str, Any]) -> float:
    """The bytes the blocks' kept and rebuilt activations may take for a row to fit
    (`row`'s peak solved for them)."""
    held = sum(model_state(p, int(measured["params"]), int(measured["trainable"]),
                           int(measured.get("quantized_params", 0))).values())
    held += sum(around(p).values())
    return (p.usable_bytes - WORKSPACE_BYTES) / (1 + FRAGMENTATION) - held


def optimal_blocks(p: PictureInputs, measured: dict[str, Any], b: Blocks
                   ) -> tuple[int, ...] | None:
    """The blocks whose checkpointing fits with the fewest FLOPs recomputed
    (planner.picture_placement.optimal); None without FLOP counts or when even every
    block does not fit."""
    if not b.flops:
        return None
    return placement.optimal(b.plain, b.checkpointed, b.outside_plain,
                             b.outside_checkpointed, b.flops, activation_budget(p, measured))


# ---------------------------------------------------------------- the state


def model_state(p: PictureInputs, params: int, trainable: int, quantized: int = 0
                ) -> dict[str, float]:
    """Weights, gradients and optimizer state of the trained model (see the module's
    docstring); LoRA: `params` counts the adapters, `trainable` is theirs; QLoRA:
    `quantized` of the base's parameters are 4-bit linear weights."""
    if p.tuning == "qlora":  # adapters in fp32, no pure bf16 (prepare_model_for_kbit_training)
        return {"weights": qlora_base_bytes(quantized, params - trainable) + trainable * 4,
                "gradients": trainable * 4,
                "optimizer": trainable * optimizer_state_bytes("fp32", p.optimizer)}
    if p.tuning == "lora":
        base = 4 if p.precision == "fp32" else 2
        adapter = 2 if p.precision == "bf16" else 4
        return {"weights": (params - trainable) * base + trainable * adapter,
                "gradients": trainable * adapter,
                "optimizer": trainable * optimizer_state_bytes(
                    "bf16" if p.precision == "bf16" else "fp32", p.optimizer)}
    prec = PRECISIONS[p.precision]
    return {"weights": params * prec.weight_bytes, "gradients": params * prec.grad_bytes,
            "optimizer": params * optimizer_state_bytes(p.precision, p.optimizer)}


def around(p: PictureInputs) -> dict[str, int]:
    """What the run holds besides the trained model: frozen parts, inputs, cache."""
    cfg = p.config
    fam = parts.family(cfg)
    out = dict(parts.frozen_bytes(fam, p.precision, p.encoders))
    out.update(parts.batch_inputs(cfg, fam, p.resolution, p.batch, p.precision,
                                  p.encoders))
    if p.encoders == "cached" and "_class_name" in cfg:
        out["latent_cache"] = parts.cached_latent_bytes(cfg, p.resolution, p.precision) \
            * max(p.cached_images, p.batch)
    return out


@dataclass(frozen=True)
class Row:
    """One checkpointing choice at the plan's settings."""

    strategy: str
    n: int
    k: int
    checkpointed: int  # blocks checkpointed
    kept: int
    rebuilt: int
    peak: float
    parts: dict[str, float]
    fits: bool
    spare: float
    picked: tuple[int, ...] = ()  # the checkpointed blocks' indices
    recompute: float | None = None  # FLOPs their rebuilds rerun (None: not counted)

    @property
    def key(self) -> str:
        return (f"every-n:{self.n}" if self.strategy == "every-n" else
                f"first-k:{self.k}" if self.strategy == "first-k" else self.strategy)


def row(p: PictureInputs, measured: dict[str, Any], b: Blocks, strategy: str, n: int = 2,
        k: int = 1, picked: tuple[int, ...] | None = None) -> Row:
    """One choice's peak; `picked`: the blocks "optimal" checkpoints."""
    if picked is None:
        picked = chosen(strategy, len(b.plain), n, k)
    per, outside, rebuilt = kept(b, picked)
    pieces: dict[str, float] = dict(model_state(
        p, int(measured["params"]), int(measured["trainable"]),
        int(measured.get("quantized_params", 0))))
    pieces.update(around(p))
    pieces["activations_kept"] = sum(per) + outside
    pieces["activations_rebuilt"] = rebuilt
    pieces["workspace"] = WORKSPACE_BYTES + FRAGMENTATION * sum(pieces.values())
    peak = sum(pieces.values())
    redo = sum(b.flops[i] for i in picked) if b.flops else None
    return Row(strategy, n, k, len(picked), sum(per) + outside, rebuilt, peak, pieces,
               peak <= p.usable_bytes, p.usable_bytes - peak, tuple(picked), redo)


def candidates(p: PictureInputs, measured: dict[str, Any], b: Blocks) -> list[Row]:
    """Every choice: none, the optimal placement (when FLOPs are counted and some block
    needs checkpointing), the first k blocks (each k), every n-th block (each n), every
    block."""
    count = len(b.plain)
    rows = [row(p, measured, b, "none")]
    best = optimal_blocks(p, measured, b)
    if best:
        rows.append(row(p, measured, b, "optimal", picked=best))
    rows += [row(p, measured, b, "first-k", k=k) for k in range(1, count)]
    rows += [row(p, measured, b, "every-n", n=n) for n in range(count - 1, 1, -1)]
    rows.append(row(p, measured, b, "every-layer"))
    return rows


def recommend(rows: list[Row], placement: str = "optimal") -> Row:
    """The choice that fits with the fewest FLOPs recomputed (without FLOP counts: the
    fewest blocks checkpointed), the lower peak between equals; none fitting: every
    block (the least memory the checkpointing can give). `placement` "every": every
    block; "first-k": none or the fewest first blocks that fit."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement {placement!r}: one of {', '.join(PLACEMENTS)}")
    if placement == "every":
        return rows[-1]
    fitting = [r for r in rows if r.fits]
    if placement == "first-k":
        fitting = [r for r in fitting if r.strategy in ("none", "first-k")] or [rows[-1]]
        return min(fitting, key=lambda r: r.checkpointed)
    if not fitting:
        return min(rows, key=lambda r: r.peak)
    if all(r.recompute is not None for r in fitting):
        return min(fitting, key=lambda r: (r.recompute, r.peak))
    return min(fitting, key=lambda r: (r.checkpointed, r.peak))


def table(rows: list[Row], best: Row) -> list[Row]:
    """The rows a page shows: none, the optimal placement, the first k blocks (the fewest
    that fit, else half of them), every second block, every block; the recommended row in
    its strategy's place."""
    count = max(r.checkpointed for r in rows)
    out = {"none": rows[0], "every-layer": rows[-1]}
    out.update((r.strategy, r) for r in rows if r.strategy == "optimal")
    firsts = [r for r in rows if r.strategy == "first-k"]
    fitting = [r for r in firsts if r.fits]
    half = [r for r in firsts if r.k == max(1, count // 2)]
    if fitting or half:
        out["first-k"] = fitting[0] if fitting else half[0]
    second = [r for r in rows if r.strategy == "every-n" and r.n == 2]
    if second:
        out["every-n"] = second[0]
    out[best.strategy] = best
    return [out[s] for s in STRATEGIES if s in out]


# the changes an alternative may make, in the order they are offered: the task kept
# (8-bit AdamW, cached encoders, one image per step) before the trained method changed
TASK_CHANGES = ("tuning",)


def changes(p: PictureInputs, kind: str) -> list[tuple[str, Any]]:
    """The single changes an alternative to `p` may make (flag, value)."""
    out: list[tuple[str, Any]] = []
    if p.optimizer == "adamw":
        out.append(("optimizer", "adamw-8bit"))
    if "_class_name" in p.config and p.encoders == "resident":
        out.append(("encoders", "cached"))
    if p.batch > 1:
        out.append(("batch", 1))
    if p.tuning == "full":
        out.append(("tuning", "lora"))
    if p.tuning in ("full", "lora") and kind in QLORA_KINDS:
        out.append(("tuning", "qlora"))
    return out


@dataclass(frozen=True)
class Alternative:
    """The plan with some changes made: its settings and measurement, its own
    recommended row (`best`) and its row with every block checkpointed (`every`)."""

    changes: tuple[tuple[str, Any], ...]
    inputs: PictureInputs
    measured: dict[str, Any]
    best: Row
    every: Row

    @property
    def fits(self) -> bool:
        return self.best.fits

    @property
    def changes_the_task(self) -> bool:
        return any(change in TASK_CHANGES for change, _ in self.changes)


Measure = Callable[["PictureInputs"], "dict[str, Any] | None"]


def alternative(p: PictureInputs, made: tuple[tuple[str, Any], ...], measure: Measure
                ) -> Alternative | None:
    """The whole plan with the changes `made` (measured by `measure` where the changes
    need another measurement: another tuning or batch); None when that measurement
    failed."""
    q = p.with_(**dict(made))
    measured = measure(q)
    if measured is None:
        return None
    b = blocks(measured, q.batch, q.resolution)
    rows = candidates(q, measured, b)
    return Alternative(made, q, measured, recommend(rows, q.placement), rows[-1])


def alternatives(p: PictureInputs, kind: str, measure: Measure) -> list[Alternative]:
    """When the plan does not fit: each single change (its own plan, fitting or not);
    when none fits, the combinations of two changes that fit, then of three ...; when no
    combination fits, the closest of all the changes together. Best first: those that
    fit, the task kept before it is changed, the fewest changes, the lowest peak with
    every block checkpointed; then those that do not, the lowest peak first."""
    options = changes(p, kind)
    shown: list[Alternative] = []
    plans: list[Alternative] = []
    for size in range(1, len(options) + 1):
        planned = (alternative(p, made, measure) for made in combinations(options, size)
                   if sum(change == "tuning" for change, _ in made) <= 1)
        plans = [a for a in planned if a is not None]  # a failed measurement: not offered
        shown += plans if size == 1 else [a for a in plans if a.fits]
        if any(a.fits for a in shown):
            break
    else:
        if plans and len(options) > 1:
            shown.append(min(plans, key=lambda a: a.every.peak))
    return sorted(shown, key=lambda a: (not a.fits, a.fits and a.changes_the_task,
                                        len(a.changes) if a.fits else 0, a.every.peak))


def share(part: int, whole: int) -> float:
    return float(Fraction(part, whole)) if whole else 0.0
