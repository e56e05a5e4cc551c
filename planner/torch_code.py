"""Plain PyTorch code for a plan: a module that runs the decoder layers with the plan's
checkpointing (torch.utils.checkpoint), including a selective-checkpointing policy."""

from __future__ import annotations

from i18n import DEFAULT, N_, gettext, ngettext
from memory.footprint import PlannerInputs
from planner.compiler_code import compiler_code
from planner.snippets import docstring

_TORCH_HEAD = '''{imports}import torch
from torch import nn
from torch.utils.checkpoint import {names}


class Checkpointed(nn.Module):
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
    "selective": N_("Runs `layers` (an nn.ModuleList of decoder layers), keeping the matmul "
                    "and fused-attention outputs and recomputing the rest."),
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
    "selective": '''
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False, context_fn=CONTEXT)
        return x


aten = torch.ops.aten
SAVE = {  # {save}
    aten.mm.default, aten.addmm.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_cudnn_attention.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
}


def policy(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    return CheckpointPolicy.MUST_SAVE if op in SAVE else CheckpointPolicy.PREFER_RECOMPUTE


CONTEXT = partial(create_selective_checkpoint_contexts, policy)
''',
    "none": '''
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x
''',
}


def torch_code(p: PlannerInputs, code: str = DEFAULT) -> str:
    """Plain PyTorch for the strategy of `p`, commented in language `code`; the code
    itself is the same in every language."""
    if p.strategy == "budget":
        return compiler_code(p, code)
    k = max(0, min(p.arch.layers, p.some_layers))
    doc = (ngettext(code, "Runs `layers` (an nn.ModuleList of decoder layers), checkpointing "
                          "the first {count} layer.",
                    "Runs `layers` (an nn.ModuleList of decoder layers), checkpointing the "
                    "first {count} layers.", k)
           if p.strategy == "some-layers" else gettext(code, _TORCH_DOC[p.strategy]))
    selective = p.strategy == "selective"
    head = (_TORCH_HEAD.replace("{doc}", docstring(doc, "    "))
            .replace("{imports}", "from functools import partial\n\n" if selective else "")
            .replace("{names}", "(\n    CheckpointPolicy,\n    checkpoint,\n"
                     "    create_selective_checkpoint_contexts,\n)" if selective else "checkpoint"))
    save = gettext(code, "the linear layers' matmuls and the fused attention kernels")
    return head + _TORCH_BODY[p.strategy].replace("{k}", str(k)).replace("{save}", save)
