"""Plain PyTorch code for a plan: a module that runs the decoder layers with the plan's
checkpointing (torch.utils.checkpoint); for selective recomputation of the attention
scores, attention through the fused kernel (torch.nn.functional.scaled_dot_product_attention),
which recomputes them in its backward; for no checkpointing, the layers as they are."""

from __future__ import annotations

from i18n import DEFAULT, N_, gettext, ngettext
from memory.footprint import PlannerInputs
from planner.compiler_code import compiler_code
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


def torch_code(p: PlannerInputs, code: str = DEFAULT) -> str:
    """Plain PyTorch for the strategy of `p`, commented in language `code`; the code
    itself is the same in every language."""
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
            .replace("{imports}", note + "\n")
            .replace("{cls}", "Layers" if p.strategy == "none" else "Checkpointed"))
    if p.strategy == "none":
        head = head.replace("from torch.utils.checkpoint import {names}\n", "")
    head = head.replace("{names}", "checkpoint")
    return head + _TORCH_BODY[p.strategy].replace("{k}", str(k))
