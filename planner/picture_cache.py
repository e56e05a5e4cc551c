"""Image models' measurements kept: the presets' shipped in
`planner/presets/pictures/measured.json`, any other config's on disk under
`DATA_DIR/planner-pictures/<hash>.json` once measured. A measurement's key holds the
config, the variant (precision, LoRA rank and targets, one image or more), the versions
of torch, diffusers, transformers and peft, and the measuring code: measured by other
code or versions it is not used (the model is measured again, and the tests fail until
the shipped file is written again:

    .venv/bin/python -m planner.picture_cache      # writes the presets' measurements

for each preset at the variant its plans start from: mixed precision, LoRA rank 16 on
the attention, one image; and FLUX.1 [dev]'s QLoRA at the same settings, how it is
trained on a 24 GB card)."""

from __future__ import annotations

import hashlib
import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = Path(__file__).with_name("presets") / "pictures" / "measured.json"
CODE = tuple(ROOT / "model_classes" / f"{name}.py" for name in (
    "diffusion", "dit", "unet", "vision_encoder", "image_inputs", "image_step", "saved_step",
    "variant", "causal_lm", "quantized")) + tuple(
        Path(__file__).with_name(f"{name}.py") for name in (
            "class_fit", "class_json", "picture_measure"))
SHIPPED_KEY = ("mixed", 16, "attention", 1)  # PictureInputs.measure_key of the presets'
QLORA_KEY = ("4bit-mixed", 16, "attention", 1)  # ... and of QLoRA at the same settings
SHIPPED_QLORA = ("flux.1-dev",)  # the presets whose QLoRA is shipped too


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "none"


def cache_key(cfg: dict[str, Any], key: tuple) -> str:
    text = json.dumps([cfg, list(key)], sort_keys=True, default=str)
    versions = [_version(n) for n in ("torch", "diffusers", "transformers", "peft")]
    code = b"".join(path.read_bytes() for path in CODE)
    return hashlib.sha256("\0".join([text, *versions]).encode() + code).hexdigest()[:32]


def folder() -> Path:
    return Path(os.environ.get("DATA_DIR", "data")) / "planner-pictures"


def _shipped() -> dict[str, Any]:
    try:
        return json.loads(SHIPPED.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def load(cfg: dict[str, Any], key: tuple) -> dict[str, Any] | None:
    """A kept measurement of this config and variant, by this code and these versions."""
    digest = cache_key(cfg, key)
    found = _shipped().get(digest)
    if found is not None:
        return found
    try:
        return json.loads((folder() / f"{digest}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def store(cfg: dict[str, Any], key: tuple, measured: dict[str, Any]) -> None:
    """Keep a measurement on disk (a folder that cannot be written is skipped)."""
    try:
        folder().mkdir(parents=True, exist_ok=True)
        path = folder() / f"{cache_key(cfg, key)}.json"
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(measured), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass


def main() -> None:
    """Measure every image preset at SHIPPED_KEY (and SHIPPED_QLORA's at QLORA_KEY) and
    write the shipped file."""
    from planner.picture_measure import measure
    from planner.picture_presets import PICTURE_PRESETS, preset_config

    out = {}
    for name in PICTURE_PRESETS:
        cfg = preset_config(name)
        for key in (SHIPPED_KEY, QLORA_KEY) if name in SHIPPED_QLORA else (SHIPPED_KEY,):
            print(f"measuring {name} {key[0]}", flush=True)
            out[cache_key(cfg, key)] = {"preset": name, **measure(cfg, *key)}
    SHIPPED.write_text(json.dumps(out, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
