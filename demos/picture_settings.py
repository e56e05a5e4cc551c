"""The lab's image models and the settings a learner picks (nothing is built here): the families
(their tiny models: model_classes.tiny_pictures), the resolutions, batches, checkpointing
and LoRA offered (`PictureSetup`), what grows with the image's pixels (memory.pixels), and
the estimates the demo service queues and bounds a run with. Measured by
demos.picture_models; the /pictures page reads these to draw its controls."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from i18n import N_
from memory.config import ConfigError
from memory.pixels import feature_map_numbers, latent_side, patch_tokens
from model_classes.image_inputs import TEXT_TOKENS
from model_classes.tiny_pictures import tiny_config

STRATEGIES = ("none", "every-layer", "every-n")
SIZES = tuple(range(64, 513, 64))  # the image sides offered, in pixels
SWEEP_SIZES = (64, 128, 192, 256, 320, 384, 448, 512)
BATCHES = (1, 8)  # the smallest and largest batch offered
INTERVALS = (2, 4)  # every n-th block: the smallest and largest n offered
LORA_RANK = 4  # the LoRA the page offers: rank 4 on the attention projections
# the tiny models' weights and gradients and what else a step holds beside its activations
# (2.5 million parameters at most: 10 MB each copy), for the memory estimate
WEIGHT_BYTES = 64 * 2**20


@dataclass(frozen=True)
class Family:
    """A family of image models the lab trains (its tiny model: model_classes
    .tiny_pictures), what its blocks are called and what grows with its pixels."""

    key: str
    label: str  # catalog message
    library_class: str  # the class practitioners load
    grows: str  # "map": C·H·W of the full-resolution feature map; "tokens": patch tokens
    patch: int  # pixels per token side ("tokens"), 8 for the VAE's latents ("map")
    owner: str  # the variable the practitioner's code calls it: unet, transformer, model
    # estimates for the demo service's queue and memory bound, never shown as results:
    # CPU seconds of one plain step of one image at 64, 256 and 512 px on one core of the
    # 2-core reference machine, and bytes saved for backward per pixel of one image
    # (rounded up from the tiny model's steps at 256 and 512 px)
    seconds: tuple[float, float, float] = (0.05, 0.1, 0.4)
    kept_per_pixel: int = 400


FAMILIES: dict[str, Family] = {f.key: f for f in (
    Family("sd15-unet", N_("UNet, Stable Diffusion 1.5 layout"), "UNet2DConditionModel",
           "map", 8, "unet", (0.06, 0.25, 2.0), 400),
    Family("sdxl-unet", N_("UNet, SDXL layout"), "UNet2DConditionModel", "map", 8, "unet",
           (0.08, 0.15, 0.4), 320),
    Family("sd3", N_("Diffusion transformer, SD3 layout"), "SD3Transformer2DModel", "tokens",
           16, "transformer", (0.02, 0.03, 0.12), 80),
    Family("flux", N_("Diffusion transformer, Flux layout"), "FluxTransformer2DModel",
           "tokens", 16, "transformer", (0.06, 0.1, 0.25), 230),
    Family("vit", N_("ViT image classifier"), "ViTForImageClassification", "tokens", 16,
           "model", (0.01, 0.03, 0.17), 80),
    Family("siglip", N_("SigLIP vision encoder"), "SiglipVisionModel", "tokens", 16, "model",
           (0.01, 0.03, 0.18), 85),
    Family("dinov2", N_("DINOv2 vision encoder"), "Dinov2Model", "tokens", 14, "model",
           (0.01, 0.04, 0.25), 110),
)}


@dataclass(frozen=True)
class PictureSetup:
    """One measured configuration: the family, the image's side in pixels, the batch,
    the checkpointing ("none", "every-layer", "every-n" with its interval n) and LoRA
    (rank 0: full fine-tuning)."""

    family: str = "sdxl-unet"
    size: int = 256
    batch: int = 1
    strategy: str = "every-layer"
    n: int = 2
    lora: int = 0

    def validated(self) -> PictureSetup:
        """The setup, or ConfigError naming what is out of range."""
        if self.family not in FAMILIES:
            raise ConfigError(f"family={self.family!r}: allowed {', '.join(FAMILIES)}")
        if self.size not in SIZES:
            raise ConfigError(f"size={self.size}: allowed {SIZES[0]}..{SIZES[-1]} in steps "
                              f"of {SIZES[1] - SIZES[0]}")
        if not BATCHES[0] <= self.batch <= BATCHES[1]:
            raise ConfigError(f"batch={self.batch}: allowed {BATCHES[0]}..{BATCHES[1]}")
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"strategy={self.strategy!r}: allowed {', '.join(STRATEGIES)}")
        if not INTERVALS[0] <= self.n <= INTERVALS[1]:
            raise ConfigError(f"n={self.n}: allowed {INTERVALS[0]}..{INTERVALS[1]}")
        if self.lora not in (0, LORA_RANK):
            raise ConfigError(f"lora={self.lora}: allowed 0 or {LORA_RANK}")
        return self

    def with_(self, **changes: Any) -> PictureSetup:
        return PictureSetup(**{**asdict(self), **changes})

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)




# ------------------------------------------------------------------ what grows

def growing_units(family: str, size: int) -> int:
    """What grows with the image in this family, per image: a UNet's full-resolution
    feature map (its first level's channels at the latents' side: C·H·W), a diffusion
    transformer's joint tokens (image tokens (H/16)·(W/16) of the 2 × 2 latent patches,
    plus the text), a vision encoder's tokens ((H/p)·(W/p) patches, ViT's and DINOv2's
    class token besides; DINOv2's 14-pixel patches floor the side)."""
    fam = FAMILIES[family]
    cfg = tiny_config(family)
    if fam.grows == "map":
        side = latent_side(size)
        return feature_map_numbers(cfg["block_out_channels"][0], side, side)
    if fam.library_class in TEXT_TOKENS:
        side = latent_side(size)
        return patch_tokens(side, side, 2) + TEXT_TOKENS[fam.library_class]
    side = (size // fam.patch) * fam.patch
    return patch_tokens(side, side, fam.patch) + (family in ("vit", "dinov2"))


# ------------------------------------------------------------------ estimates

def step_seconds(family: str, size: int, batch: int = 1) -> float:
    """An estimate of one plain step's CPU seconds (Family.seconds, interpolated on a log
    scale between 64, 256 and 512 px; beyond, the last stretch extended), times the batch."""
    at = FAMILIES[family].seconds
    points = ((64, at[0]), (256, at[1]), (512, at[2]))
    (x0, y0), (x1, y1) = points[:2] if size <= 256 else points[1:]
    slope = math.log(y1 / y0) / math.log(x1 / x0)
    return y0 * (size / x0) ** slope * batch


def memory_estimate(family: str, size: int, batch: int = 1) -> int:
    """An estimate of the most bytes one step takes: twice what it saves for backward
    (Family.kept_per_pixel; gradients and backward's temporaries besides), and
    WEIGHT_BYTES for the tiny model's weights and gradients."""
    return 2 * FAMILIES[family].kept_per_pixel * size * size * batch + WEIGHT_BYTES




# ------------------------------------------------------------------ the practitioner's code

# LoRA on the attention, as the lab adds it (model_classes.diffusion.ATTENTION_TARGETS;
# for a vision encoder model_classes.causal_lm.lora_modules: the linear layers of each
# layer's attention module in transformers 5.24)
_LORA_TARGETS = {"unet": '["to_k", "to_q", "to_v", "to_out.0"]',
                 "transformer": '["to_k", "to_q", "to_v", "to_out.0", "add_k_proj", '
                                '"add_q_proj", "add_v_proj", "to_add_out"]'}
_VISION_LORA = {"vit": '["q_proj", "k_proj", "v_proj", "o_proj"]',
                "dinov2": '["q_proj", "k_proj", "v_proj", "o_proj"]',
                "siglip": '["q_proj", "k_proj", "v_proj", "out_proj"]'}


def code(setup: PictureSetup) -> str:
    """The lines a practitioner writes for the setup (diffusers 0.42.1, transformers 5.24,
    peft 0.21.2): LoRA as the LoRA training scripts add it, the library's checkpointing,
    and for every n-th block the function diffusers' switch takes (what the lab runs:
    model_classes.diffusion.BlockPicker) or transformers' every_n_layers."""
    fam = FAMILIES[setup.family]
    owner = fam.owner
    lines = [f"{owner}.train()"]
    if setup.lora:
        if owner == "model":
            lines += ["from peft import LoraConfig, get_peft_model",
                      f"{owner} = get_peft_model({owner}, LoraConfig(r={setup.lora}, "
                      f"target_modules={_VISION_LORA[setup.family]}))"]
        else:
            lines += ["from peft import LoraConfig",
                      f"{owner}.requires_grad_(False)",
                      f"{owner}.add_adapter(LoraConfig(r={setup.lora}, "
                      f'lora_alpha={setup.lora}, init_lora_weights="gaussian",',
                      f"    target_modules={_LORA_TARGETS[owner]}))"]
    if setup.strategy == "every-layer":
        lines.append(f"{owner}.activation_checkpointing_enable()" if owner == "model"
                     else f"{owner}.enable_gradient_checkpointing()")
    elif setup.strategy == "every-n" and owner == "model":
        lines.append(f"{owner}.activation_checkpointing_enable(every_n_layers={setup.n})")
    elif setup.strategy == "every-n":
        lines += ["from torch.utils.checkpoint import checkpoint",
                  "order = {}  # the blocks, in the order the forward hands them over",
                  "def every_nth(block, *args):",
                  "    if order.setdefault(block, len(order)) % "
                  f"{setup.n} == 0:",
                  "        return checkpoint(block.__call__, *args, use_reentrant=False)",
                  "    return block(*args)",
                  f"{owner}.enable_gradient_checkpointing("
                  "gradient_checkpointing_func=every_nth)"]
    else:
        lines.append("# checkpointing off")
    return "\n".join(lines)
