"""The planner's presets, planned on their real transformers classes from terms measured
once and shipped.

Each preset's public config.json is in `planner/presets/<preset>.json`. Every variant a
plan of it can ask for (fp32, mixed precision and bf16; each attention kernel the class
supports; full fine-tuning and LoRA on the attention or on every linear layer, as a GPU
keeps it) is measured on the class (planner.class_memory) by

    .venv/bin/python -m planner.preset_classes      # writes planner/presets/measured.json

and shipped, so a preset is planned without importing torch or transformers. LoRA is
measured at ranks 8 and 16 and every other rank derived exactly (memory.class_layers.
at_rank). The file carries the cache key of each config (the config, the versions of
torch, transformers and peft, and the measuring code): measured by other code or
versions it is not used (the preset is then measured live, as a pasted config.json is)
and the tests fail until it is written again; they also measure variants afresh and
hold them to the file.

Stored compactly: each preset's distinct terms once (a term is the same in many
variants), each variant a list of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memory.architectures import PRESETS
from planner.class_cache import ClassSource, _variant_text

FOLDER = Path(__file__).with_name("presets")
MEASURED = FOLDER / "measured.json"
PRECISIONS = ("fp32", "mixed", "bf16")  # PlannerInputs.variant's precisions
RANKS = (8, 16)  # LoRA ranks measured; the others follow from them
TARGETS = ("attention", "all-linear")
DEVICE = "cuda"  # plans price a GPU


def config(preset: str) -> dict[str, Any]:
    """A preset's config.json, as published."""
    return json.loads((FOLDER / f"{preset}.json").read_text(encoding="utf-8"))


def variants(kernels: tuple[str, ...]) -> list[tuple]:
    """Every variant key (memory.footprint.PlannerInputs.variant) measured for a preset."""
    tunings = [(0, "all-linear")] + [(r, t) for t in TARGETS for r in RANKS]
    return [(p, k, r, t, DEVICE) for p in PRECISIONS for k in kernels for r, t in tunings]


# ---------------------------------------------------------------- the file


def _poly_text(rows: list[list[str]]) -> str:
    return "|".join(" ".join(row) for row in rows)


def _poly_rows(text: str) -> list[list[str]]:
    return [row.split(" ") for row in text.split("|")]


def pack(data: dict) -> dict:
    """A ClassSource's data with its fits' terms stored once."""
    terms: dict[str, int] = {}
    fits = {}
    for text, fit in data["fits"].items():
        ids = []
        for term in fit["terms"]:
            row = json.dumps([term["slot"], term["name"], term["kind"], term["padded"],
                              [_poly_text(p) for p in term["polys"]]])
            ids.append(terms.setdefault(row, len(terms)))
        fits[text] = {"breaks": fit["breaks"], "trainable": fit["trainable"], "terms": ids}
    return {**{k: v for k, v in data.items() if k != "fits"},
            "terms": [json.loads(row) for row in terms], "fits": fits}


def unpack(data: dict) -> dict:
    """pack's inverse: a ClassSource's data."""
    rows = [{"slot": r[0], "name": r[1], "kind": r[2], "padded": r[3],
             "polys": [_poly_rows(p) for p in r[4]]} for r in data["terms"]]
    fits = {text: {"breaks": fit["breaks"], "trainable": fit["trainable"],
                   "terms": [rows[i] for i in fit["terms"]]}
            for text, fit in data["fits"].items()}
    return {**{k: v for k, v in data.items() if k != "terms"}, "fits": fits}


@contextlib.contextmanager
def fresh_data_dir() -> Iterator[None]:
    """A new empty DATA_DIR for the block, and no config's class kept in this process:
    what is planned inside is measured afresh, not read from a cache."""
    from planner import class_cache

    old = os.environ.get("DATA_DIR")
    with tempfile.TemporaryDirectory() as folder:
        os.environ["DATA_DIR"] = folder
        class_cache._SOURCES.clear()
        try:
            yield
        finally:
            if old is None:
                os.environ.pop("DATA_DIR", None)
            else:
                os.environ["DATA_DIR"] = old


def measure(preset: str) -> dict:
    """A preset's class and every variant's fit, measured now (fake tensors; about a
    second of CPU per variant), as ClassSource data with its cache key."""
    from planner import class_cache

    with fresh_data_dir():
        source = ClassSource(config(preset))
        for key in variants(source.kernels):
            source.fit(key, whole=True)
    assert {_variant_text(k) for k in variants(source.kernels)} == set(source.data["fits"])
    return {"key": class_cache.cache_key(config(preset)), **source.data}


def write() -> None:
    measured = {preset: pack(measure(preset)) for preset in PRESETS}
    MEASURED.write_text(json.dumps(measured, indent=0, sort_keys=True) + "\n",
                        encoding="utf-8")


# ---------------------------------------------------------------- for plans

_SHIPPED: dict[str, Any] = {}
_SOURCES: dict[str, ClassSource] = {}
_LOCK = threading.Lock()


def shipped(preset: str) -> dict | None:
    """The shipped data of a preset (ClassSource's), None where the file has none."""
    with _LOCK:
        if not _SHIPPED:
            try:
                _SHIPPED.update(json.loads(MEASURED.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                _SHIPPED["-"] = {}
        data = _SHIPPED.get(preset)
    return unpack(data) if data else None


def preset_source(preset: str) -> ClassSource:
    """A preset's class for plans (memory.class_layers.LayerSource), one per process:
    from the shipped terms when they are current, else measured as a pasted config."""
    with _LOCK:
        found = _SOURCES.get(preset)
    if found is None:
        found = ClassSource(config(preset), shipped(preset))
        with _LOCK:
            found = _SOURCES.setdefault(preset, found)
    return found


if __name__ == "__main__":
    write()
    print(f"wrote {MEASURED}")
