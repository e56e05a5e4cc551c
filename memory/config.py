"""The model configuration: one frozen dataclass, its bounds and the UI slider ranges."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from i18n import N_
from i18n import gettext as i18n_gettext

# What a config error says, by id: catalog messages (N_) over the error's parameters, so a
# page words the engine's refusal in its learner's language (ConfigError.text); field
# names and values stay as the URL and the CLI write them.
CONFIG_ERRORS: dict[str, str] = {
    "not-integer": N_("{name}={value} must be an integer in {lo}..{hi}"),
    "not-number": N_("{name}={value} must be a number in {lo}..{hi}"),
    "out-of-range": N_("{name}={value} is out of range; allowed {lo}..{hi}"),
    "not-divisible": N_("hidden={hidden} must be divisible by heads={heads} (allowed: a "
                        "multiple of heads)"),
    "head-too-large": N_("hidden/heads={head_dim} (hidden={hidden}, heads={heads}) is too "
                         "large; allowed head size 1..{max_head}"),
    "unknown-arch": N_("arch={value} is unknown; allowed {allowed}"),
    "kv-heads": N_("heads={heads} must be a multiple of kv_heads={kv_heads}"),
    "unknown-dtype": N_("dtype={value} is unknown; allowed {allowed}"),
    "dtype-device": N_("dtype={dtype} is not available on {device}; allowed {allowed}"),
    "unknown-field": N_("unknown config field(s): {fields}"),
    "not-bytes": N_("size {value} is not a number of bytes (e.g. 50MiB, 2GB)"),
}
MAX_HEAD_DIM = 256


class ConfigError(ValueError):
    """A configuration the engine refuses. Raised with an id of CONFIG_ERRORS and its
    parameters (`ConfigError.of("not-divisible", hidden=320, heads=3)`), the page words it
    in the learner's language with `text(code)`; `str()` is the English text (CLI, logs).
    Raised with a plain message (errors no page can cause), `text` is that message."""

    def __init__(self, message: str, *, id: str | None = None,
                 params: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.id = id
        self.params: dict[str, Any] = dict(params or {})

    def __reduce__(self) -> tuple:  # keeps the id and parameters across processes
        return (type(self), (str(self),), {"id": self.id, "params": self.params})

    @classmethod
    def of(cls, id: str, **params: Any) -> ConfigError:
        return cls(i18n_gettext("en", CONFIG_ERRORS[id], **params), id=id, params=params)

    def text(self, code: str) -> str:
        """The error in language `code` (a code of i18n.languages)."""
        if self.id is None:
            return str(self)
        return i18n_gettext(code, CONFIG_ERRORS[self.id], **self.params)


LIMITS: dict[str, tuple[int | float, int | float]] = {
    "layers": (1, 96),
    "hidden": (32, 8192),
    "heads": (1, 128),
    "seq_len": (8, 8192),
    "batch": (1, 512),
    "vocab": (16, 262144),
    "dropout": (0.0, 0.9),
    "seed": (0, 2**31 - 1),
    "kv_heads": (0, 128),
}
# the layer a model stacks (demos.model.BLOCKS): GPT-2-style, or Llama-style (RMSNorm,
# rotary positions, grouped-query attention, SwiGLU)
ARCHS = ("gpt", "llama")

DTYPES_FOR_DEVICE: dict[str, list[str]] = {
    "cpu": ["float32", "bfloat16"],
    "cuda": ["float32", "bfloat16", "float16"],
}
ALL_DTYPES = ("float32", "bfloat16", "float16")
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class ModelConfig:
    """A GPT-style decoder and the batch it trains on."""

    layers: int = 8
    hidden: int = 256
    heads: int = 4
    seq_len: int = 256
    batch: int = 4
    # small beside real models (32k-256k): at 8192 the logits (b·s·V) still show at the
    # loss without hiding what the layers hold
    vocab: int = 8192
    # float32, not the 16-bit of real training: the CPU has no fast bfloat16 matmuls, and
    # the theory's byte counts (and Korthikanti's 34·s·b·h, 16-bit) scale by dtype_bytes
    dtype: str = "float32"
    # no dropout by default: without masks the CPU prediction is exact to the byte, and
    # the same-result demo turns it on to show that recomputation replays the masks
    dropout: float = 0.0
    # one seed for weights, data and dropout, so every strategy trains the same network
    seed: int = 0
    arch: str = "gpt"  # one of ARCHS
    # key/value heads of a llama layer (grouped-query attention); 0: half the heads when
    # that divides them (memory.architectures.default_kv_heads); ignored by gpt layers
    kv_heads: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def tokens(self) -> int:
        return self.batch * self.seq_len

    def validated(self, device_kind: str | None = None) -> ModelConfig:
        """Return self if every field is in range, else raise ConfigError."""
        for name, (lo, hi) in LIMITS.items():
            value = getattr(self, name)
            is_int = isinstance(lo, int)
            if isinstance(value, bool) or not isinstance(value, int | float) or (
                is_int and not isinstance(value, int)
            ):
                raise ConfigError.of("not-integer" if is_int else "not-number", name=name,
                                     value=repr(value), lo=lo, hi=hi)
            if not lo <= value <= hi:
                raise ConfigError.of("out-of-range", name=name, value=value, lo=lo, hi=hi)
        if self.hidden % self.heads:
            raise ConfigError.of("not-divisible", hidden=self.hidden, heads=self.heads)
        if self.head_dim > MAX_HEAD_DIM:
            raise ConfigError.of("head-too-large", head_dim=self.head_dim, hidden=self.hidden,
                                 heads=self.heads, max_head=MAX_HEAD_DIM)
        if self.arch not in ARCHS:
            raise ConfigError.of("unknown-arch", value=repr(self.arch), allowed=", ".join(ARCHS))
        if self.kv_heads and self.heads % self.kv_heads:
            raise ConfigError.of("kv-heads", heads=self.heads, kv_heads=self.kv_heads)
        if self.dtype not in ALL_DTYPES:
            raise ConfigError.of("unknown-dtype", value=repr(self.dtype),
                                 allowed=", ".join(ALL_DTYPES))
        if device_kind is not None and self.dtype not in DTYPES_FOR_DEVICE[device_kind]:
            raise ConfigError.of("dtype-device", dtype=self.dtype, device=device_kind,
                                 allowed=", ".join(DTYPES_FOR_DEVICE[device_kind]))
        return self

    def replace(self, **changes) -> ModelConfig:
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ConfigError.of("unknown-field", fields=", ".join(sorted(unknown)))
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def demo_default(device_kind: str = "cpu") -> ModelConfig:
    """The config a demo page opens with (the UI's one source), chosen so the lesson shows
    at first sight: the activations (b·s·h per layer) outweigh the loss's logits (b·s·V)
    and the parameters' gradients, so every strategy reaches a different peak. On a CPU
    small enough that a default compare (none + every-layer, timed repeats included)
    answers in about a second on 2 cores; on a GPU wider (16-bit, h=2048 against V=8192)."""
    if device_kind == "cuda":
        return ModelConfig(layers=16, hidden=2048, heads=16, seq_len=1024, batch=4,
                           vocab=8192, dtype="bfloat16")
    return ModelConfig(layers=8, hidden=128, heads=4, seq_len=256, batch=2, vocab=1024)


def slider_ranges(device_kind: str) -> dict[str, tuple]:
    """(low, high, step) per field for UI sliders: small on a CPU, large on a GPU."""
    if device_kind == "cuda":
        return {
            "layers": (1, 96, 1),
            "hidden": (128, 8192, 128),
            "heads": (1, 64, 1),
            "seq_len": (64, 8192, 64),
            "batch": (1, 64, 1),
            "vocab": (1024, 262144, 1024),
            "dropout": (0.0, 0.5, 0.05),
        }
    return {
        "layers": (1, 24, 1),
        "hidden": (64, 512, 64),
        "heads": (1, 16, 1),
        "seq_len": (32, 1024, 32),
        "batch": (1, 8, 1),
        "vocab": (256, 32768, 256),
        "dropout": (0.0, 0.5, 0.05),
    }


def parse_bytes(text: str | int) -> int:
    """'50MiB', '2GB', '1.5GiB', '123' -> bytes."""
    if isinstance(text, int):
        return text
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
             "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
    s = str(text).strip().upper().replace(" ", "")
    num = s.rstrip("KMGTIB")
    unit = s[len(num):]
    try:
        value = float(num)
    except ValueError:
        raise ConfigError.of("not-bytes", value=repr(text)) from None
    if unit not in units or value < 0:
        raise ConfigError.of("not-bytes", value=repr(text))
    return int(value * units[unit])
