"""What autograd saves for backward in one step's forward, counted storage by storage, for
every model kind (model_classes.kinds): the record a measured step returns (`Step`), the
ledger a kind's measurement fills through torch's saved_tensors_hooks (`SavedLedger`) and
the conversion of the CPU's terms into a GPU's (`gpu_rules`, `SavedLedger.step`).

The ledger counts each storage once (views of it are the same storage), parameters and
buffers apart (and autocast's 16-bit copy of a trainable weight, which a plan counts with
the weights), and asks the kind where a storage belongs (its block, the module inside it,
its kind) the first time it is saved. A storage saved by a branch of the graph that died
before backward (a discarded output) is dropped: it is kept for backward only while a
tensor autograd holds for it is alive. Runs on real tensors or under a FakeTensorMode.

CPU against GPU, per saved tensor, read off the autograd graph (the causal LM's docstring,
model_classes.causal_lm_step, says why each differs):
* dropout masks: 1 byte per number on CUDA, the input's dtype on the CPU;
* LayerNorm's mean and 1/std: fp32 on CUDA, the input's dtype on the CPU;
* SDPA's log-sum-exp: CUDA's memory-efficient kernel (fp32 inputs or a mask) pads it to
  32 tokens (`padded`);
* softmax under autocast: fp32 on CUDA (and the 16-bit cast a later op saves besides).
"""

from __future__ import annotations

import contextlib
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from unittest import mock

import torch

from memory.saved_weights import VIEW_NODES, is_weight_copy

# a select of a weight copy (a fused projection's slice) is the copy too
_VIEWS = VIEW_NODES | {"SelectBackward0"}

# (block index, -1 outside the blocks; module; kind) of a storage saved for the first time
Where = tuple[int, str, str]


def storage_key(t: torch.Tensor) -> int:
    """A storage's identity while it lives (two views of one storage share it)."""
    return t.untyped_storage()._cdata


@dataclass
class Step:
    """Bytes per (block index, module, kind, padded): cpu as measured, gpu as a GPU keeps
    them. Block -1 is outside every block (module "outside" for the causal LM; the
    module's path in the model for the image kinds)."""

    cpu: dict[tuple, int] = field(default_factory=lambda: defaultdict(int))
    gpu: dict[tuple, int] = field(default_factory=lambda: defaultdict(int))

    def per_block(self, blocks: int, device: str = "cpu") -> list[int]:
        """Bytes each of `blocks` blocks keeps (outside the blocks left out)."""
        out = [0] * blocks
        for (slot, *_), nbytes in (self.cpu if device == "cpu" else self.gpu).items():
            if 0 <= slot < blocks:
                out[slot] += nbytes
        return out

    def outside(self, device: str = "cpu") -> int:
        """Bytes kept outside every block."""
        return sum(n for (slot, *_), n in (self.cpu if device == "cpu" else self.gpu).items()
                   if slot < 0)


class SavedLedger:
    """The storages one forward saves for backward. `where(tensor, key)` names a storage's
    block, module and kind when it is first saved; `hooked()` is the context the forward
    runs in; `step(root, autocast)` the bytes, once the loss is computed."""

    def __init__(self, model: torch.nn.Module, where: Callable[[torch.Tensor, int], Where]
                 ) -> None:
        # the parameters' storages, held to the step's end: bitsandbytes' Linear4bit swaps
        # a bias for a cast of it during the step, and a freed address goes to the next one
        self._held = [p.untyped_storage() for p in [*model.parameters(), *model.buffers()]]
        self.params = {s._cdata for s in self._held}
        self.where = where
        self.seen: dict[object, tuple[int, str, str, int]] = {}
        self.packs: dict[object, int] = defaultdict(int)  # how many saves of each storage
        self.masks: dict[object, int] = {}  # dropout masks the CPU keeps as floats: numbers
        # each storage's saved tensors, weakly: autograd holds what pack returns for as long
        # as the node that saved it lives, so a storage is kept while one of them is alive
        self.refs: dict[object, list[weakref.ref]] = {}
        self.in_dropout = False
        # tensors whose storages a kind's `where` remembers, held to the step's end: a
        # storage's key is its address, which a freed storage hands on to the next one
        self.hold: list[torch.Tensor] = []

    def alive(self, key: object) -> bool:
        return any(ref() is not None for ref in self.refs.get(key, ()))

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        key = storage_key(t)
        if key in self.seen and not self.alive(key):
            # a storage saved by a branch of the graph that nothing used (a router's top-k
            # values, a discarded output) was freed with it and lent this one its address
            for table in (self.seen, self.masks, self.packs, self.refs):
                table.pop(key, None)
        self.packs[key] += 1
        if key in self.params:
            return t
        if key in self.seen:
            self.refs[key].append(weakref.ref(t))
            return t
        if is_weight_copy(t, _VIEWS):  # autocast's 16-bit weight copy: counted with the
            self.params.add(key)  # weights (mixed precision's 6 bytes per parameter)
            return t
        nbytes = t.untyped_storage().nbytes()
        if not nbytes:
            return t
        slot, module, kind = self.where(t, key)
        self.seen[key] = (slot, module, kind, nbytes)
        self.refs[key] = [weakref.ref(t)]
        if self.in_dropout and not t.requires_grad and t.is_floating_point():
            # the CPU's dropout keeps its mask in the input's dtype (input * mask / (1 - p))
            self.masks[key] = nbytes // t.element_size()
        return t

    def add(self, key: object, where: Where, nbytes: int) -> None:
        """An entry no saved tensor stands for (kept whatever dies)."""
        self.seen[key] = (*where, nbytes)

    @contextlib.contextmanager
    def hooked(self) -> Iterator[None]:
        """The forward's context: every saved tensor through `pack`, dropout marked."""
        dropout = torch.nn.functional.dropout

        def marked_dropout(*args, **kwargs):
            self.in_dropout = True
            try:
                return dropout(*args, **kwargs)
            finally:
                self.in_dropout = False

        with torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t), \
                mock.patch.object(torch.nn.functional, "dropout", marked_dropout):
            yield

    def step(self, root: torch.autograd.graph.Node | None, autocast: bool = False) -> Step:
        """The bytes kept for backward, per (block, module, kind, padded), on the CPU and
        as a GPU keeps them (the rules read off the graph from `root`, the loss's node)."""
        rules = gpu_rules(root, autocast)
        step = Step()
        for key, (slot, module, kind, nbytes) in self.seen.items():
            if key in self.refs and not self.alive(key):
                continue  # freed before backward: its graph branch died in forward
            gpu, padded = nbytes, False
            if key in self.masks:  # CUDA's native_dropout keeps a bool mask
                gpu = self.masks[key]
            rule = rules.get(key)  # type: ignore[arg-type]
            if rule is not None:
                name, _shape, size = rule
                numel = nbytes // size
                if name == "mask":
                    gpu = numel
                elif name == "stats":
                    gpu = numel * 4
                elif name == "softmax":  # fp32 on CUDA, and cast back for a later op
                    gpu = numel * 4 + (nbytes if self.packs[key] > 1 else 0)
                elif name == "lse-pad":
                    padded = True
                if name.startswith("lse"):
                    kind = "lse"
            step.cpu[(slot, module, kind, False)] += nbytes
            step.gpu[(slot, module, kind, padded)] += gpu
        self.close()
        return step

    def close(self) -> None:
        """Let go of the tensors held for their keys. Every tensor saved through `pack`
        keeps a reference to it (and so to this ledger) until backward frees it: what the
        ledger held would otherwise live that long too."""
        self.hold.clear()
        self.refs.clear()


def _packed(node: torch.autograd.graph.Node, attr: str) -> torch.Tensor | None:
    """A node's saved tensor as its pack hook left it, without unpacking it: a tensor a
    checkpoint saved is a placeholder there (torch.utils.checkpoint's _Holder), and
    unpacking it would run the checkpointed segment again and hold what it rebuilds until
    backward. None for those, and for a tensor the node did not save."""
    raw = getattr(node, "_raw" + attr, None)
    if raw is None:
        return None
    try:
        data = raw.data
    except RuntimeError:  # an optional tensor the node did not save
        return None
    return data if isinstance(data, torch.Tensor) else None


def gpu_rules(root: torch.autograd.graph.Node | None, autocast: bool = False
              ) -> dict[int, tuple[str, tuple[int, ...], int]]:
    """Storage -> (rule, shape, element size) for the saved tensors CUDA keeps otherwise
    (see the module's docstring), read off the autograd graph from `root`; `autocast`:
    the step ran under autocast."""
    rules: dict[int, tuple[str, tuple[int, ...], int]] = {}
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        name = type(node).__name__
        picks: list[tuple[str, str]] = []
        if name == "NativeDropoutBackward0":
            picks = [("_saved_result1", "mask")]
        elif name == "NativeLayerNormBackward0":
            picks = [("_saved_result1", "stats"), ("_saved_result2", "stats")]
        elif name == "SoftmaxBackward0" and autocast:
            picks = [("_saved_result", "softmax")]
        elif name.startswith("ScaledDotProduct") and "Attention" in name:
            masked = getattr(node, "_saved_attn_mask", None) is not None
            query = _packed(node, "_saved_query")
            wide = isinstance(query, torch.Tensor) and query.dtype == torch.float32
            picks = [("_saved_logsumexp", "lse-pad" if masked or wide else "lse")]
        for attr, rule in picks:
            t = _packed(node, attr)
            if rule == "softmax" and isinstance(t, torch.Tensor) and t.element_size() > 2:
                continue  # softmax(dtype=float32): fp32 on both
            if isinstance(t, torch.Tensor):
                rules[storage_key(t)] = (rule, tuple(t.shape), t.element_size())
        stack.extend(fn for fn, _ in node.next_functions)
    return rules
