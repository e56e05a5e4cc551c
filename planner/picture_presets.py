"""The planner's image presets: each one's config.json as published (in
`planner/presets/pictures/`), its repository on the Hugging Face Hub and its label."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FOLDER = Path(__file__).with_name("presets") / "pictures"
# preset -> (its published repository on the Hugging Face Hub, its subfolder's label)
PICTURE_PRESETS: dict[str, tuple[str, str]] = {
    "sdxl-base-unet": ("stabilityai/stable-diffusion-xl-base-1.0", "SDXL base 1.0 UNet"),
    "sd3.5-medium": ("stabilityai/stable-diffusion-3.5-medium", "SD3.5 Medium transformer"),
    "flux.1-dev": ("black-forest-labs/FLUX.1-dev", "FLUX.1 [dev] transformer"),
    "vit-large-patch16-224": ("google/vit-large-patch16-224", "ViT-L/16 (224 px)"),
    "siglip-so400m-patch14-384": ("google/siglip-so400m-patch14-384",
                                  "SigLIP so400m/14 vision tower (384 px)"),
}


def preset_config(name: str) -> dict[str, Any]:
    """A preset's config.json, as published."""
    return json.loads((FOLDER / f"{name}.json").read_text(encoding="utf-8"))
