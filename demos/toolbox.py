"""Lesson 10's measurements (the practitioner's toolbox), each a short CPU run of its own
tiny models, measured with torch's saved-tensor hooks on this run:

* `packing`: a padded batch against the same sequences packed into one row with a
  document mask (a tiny transformers Llama, SDPA): the bytes saved for backward that grow
  with the tokens, those of the s × s mask, and whether each document's outputs equal
  those of the document run alone (they do with restarting `position_ids`, transformers'
  packed-sequence detection; not when the positions are forgotten);
* `autocast_dtypes`: which dtype each op of a small block saves under CPU autocast;
* `lora_saved`: what a frozen base linear keeps against a PEFT LoRA linear on it, with fp32
  or base-dtype adapters, with and without lora_dropout.

Each returns plain rows (dicts of numbers and short ids), which serving.toolbox_jobs turns
into a table; the words are the page's (ui.lesson_toolbox). The FLOP counts and the
CheckpointError are in demos.toolbox_runs.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from demos.toolbox_settings import (
    AUTOCAST_DTYPES,
    AUTOCAST_SHAPE,
    LORA_DROPOUT,
    LORA_OUT,
    LORA_RANK,
    LORA_TOKENS,
    LORA_WIDTH,
    PACK_MODEL,
    PACK_PRESETS,
)
from memory.saved_weights import is_weight_copy

# ------------------------------------------------------------------ saved for backward


@dataclass(frozen=True)
class Saved:
    """One tensor autograd saved: its dtype ("float32"), shape, storage (address and
    bytes) and whether it is a weight's cast (memory.saved_weights)."""

    dtype: str
    shape: tuple[int, ...]
    storage: int
    nbytes: int
    cast_of: int | None  # the storage of the leaf (a weight, an input) it is a cast of
    mask: bool = False  # bool, or (asked for) holds only 0 and one other value

    @property
    def numel(self) -> int:
        size = 1
        for n in self.shape:
            size *= n
        return size

    @property
    def tensor_bytes(self) -> int:
        return self.numel * torch.empty((), dtype=getattr(torch, self.dtype)).element_size()


def _cast_of(t: torch.Tensor) -> int | None:
    """The storage of the leaf tensor `t` is (a view of) a cast of: autocast's copy of a
    weight or of an input (memory.saved_weights.is_weight_copy reads the graph's nodes)."""
    if not is_weight_copy(t):
        return None
    fn = t.grad_fn
    while type(fn).__name__ != "ToCopyBackward0":
        fn = fn.next_functions[0][0]
    return fn.next_functions[0][0].variable.untyped_storage().data_ptr()


def _is_mask(t: torch.Tensor) -> bool:
    """A mask: bool, or a float tensor of zeros and one other value (torch's CPU dropout
    multiplies by such a noise tensor, 0 or 1/(1 - p), and keeps it)."""
    if t.dtype == torch.bool:
        return True
    if not t.is_floating_point():
        return False
    values = t.detach().unique()
    return values.numel() == 2 and bool((values == 0).any())


def saved_while(fn: Callable[[], Any], masks: bool = False) -> tuple[list[Saved], Any]:
    """Every tensor autograd saves while `fn` runs (in order, repeats included), and what
    `fn` returned; `masks`: tell masks from data by their values (small tensors only)."""
    saved: list[Saved] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        saved.append(
            Saved(
                str(t.dtype).removeprefix("torch."),
                tuple(t.shape),
                storage.data_ptr(),
                storage.nbytes(),
                _cast_of(t),
                t.dtype == torch.bool or (masks and _is_mask(t)),
            )
        )
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return saved, out


def storages_of(tensors: Collection[torch.Tensor]) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in tensors}


def once(saved: list[Saved], skip: Collection[int] = ()) -> list[Saved]:
    """Each storage once (the first tensor that saved it), those in `skip` left out."""
    seen: dict[int, Saved] = {}
    for item in saved:
        if item.storage not in skip and item.storage not in seen:
            seen[item.storage] = item
    return list(seen.values())


# ------------------------------------------------------------------ packed against padded
PACK_LAYOUTS = ("padded", "packed", "packed-cache", "packed-no-positions")


def _pack_model() -> Any:
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(**PACK_MODEL, attn_implementation="sdpa")
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return LlamaModel(config).train()


def _sorted_bytes(saved: list[Saved], rows: int, seq: int) -> dict[str, int]:
    """Bytes by what they grow with: `tokens` (a dimension is the sequence's length s, or
    the rows' tokens b·s),
    `square` (the last two are s × s: a mask or scores), `other`."""
    parts = {"tokens": 0, "square": 0, "other": 0}
    for item in saved:
        if item.shape[-2:] == (seq, seq):
            parts["square"] += item.nbytes
        elif seq in item.shape or rows * seq in item.shape:  # (b, s, ...) or (b·s, ...)
            parts["tokens"] += item.nbytes
        else:
            parts["other"] += item.nbytes
    return parts


def packing(preset: str) -> list[dict[str, Any]]:
    """A padded batch, the same sequences packed into one row with restarting
    `position_ids` (transformers builds the document mask from them), and packed with the
    positions forgotten (0 to n - 1 across the row): per layout the token slots, the real
    tokens, the bytes saved for backward by what they grow with (weights and buffers left
    out, each storage once), and the largest difference of a document's outputs to the
    document run alone."""
    lengths = PACK_PRESETS[preset]
    dims = set(PACK_MODEL.values()) | {
        PACK_MODEL["hidden_size"] // PACK_MODEL["num_attention_heads"]
    }
    if dims & {max(lengths), sum(lengths)}:
        raise ValueError(f"{preset}: a length equals a model dimension")
    model = _pack_model()
    constant = storages_of([*model.parameters(), *model.buffers()])
    vocab = PACK_MODEL["vocab_size"]
    gen = torch.Generator().manual_seed(1)
    docs = [torch.randint(0, vocab, (n,), generator=gen) for n in lengths]
    with torch.no_grad():
        alone = [model(doc[None], use_cache=False).last_hidden_state[0] for doc in docs]

    def run(layout: str) -> dict[str, Any]:
        longest, total = max(lengths), sum(lengths)
        if layout == "padded":
            ids = torch.zeros(len(lengths), longest, dtype=torch.long)
            mask = torch.zeros(len(lengths), longest, dtype=torch.long)
            for row, doc in enumerate(docs):
                ids[row, : len(doc)], mask[row, : len(doc)] = doc, 1
            kwargs: dict[str, Any] = {"attention_mask": mask, "use_cache": False}
            seq, slots = longest, len(lengths) * longest
        else:
            ids = torch.cat(docs)[None]
            positions = (
                torch.arange(total)
                if layout == "packed-no-positions"
                else torch.cat([torch.arange(n) for n in lengths])
            )
            # the config's use_cache=True (no Trainer, no gradient checkpointing to turn
            # it off) makes a cache, and transformers looks for packed documents only
            # without one
            kwargs = {"position_ids": positions[None]}
            if layout != "packed-cache":
                kwargs["use_cache"] = False
            seq, slots = total, total
        saved, out = saved_while(lambda: model(ids, **kwargs).last_hidden_state)
        hidden = out.detach()
        if layout == "padded":
            got = [hidden[row, :n] for row, n in enumerate(lengths)]
        else:
            starts = [sum(lengths[:i]) for i in range(len(lengths))]
            got = [hidden[0, s : s + n] for s, n in zip(starts, lengths, strict=True)]
        diff = max(float((a - b).abs().max()) for a, b in zip(got, alone, strict=True))
        parts = _sorted_bytes(once(saved, constant), ids.shape[0], seq)
        return {
            "layout": layout,
            "slots": slots,
            "real_tokens": total,
            "seq": seq,
            "rows": ids.shape[0],
            "token_bytes": parts["tokens"],
            "square_bytes": parts["square"],
            "other_bytes": parts["other"],
            "max_diff": diff,
        }

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [run(layout) for layout in PACK_LAYOUTS]


# ------------------------------------------------------------------ autocast's dtypes
_TOKENS, _WIDTH = AUTOCAST_SHAPE
# A small block's ops: the linear on the fp32 residual stream, the others on its 16-bit
# output, as they follow a matmul in a transformer block.
AUTOCAST_OPS = ("linear", "matmul", "layer_norm", "rms_norm", "softmax", "gelu", "cross_entropy")


def _role(item: Saved, params: set[int], inputs: set[int], output: set[int]) -> str:
    if item.storage in params:
        return "weight"
    if item.cast_of is not None:
        return "weight-copy" if item.cast_of in params else "input-copy"
    if item.storage in inputs:
        return "input"
    if item.storage in output:
        return "output"
    return "other"


def autocast_dtypes(dtype: str) -> list[dict[str, Any]]:
    """Under torch.autocast("cpu", dtype), each op of a small block: the dtype of its input
    and output and every tensor it saves for backward (dtype, shape, bytes, and whether
    it is the op's input, its output, a weight's cast or another tensor). The parameters
    and the residual stream are fp32, as mixed precision keeps them; the ops after the
    linear take its 16-bit output."""
    if dtype not in AUTOCAST_DTYPES:
        raise ValueError(f"dtype={dtype!r}: allowed {', '.join(AUTOCAST_DTYPES)}")
    with torch.random.fork_rng():
        torch.manual_seed(0)
        lin = torch.nn.Linear(_WIDTH, _WIDTH)
        x = torch.randn(_TOKENS, _WIDTH, requires_grad=True)
        targets = torch.randint(0, _WIDTH, (_TOKENS,))
    params = storages_of(list(lin.parameters()))
    rows: list[dict[str, Any]] = []
    with torch.autocast("cpu", dtype=getattr(torch, dtype)):
        y = lin(x)
        ops: dict[str, Callable[[], torch.Tensor]] = {
            "linear": lambda: lin(x),
            "matmul": lambda: y @ y.transpose(0, 1),
            "layer_norm": lambda: F.layer_norm(y, (_WIDTH,)),
            "rms_norm": lambda: F.rms_norm(y, (_WIDTH,)),
            "softmax": lambda: F.softmax(y, -1),
            "gelu": lambda: F.gelu(y),
            "cross_entropy": lambda: F.cross_entropy(y, targets),
        }
        for op in AUTOCAST_OPS:
            source = x if op == "linear" else y
            saved, out = saved_while(ops[op])
            inputs, output = storages_of([source]), storages_of([out])
            for item in saved:
                rows.append(
                    {
                        "op": op,
                        "input_dtype": str(source.dtype).removeprefix("torch."),
                        "output_dtype": str(out.dtype).removeprefix("torch."),
                        "role": _role(item, params, inputs, output),
                        "dtype": item.dtype,
                        "shape": list(item.shape),
                        "bytes": item.tensor_bytes,
                    }
                )
    return rows


# ------------------------------------------------------------------ LoRA's saved inputs
LORA_CASES = ("base", "fp32", "fp32-dropout", "same", "same-dropout")


def lora_saved() -> list[dict[str, Any]]:
    """A frozen bf16 linear alone, and PEFT LoRA on it (`get_peft_model`) with fp32
    adapters (PEFT's default autocast_adapter_dtype=True) or adapters in the base's
    dtype, each with lora_dropout 0 and 0.1, on an input that needs its gradient: every
    tensor each saves for backward, sorted into the input itself, a copy of the input's
    shape (the cast or dropout's output), a mask (bool), a weight and other tensors."""
    from peft import LoraConfig, get_peft_model

    rows = []
    for case in LORA_CASES:
        with torch.random.fork_rng():
            torch.manual_seed(0)
            base = torch.nn.Sequential(torch.nn.Linear(LORA_WIDTH, LORA_OUT)).to(torch.bfloat16)
            x = torch.randn(LORA_TOKENS, LORA_WIDTH, dtype=torch.bfloat16, requires_grad=True)
        if case == "base":
            base.requires_grad_(False)
            model = base
        else:
            config = LoraConfig(
                r=LORA_RANK,
                target_modules=["0"],
                lora_dropout=LORA_DROPOUT if case.endswith("dropout") else 0.0,
            )
            model = get_peft_model(base, config, autocast_adapter_dtype=case.startswith("fp32"))
        weights = storages_of(list(model.parameters()))
        saved, _ = saved_while(lambda model=model, x=x: model(x), masks=True)
        for item in saved:
            if item.storage == x.untyped_storage().data_ptr():
                role = "input"
            elif item.storage in weights:
                role = "weight"
            elif item.mask:
                role = "mask"
            elif item.shape == tuple(x.shape):
                role = "copy"
            else:
                role = "other"
            rows.append(
                {
                    "case": case,
                    "role": role,
                    "dtype": item.dtype,
                    "shape": list(item.shape),
                    "numel": item.numel,
                    "bytes": item.tensor_bytes,
                    "width": LORA_WIDTH,
                    "tokens": LORA_TOKENS,
                }
            )
    return rows
