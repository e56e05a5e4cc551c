"""A config.json's measured class for plans, kept: in the process and on disk.

The first plan for a config measures its class (planner.class_memory, through its model
kind in model_classes: torch and transformers, fake tensors, a second or two) in a process
of its own with a time and a memory limit (planner.class_worker); what it
fitted is written to `DATA_DIR/planner-classes/<hash>.json` (the config, the versions of
torch and transformers and the measuring code in the hash), so a config seen before, by
this process or an earlier one, is planned from the file without importing torch. A
variant not yet fitted (another precision, kernel or LoRA setting) is measured then and
added. A config whose measurement hit a limit or failed is refused again at once for
FAILED_FOR_S seconds (each page of a plan would otherwise measure it again).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

from memory import hf_config
from memory.architectures import Architecture
from memory.class_layers import ClassFit, at_rank
from memory.hf_config import parse
from planner import class_worker
from planner.class_json import fit_from_json, fit_to_json

# the code that measures a language model's class and fits it (a change measures again;
# the image kinds' modules are not read by it)
_KIND = Path(__file__).parent.parent / "model_classes"
CODE = (*(_KIND / f"{name}.py" for name in ("causal_lm", "causal_lm_config", "causal_lm_step",
                                            "quantized", "saved_step", "variant")),
        Path(__file__).with_name("class_fit.py"), Path(__file__).with_name("class_memory.py"))
FAILED_FOR_S = 600.0  # a failed measurement is not tried again for this long


def cache_folder() -> Path:
    return Path(os.environ.get("DATA_DIR", "data")) / "planner-classes"


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "none"


def cache_key(cfg: dict[str, Any]) -> str:
    text = json.dumps(cfg, sort_keys=True, default=str)
    code = b"".join(path.read_bytes() for path in CODE) + Path(__file__).read_bytes()
    parts = [text, _version("torch"), _version("transformers"), _version("peft")]
    digest = hashlib.sha256("\0".join(parts).encode() + code)
    return digest.hexdigest()[:32]


def _variant_text(key: tuple) -> str:
    return "|".join(str(k) for k in key)


class ClassSource:
    """A config.json's class (memory.class_layers.LayerSource): its family, layer types,
    supported kernels, window and Architecture from the cache or the class, and each
    variant's fit, measured once. `shipped`: what was measured before and shipped with
    the planner for this config (planner.preset_classes), used when it was measured by
    the same code and library versions (its "key")."""

    def __init__(self, cfg: dict[str, Any], shipped: dict | None = None) -> None:
        self.cfg = cfg
        self.key = cache_key(cfg)
        self.path = cache_folder() / f"{self.key}.json"
        self._lock = threading.Lock()
        self._measured = None  # planner.class_memory.MeasuredClass, when needed
        current = shipped is not None and shipped.get("key") == self.key
        data = shipped if current else self._read()
        if data is None:  # measured in a process of its own, under its limits
            data = class_worker.measure("describe", cfg, str(cfg.get("_name_or_path") or ""))
            self._write(data)
        self.data = data
        self.family: str = data["family"]
        self.layer_types: tuple[str, ...] = tuple(data["layer_types"])
        self.kernels: tuple[str, ...] = tuple(data["kernels"])
        self.window: int | None = data["window"]
        self.attention_modules: list[str] = list(data["attention_modules"])
        experts = data["experts"]
        self.experts: tuple[int, int] | None = tuple(experts) if experts else None  # type: ignore[assignment]
        self.architecture = Architecture(**data["architecture"])
        self._fits: dict[str, ClassFit] = {k: fit_from_json(v)
                                           for k, v in data["fits"].items()}

    def _read(self) -> dict | None:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def _write(self, data: dict) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps(data), encoding="utf-8")
            tmp.replace(self.path)
        except OSError:
            pass  # a read-only data folder: the fits stay in this process

    def _class(self):
        """The class measured in this process (planner.class_memory.MeasuredClass); a plan
        measures in a child process instead (planner.class_worker)."""
        if self._measured is None:
            from planner.class_memory import MeasuredClass

            self._measured = MeasuredClass(self.cfg)
        return self._measured

    def fit(self, key: tuple, whole: bool = False) -> ClassFit:
        """A variant's fit: kept, or from two other ranks, or measured now. A first
        measurement is at one sequence (ClassFit.one_only: a third of the steps); a plan
        that asks for more sequences gets the whole fit then (`whole`, or through the
        fit's `whole`), which replaces it here and on disk."""
        precision, kernel, rank, targets, device = key
        if kernel not in self.kernels:
            kernel = self.kernels[0]
        key = (precision, kernel, rank, targets if rank else "all-linear", device)
        text = _variant_text(key)
        with self._lock:
            found = self._fits.get(text)
            if found is None:
                found = self._other_ranks(key)
            if found is None or (whole and found.one_only):
                one = fit_to_json(found) if found is not None and found.one_only else None
                data = _measured(f"{self.key}|{text}", lambda: class_worker.measure(
                    "fit", self.cfg, key, not whole, one))
                found = fit_from_json(data)
                self.data["fits"][text] = data
                self._write(self.data)
            if found.one_only and found.whole is None:
                found = replace(found, whole=lambda: self.fit(key, whole=True))
            self._fits[text] = found
            return found

    def _other_ranks(self, key: tuple) -> ClassFit | None:
        """A LoRA variant from the same variant at two other ranks, where both are known
        (memory.class_layers.at_rank: exact), else None."""
        precision, kernel, rank, targets, device = key
        if not rank:
            return None
        same = [precision, kernel, targets, device]
        ranks = sorted(int(r) for p, k, r, t, d in (text.split("|") for text in self._fits
                                                     if not self._fits[text].one_only)
                       if [p, k, t, d] == same and r != "0")
        if len(ranks) < 2:
            return None
        low, high = ranks[0], ranks[-1]

        def known(r: int) -> ClassFit:
            return self._fits[_variant_text((precision, kernel, r, targets, device))]

        return at_rank(known(low), low, known(high), high, rank)


_SOURCES: dict[str, ClassSource] = {}
_SOURCES_LOCK = threading.Lock()
_MAKING: dict[str, threading.Lock] = {}  # a config's ClassSource being made
# what failed to measure (a config, or a config's variant): when, and the error
_FAILED: dict[str, tuple[float, class_worker.MeasureFailed]] = {}


def _measured(key: str, measure):  # noqa: ANN001, ANN202 - a call of class_worker.measure
    """measure(), unless the same measurement failed within FAILED_FOR_S: then its error
    again, at once; a failure is kept (the oldest forgotten past 1,000)."""
    with _SOURCES_LOCK:
        failed = _FAILED.get(key)
    if failed is not None and time.monotonic() - failed[0] < FAILED_FOR_S:
        raise failed[1]
    try:
        return measure()
    except class_worker.MeasureFailed as error:
        with _SOURCES_LOCK:
            _FAILED[key] = (time.monotonic(), error)
            while len(_FAILED) > 1000:
                _FAILED.pop(next(iter(_FAILED)))
        raise


def class_source(cfg: dict[str, Any]) -> ClassSource:
    """The ClassSource of a config.json dict, one per distinct config in this process. A
    config being measured makes others wait for it only when they are the same config."""
    key = cache_key(cfg)
    with _SOURCES_LOCK:
        found = _SOURCES.get(key)
        if found is not None:
            return found
        making = _MAKING.setdefault(key, threading.Lock())
    with making:
        with _SOURCES_LOCK:
            found = _SOURCES.get(key)
        if found is None:
            found = _measured(key, lambda: ClassSource(cfg))
            with _SOURCES_LOCK:
                _SOURCES[key] = found
                _MAKING.pop(key, None)
        return found


def from_config_json(text: str) -> tuple[Architecture, ClassSource]:
    """A pasted config.json: its Architecture (counted on the class) and its class;
    memory.hf_config.ConfigJsonError for text that is no JSON object,
    model_classes.causal_lm_config.ClassConfigError for a model this planner cannot build."""
    cfg = parse(text)
    if cfg.get("model_type") in hf_config.FAMILIES:
        hf_config.architecture(cfg)  # the course's families: a missing size is named
    source = class_source(cfg)
    return source.architecture, source
