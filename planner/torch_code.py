"""Plain PyTorch code for a plan: a module that runs the decoder layers with the plan's
checkpointing (torch.utils.checkpoint); for selective recomputation of the attention
scores, attention through the fused kernel (torch.nn.functional.scaled_dot_product_attention),
which recomputes them in its backward; for no checkpointing, the layers as they are. With
the layers, one training step in the plan's precision: under torch.autocast for mixed
precision (and QLoRA in 16-bit), without it for pure bf16 and fp32."""

from __future__ import annotations

from i18n import DEFAULT, N_, gettext, ngettext
from memory.footprint import PlannerInputs
from planner.compiler_code import compiler_code
from planner.hf_code import LIGER_MODEL_TYPES, model_type
from planner.snippets import comment, docstring

_TORCH_HEAD = '''{imports}import torch
from torch import nn
from torch.utils.checkpoint import {names}


class {cls}(nn.Module):
{doc}

    def __init__(self, layers: nn.ModuleList) -> None:
        super().__init__()
        self.layers = layers
'''
_TORCH_DOC = {  # the class's docstring per strategy ("some-layers": a plural, in torch_code)
    "every-layer": N_("Runs `layers` (an nn.ModuleList of decoder layers), checkpointing "
                      "every layer."),
    "two-layer": N_("Runs `layers` (an nn.ModuleList of decoder layers) in checkpointed "
                    "segments of two layers."),
    "none": N_("Runs `layers` (an nn.ModuleList of decoder layers) plainly, without "
               "checkpointing."),
}
_TORCH_BODY = {
    "every-layer": '''
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False)
        return x
''',
    "some-layers": '''
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = checkpoint(layer, x, use_reentrant=False) if i < {k} else layer(x)
        return x
''',
    "two-layer": '''
    def _pair(self, start: int, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[start:start + 2]:
            x = layer(x)
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for start in range(0, len(self.layers), 2):
            x = checkpoint(self._pair, start, x, use_reentrant=False)
        return x
''',
    "none": '''
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x
''',
}


_SELECTIVE = '''import torch
import torch.nn.functional as F


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
{doc}
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
'''


_STEP = {  # one training step in the plan's precision (the planner's rows count these runs)
    "fp32": """

def train_step(model: nn.Module, inputs: torch.Tensor, loss_fn: Callable[..., torch.Tensor],
               optimizer: torch.optim.Optimizer) -> torch.Tensor:
{doc}
    loss = loss_fn(model(inputs))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()
""",
    "mixed": """

def train_step(model: nn.Module, inputs: torch.Tensor, loss_fn: Callable[..., torch.Tensor],
               optimizer: torch.optim.Optimizer) -> torch.Tensor:
{doc}
    with torch.autocast(inputs.device.type, dtype=torch.bfloat16):
        loss = loss_fn(model(inputs))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()
""",
}
_STEP["bf16"] = _STEP["fp32"]
_STEP_DOC = {
    "fp32": N_("One training step in fp32: weights, activations, gradients and the "
               "optimizer's state in 32-bit, no autocast."),
    "mixed": N_("One training step in mixed precision: the weights stay fp32 and the forward "
                "pass and the loss run under torch.autocast in bf16; backward runs outside "
                "it, in the dtypes the forward chose."),
    "bf16": N_("One training step in pure bf16: convert the model once with "
               "model.to(torch.bfloat16), and no torch.autocast here (it would make the "
               "step mixed precision, which keeps some tensors in other dtypes)."),
    # LoRA / QLoRA: PEFT keeps the adapters in fp32 over a 16-bit (or 4-bit) base
    "mixed-adapters": N_("One training step with autocast over a bf16 (or 4-bit) base: "
                         "the adapters stay fp32 (PEFT's default) and the forward pass and "
                         "the loss run under torch.autocast in bf16; backward runs outside "
                         "it, in the dtypes the forward chose."),
    "bf16-adapters": N_("One training step in pure bf16: the base model in bf16 (convert it "
                        "with model.to(torch.bfloat16) before adding the adapters, which "
                        "PEFT keeps in fp32), and no torch.autocast here (it would make the "
                        "step mixed precision, which keeps some tensors in other dtypes)."),
}


LEFT_OUT = {  # the plan's other steps, which this code does not carry: id -> catalog text
    "lora": N_("the LoRA adapters (peft's get_peft_model with a LoraConfig)"),
    "qlora": N_("the 4-bit base and its LoRA adapters (transformers' BitsAndBytesConfig, "
                "peft's prepare_model_for_kbit_training and get_peft_model)"),
    "chunked-loss": N_("the chunked loss (here loss_fn gets the whole logits; the Hugging "
                       "Face code's use_liger_kernel computes them a chunk at a time)"),
    # for a model type Liger Kernel does not patch (hf_code.LIGER_MODEL_TYPES)
    "chunked-loss-no-liger": N_("the chunked loss (here loss_fn gets the whole logits, and "
                                "Liger Kernel, which the Hugging Face code would use, has no "
                                "kernels for this model type: compute the loss a slice of "
                                "positions at a time)"),
    "adamw-8bit": N_("8-bit AdamW (bitsandbytes.optim.AdamW8bit)"),
    "fsdp": N_("the sharding over the GPUs (FSDP)"),
}


def left_out(p: PlannerInputs) -> list[str]:
    """The ids (LEFT_OUT) of what the plan `p` needs beside its checkpointing."""
    out = [p.tuning] if p.tuning in ("lora", "qlora") else []
    if p.chunked_loss:
        out.append("chunked-loss")
    if p.optimizer == "adamw-8bit":
        out.append("adamw-8bit")
    if p.shards > 1:
        out.append("fsdp")
    return out


def _left_out_text(p: PlannerInputs, item: str) -> str:
    """The LEFT_OUT key that describes `item` for the plan `p`'s model type."""
    if item == "chunked-loss" and model_type(p) not in LIGER_MODEL_TYPES:
        return "chunked-loss-no-liger"
    return item


def left_out_note(p: PlannerInputs, code: str = DEFAULT) -> str:
    """Comment lines that say what this code leaves out of the plan, or nothing."""
    items = left_out(p)
    if not items:
        return ""
    text = gettext(code, "This code is the plan's checkpointing only. It leaves out: "
                         "{items}. The Hugging Face code sets them up.",
                   items="; ".join(gettext(code, LEFT_OUT[_left_out_text(p, item)])
                                   for item in items))
    return "\n".join(comment(text)) + "\n"


def torch_code(p: PlannerInputs, code: str = DEFAULT) -> str:
    """Plain PyTorch for the strategy of `p`, commented in language `code`, headed by what
    it leaves out of the plan (left_out_note); the code itself is the same in every
    language."""
    return left_out_note(p, code) + _torch_code(p, code)


def _torch_code(p: PlannerInputs, code: str) -> str:
    if p.strategy == "budget":
        return compiler_code(p, code)
    if p.strategy == "selective":
        doc = gettext(code, "Attention for q, k, v of shape (batch, heads, tokens, head size): "
                            "the fused kernel keeps a log-sum-exp per head and token instead "
                            "of the tokens × tokens scores and recomputes them in backward. "
                            "Use it in each layer instead of softmax(q·kᵀ)·v; no checkpoint "
                            "wrapper is needed.")
        return _SELECTIVE.replace("{doc}", docstring(doc, "    "))
    k = max(0, min(p.arch.layers, p.some_layers))
    doc = (ngettext(code, "Runs `layers` (an nn.ModuleList of decoder layers), checkpointing "
                          "the first {count} layer.",
                    "Runs `layers` (an nn.ModuleList of decoder layers), checkpointing the "
                    "first {count} layers.", k)
           if p.strategy == "some-layers" else gettext(code, _TORCH_DOC[p.strategy]))
    note = "\n".join(comment(gettext(
        code, "For layers called as layer(x), as in your own model; the decoder layers of a "
              "Hugging Face model take more arguments: use the Hugging Face code there.")))
    head = (_TORCH_HEAD.replace("{doc}", docstring(doc, "    "))
            .replace("{imports}", note + "\nfrom collections.abc import Callable\n\n")
            .replace("{cls}", "Layers" if p.strategy == "none" else "Checkpointed"))
    if p.strategy == "none":
        head = head.replace("from torch.utils.checkpoint import {names}\n", "")
    head = head.replace("{names}", "checkpoint")
    # the planner's precision as it counts it: autocast for mixed precision and for QLoRA
    # in 16-bit (memory.footprint.PlannerInputs.autocast), pure bf16 without it
    run = "mixed" if p.autocast else p.precision
    doc_key = run + ("-adapters" if p.tuning != "full" and run != "fp32" else "")
    step = _STEP[run].replace("{doc}", docstring(gettext(code, _STEP_DOC[doc_key]), "    "))
    return head + _TORCH_BODY[p.strategy].replace("{k}", str(k)) + step
