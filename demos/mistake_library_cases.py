"""Cases of the lab of mistakes (demos.mistakes) that today's libraries set up for a
learner who does what their documentation shows: PEFT's 4-bit helper in the reentrant
mode, FSDP's checkpoint wrapper without the RNG state, and a selective-checkpointing
policy under `save_on_cpu`. Each runner measures plain, wrong and fixed on this run.

What the libraries do, read in their installed source:
- peft 0.21.2, `prepare_model_for_kbit_training` (peft/utils/other.py): a missing
  `gradient_checkpointing_kwargs` becomes `{}` and reaches
  `model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={})`; transformers
  5.24 (`_activation_checkpointing_enable`, modeling_utils.py) adds
  `{"use_reentrant": False}` only when the kwargs are None, so torch's `checkpoint` gets no
  `use_reentrant`, warns and runs the reentrant variant (torch/utils/checkpoint.py:
  "use_reentrant = True" when it is None).
- accelerate 1.15 (`fsdp2_apply_ac`, accelerate/utils/fsdp_utils.py) wraps each layer of an
  FSDP2 plan with `fsdp_config["activation_checkpointing"]` as
  `checkpoint_wrapper(layer, preserve_rng_state=False)`. The wrapper is torch's own
  (torch.distributed.algorithms._checkpoint.checkpoint_wrapper) and runs without FSDP, so
  the case measures it in one process on the lab's model with GPT-2's dropout.
- torch 2.13, `_CachingTorchDispatchMode` (torch/utils/checkpoint.py): a selective
  policy's saved outputs go into its own cache (`self.storage`), not through
  `saved_tensors_hooks`, so `save_on_cpu` never sees them and they stay on the device.
"""

from __future__ import annotations

import inspect
import tempfile
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import nn
from torch.autograd.graph import save_on_cpu
from torch.utils._pytree import tree_flatten
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

from demos.mistake_measuring import (
    BlockRunner,
    case_model,
    grads_of,
    max_diff,
    measured,
    model_loss,
    plain_block,
    tracked,
    train_step,
)
from demos.mistake_records import CASE_CONFIG, Measured
from demos.model import make_batch, policy_fn
from demos.tracker import LiveTracker

# ------------------------------------------------------------ PEFT's 4-bit helper

LORA_TARGETS = ["q_proj", "v_proj"]


def _reentrant_checkpoints(loss: torch.Tensor) -> int:
    """How many reentrant checkpoints the step's graph holds: the reentrant variant is an
    autograd Function (CheckpointFunction), the non-reentrant one leaves no node."""
    seen, stack, count = set(), [loss.grad_fn], 0
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        count += type(node).__name__ == "CheckpointFunctionBackward"
        stack.extend(next_node for next_node, _ in node.next_functions)
    return count


def _quantized_llama(folder: str) -> nn.Module:
    import transformers

    quantization = transformers.BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch.float32, quantization_config=quantization)


def run_kbit_reentrant() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    """A tiny random-initialised Llama (nothing downloaded) in bitsandbytes' 4-bit NF4,
    prepared by peft's helper three ways (without checkpointing, with its default, with
    use_reentrant=False), LoRA on top, one training step each."""
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    from model_classes.tiny import build_model, tiny_architecture

    arch = tiny_architecture("llama-3.2-1b", layers=2, vocab=CASE_CONFIG.vocab)
    idx, tgt = make_batch(CASE_CONFIG)
    prepares: list[Callable[[nn.Module], nn.Module]] = [
        partial(prepare_model_for_kbit_training, use_gradient_checkpointing=False),
        prepare_model_for_kbit_training,  # the default: use_gradient_checkpointing=True
        partial(prepare_model_for_kbit_training,
                gradient_checkpointing_kwargs={"use_reentrant": False}),
    ]
    out, plain_grads = [], None
    with tempfile.TemporaryDirectory() as folder:
        torch.manual_seed(CASE_CONFIG.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            build_model(arch, "fp32", "sdpa").save_pretrained(folder)
        for fixed, prepare in enumerate(prepares, start=-2):
            base = _quantized_llama(folder)
            counted: list[int] = []
            said: list[str] = []
            renamed: list[str] = []  # transformers' notes on the methods peft's helper calls

            def step(tracker: LiveTracker, base: nn.Module = base,
                     prepare: Callable[[nn.Module], nn.Module] = prepare,
                     counted: list[int] = counted, said: list[str] = said,
                     renamed: list[str] = renamed) -> torch.Tensor:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    model = prepare(base)
                    torch.manual_seed(CASE_CONFIG.seed)  # the same LoRA weights each run
                    model = get_peft_model(model, LoraConfig(
                        r=4, lora_alpha=8, target_modules=LORA_TARGETS, task_type="CAUSAL_LM"))
                    model.train()
                    result = model(input_ids=idx, labels=tgt, use_cache=False)
                    counted.append(_reentrant_checkpoints(result.loss))
                    tracker.start_backward()
                    result.loss.backward()
                for w in caught:  # each library's words once, in the order they came
                    if str(w.message) not in said:
                        said.append(str(w.message))
                    if issubclass(w.category, DeprecationWarning | FutureWarning):
                        renamed.append(str(w.message))
                return result.loss

            s = tracked(base, step, (idx, tgt))
            # torch's word on the mode first, then the libraries' deprecation notes; the
            # fixed way lists none of those: they are about method names peft's helper
            # calls inside, said whichever way the learner passes the mode (the other two
            # ways list them), and beside "Symptom gone" they read as the fix warning.
            if fixed == 0:
                said = [text for text in said if text not in renamed]
            said.sort(key=lambda text: "use_reentrant" not in text)
            s.warning = "\n".join(said) or None
            grads = {n: (None if p.grad is None else p.grad.detach().clone())
                     for n, p in base.named_parameters() if "lora_" in n}
            plain_grads = plain_grads or grads
            out.append(measured(s, statistic=float(counted[0]) if counted else None,
                                 max_grad_diff=max_diff(grads, plain_grads)))
    return out[0], out[1], out[2], {
        "layers": arch.layers, "hidden": arch.hidden, "heads": arch.heads,
        "kv_heads": arch.kv_heads, "seq_len": CASE_CONFIG.seq_len, "batch": CASE_CONFIG.batch,
        "vocab": arch.vocab, "arch": "llama (transformers, 4-bit NF4, LoRA)"}


def reentrant_shows(m: Measured, plain: Measured) -> bool:
    return (m.statistic or 0) > 0


# ------------------------------------------------ FSDP's wrapper without the RNG state

ACCELERATE_WRAP = "checkpoint_wrapper(layer, preserve_rng_state=False)"


def accelerate_wraps_without_rng() -> bool | None:
    """Whether the installed accelerate's FSDP2 activation checkpointing wraps each layer
    without the RNG state (read from its source); None when accelerate has no such
    function."""
    try:
        from accelerate.utils import fsdp_utils
    except ImportError:
        return None
    apply_ac = getattr(fsdp_utils, "fsdp2_apply_ac", None)
    return None if apply_ac is None else ACCELERATE_WRAP in inspect.getsource(apply_ac)


def run_fsdp_wrapper_rng() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        checkpoint_wrapper,
    )

    cfg = CASE_CONFIG.replace(dropout=0.1)  # GPT-2's default
    model = case_model(cfg)
    idx, tgt = make_batch(cfg)

    def wrapped(preserve: bool) -> BlockRunner:
        wrappers = {id(b): checkpoint_wrapper(b, preserve_rng_state=preserve)
                    for b in model.blocks}
        return lambda block, x: wrappers[id(block)](x)

    out, plain_grads = [], None
    for runner in (plain_block, wrapped(False), wrapped(True)):
        s = tracked(model, train_step(model, idx, tgt, runner), (idx, tgt))
        grads = grads_of(model)
        plain_grads = plain_grads or grads
        out.append(measured(s, max_grad_diff=max_diff(grads, plain_grads)))
    return out[0], out[1], out[2], {**cfg.as_dict(),
                                    "accelerate_wraps_without_rng":
                                        accelerate_wraps_without_rng()}


# ----------------------------------------------- a selective policy under save_on_cpu


class CountingSaveOnCpu(save_on_cpu):
    """torch's save_on_cpu, counting the bytes its pack hook moves (parameters left out:
    they stay on the device whatever the hook does)."""

    def __init__(self, parameters: list[torch.Tensor]) -> None:
        super().__init__(pin_memory=False)
        self.packed_bytes = 0
        weights = {p.untyped_storage().data_ptr() for p in parameters}
        pack = self.pack_hook

        def counting(tensor: torch.Tensor) -> Any:
            if tensor.untyped_storage().data_ptr() not in weights:
                self.packed_bytes += tensor.numel() * tensor.element_size()
            return pack(tensor)

        self.pack_hook = counting


def cached_bytes(storages: list[dict]) -> int:
    """The bytes a selective policy's caches hold (each tensor's storage once)."""
    seen: set[int] = set()
    total = 0
    for storage in storages:
        for per_op in storage.values():
            leaves, _ = tree_flatten(list(per_op.values()))
            for leaf in leaves:
                tensor = getattr(leaf, "val", None)
                if isinstance(tensor, torch.Tensor) and tensor.untyped_storage().data_ptr() \
                        not in seen:
                    seen.add(tensor.untyped_storage().data_ptr())
                    total += tensor.untyped_storage().nbytes()
    return total


def run_selective_offload() -> tuple[Measured, Measured, Measured, dict[str, Any]]:
    cfg = CASE_CONFIG
    model = case_model(cfg)
    idx, tgt = make_batch(cfg)
    storages: list[dict] = []

    def contexts() -> tuple[Any, Any]:
        caching, cached = create_selective_checkpoint_contexts(policy_fn("save-matmuls"))
        storages.append(caching.storage)  # the policy's own cache of saved outputs
        return caching, cached

    def selective(block: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(block, x, use_reentrant=False, context_fn=contexts)

    def whole(block: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(block, x, use_reentrant=False)

    out = []
    for runner in (plain_block, selective, whole):
        storages.clear()
        hooks = CountingSaveOnCpu(list(model.parameters()))
        held: list[int] = []

        def step(tracker: LiveTracker, runner: BlockRunner = runner,
                 hooks: CountingSaveOnCpu = hooks, held: list[int] = held) -> torch.Tensor:
            model.zero_grad(set_to_none=True)
            tracker.set_phase("forward")
            with hooks:
                loss = model_loss(model, idx, tgt, runner)
                held.append(cached_bytes(storages))  # backward empties the caches
                tracker.start_backward()
                loss.backward()
            return loss

        s = tracked(model, step, (idx, tgt))
        out.append(measured(s, offloaded_bytes=hooks.packed_bytes,
                             kept_on_device_bytes=held[0] if held else None))
    return out[0], out[1], out[2], cfg.as_dict()


def device_shows(m: Measured, plain: Measured) -> bool:
    return (m.kept_on_device_bytes or 0) > 0
