"""One training step's forward of an image model (a diffusers UNet or diffusion
transformer, a transformers vision encoder) and what autograd saves for backward in it,
per checkpointable block: the image kinds' side of model_classes.saved_step, whose ledger
counts each storage once, parameters apart, and converts the CPU's terms to a GPU's.

Where a storage belongs, decided when it is first saved, then settled once the forward
is over:
* inside a block (one of the kind's checkpointable blocks): that block, and the innermost
  module running in it (forward pre/post hooks on every module of the model); a LoRA
  module's own tensors are kind "lora";
* a tensor handed to exactly one block as an argument is that block's input (kind
  "input") when it was saved outside every block: a checkpoint saves its arguments just
  before the block runs (torch.utils.checkpoint's _NoopSaveInputs), and diffusers
  checkpoints a block's `__call__` (ModelMixin.enable_gradient_checkpointing), so the
  block's own hooks run inside the checkpoint, after that save;
* a tensor handed to two blocks or more (a UNet's time embedding, its text embeddings,
  a DiT's rotary embedding) was made outside them: block -1, module "shared", kind
  "shared";
* what a checkpoint holds without saving it: torch's non-reentrant checkpoint saves the
  tensors among its positional arguments (through the hooks) but keeps the others by
  reference in its recomputation's closure until backward (a tuple such as Flux's rotary
  cos and sin, a keyword argument); each tensor handed to a block that ran checkpointed
  is counted as kept, as above (module "checkpoint" for a block's own). A block ran
  checkpointed when, inside it, the saved-tensor hooks on top were not the ledger's
  (torch's private `_top_saved_tensors_default_hooks`; without it, nothing is added);
* anything else saved outside the blocks: block -1, the module's path in the model
  ("down_blocks.1.downsamplers.0.conv", "conv_in", "time_embedding.linear_1"), kind
  "other"; after the model returned, the loss: module "loss", kind "loss".
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Callable, Iterator

import torch

from model_classes.saved_step import SavedLedger, Step, storage_key


def _tensors(values: object) -> Iterator[torch.Tensor]:
    """The tensors in a block's arguments (tuples, lists and dicts opened)."""
    if isinstance(values, torch.Tensor):
        yield values
    elif isinstance(values, (tuple, list)):
        for v in values:
            yield from _tensors(v)
    elif isinstance(values, dict):
        for v in values.values():
            yield from _tensors(v)


@contextlib.contextmanager
def _marks(model: torch.nn.Module, blocks: list[torch.nn.Module], state: dict,
           ledger: SavedLedger) -> Iterator[None]:
    """Hooks on every module: the block running and the innermost module's name (relative
    to its block; the path in the model outside the blocks), and each block's arguments."""
    index = {id(b): i for i, b in enumerate(blocks)}
    top = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)
    names: dict[int, tuple[int | None, str]] = {}
    for i, block in enumerate(blocks):
        for sub_name, sub in block.named_modules():
            names[id(sub)] = (i, sub_name)
    for path, module in model.named_modules():
        names.setdefault(id(module), (None, path))

    def pre(module, args, kwargs):
        i, name = names[id(module)]
        if id(module) in index:
            state["block"] = i
            for t in _tensors((args, kwargs)):
                key = storage_key(t)
                state["args"][key].add(i)
                state["handed"][i][key] = t.untyped_storage().nbytes()
                # the storage, not the tensor: its key stays its own to the step's end,
                # and a tensor nothing else holds still dies with its graph branch
                ledger.hold.append(t.untyped_storage())
        if i is not None and top is not None and i not in state["checkpointed"]:
            hooks = top(False)
            if hooks is not None and hooks[0] != ledger.pack:
                state["checkpointed"].add(i)  # inside a checkpoint's own hooks
        state["stack"].append(name)

    def post(module, args, kwargs, output):
        if state["stack"]:
            state["stack"].pop()
        if id(module) in index:
            state["block"] = None

    handles = []
    for module in model.modules():
        handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(module.register_forward_hook(post, with_kwargs=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _settle(ledger: SavedLedger, state: dict) -> None:
    """A block's arguments as its input, those of several blocks as shared, and what a
    checkpoint holds by reference (see the module's docstring)."""
    receivers: dict[int, set[int]] = state["args"]
    for i in sorted(state["checkpointed"]):
        handed = state["handed"][i]
        saved = [key for key in handed if key in ledger.refs]
        if saved and not any(ledger.alive(key) for key in saved):
            continue  # nothing after it needs a gradient: the checkpoint died in forward
        for key, nbytes in handed.items():
            if key not in ledger.seen and key not in ledger.params and nbytes:
                ledger.add(key, (i, "checkpoint", "input"), nbytes)
    for key, (slot, module, _kind, nbytes) in list(ledger.seen.items()):
        blocks = receivers.get(key)  # type: ignore[call-overload]
        if not blocks:
            continue
        if len(blocks) > 1:
            ledger.seen[key] = (-1, "shared", "shared", nbytes)
        elif slot < 0:
            ledger.seen[key] = (next(iter(blocks)), "", "input", nbytes)
        elif slot in blocks:
            ledger.seen[key] = (slot, module, "input", nbytes)


def saved_step(model: torch.nn.Module, blocks: list[torch.nn.Module],
               forward: Callable[[Callable[[], None]], torch.Tensor], autocast: bool = False
               ) -> tuple[Step, torch.Tensor]:
    """Run `forward(loss_begins)` (the model's call and its loss, as a training script
    writes them; it calls `loss_begins()` once the model has returned) with every saved
    tensor counted; (what it keeps per block, module and kind; the loss, whose backward the
    caller may run)."""
    state: dict = {"block": None, "stack": [], "args": defaultdict(set), "loss": False,
                   "handed": defaultdict(dict), "checkpointed": set()}

    def where(t: torch.Tensor, key: int) -> tuple[int, str, str]:
        if state["loss"]:
            return -1, "loss", "loss"
        module = state["stack"][-1] if state["stack"] else ""
        if state["block"] is None:
            return -1, module, "other"
        return state["block"], module, "lora" if "lora_" in module else "other"

    def loss_begins() -> None:
        state["loss"] = True

    ledger = SavedLedger(model, where)
    cast = (torch.autocast("cpu", dtype=torch.bfloat16) if autocast
            else contextlib.nullcontext())
    with ledger.hooked(), cast, _marks(model, blocks, state, ledger):
        loss = forward(loss_begins)
    _settle(ledger, state)
    return ledger.step(loss.grad_fn, autocast), loss
