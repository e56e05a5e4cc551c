"""A pasted config.json as a decoder-only causal LM of transformers: the library's config
object, each decoder layer's type (attention kind, dense or MoE MLP), the sliding window,
and the reduced config with as few layers as hold every type, which is what gets built and
measured (model_classes.causal_lm)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from memory.class_layers import DENSE_MLP

if TYPE_CHECKING:  # a type only: the planner words this module's errors without torch
    from model_classes.variant import Variant

# config keys of attention dropout (GPT-2 and the Llama-style configs)
ATTENTION_DROPOUT = ("attn_pdrop", "attention_dropout")


class ClassConfigError(ValueError):
    """A config.json transformers cannot build as a decoder-only causal LM: `problem` (an
    id: no-model-type, unknown, encoder, not-causal, cannot-build, encoder-decoder, multimodal,
    window) and `model_type`, for the page to word; str() is the English line."""

    def __init__(self, problem: str, message: str, model_type: str = "") -> None:
        super().__init__(message)
        self.problem = problem
        self.model_type = model_type



def _text_part(cfg: dict[str, Any]) -> dict[str, Any]:
    """A multimodal config's language model (Gemma 3's text_config): the part trained
    as a causal LM here."""
    text = cfg.get("text_config")
    if isinstance(text, dict) and text.get("model_type"):
        return dict(text)
    return cfg


def hf_config(cfg: dict[str, Any]):
    """The transformers config of a config.json dict; ClassConfigError (one line) when it
    is no decoder-only causal LM transformers builds."""
    from transformers import CONFIG_MAPPING, AutoConfig
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    cfg = _text_part(cfg)
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str):
        raise ClassConfigError("no-model-type", "config.json has no 'model_type'")
    if model_type not in CONFIG_MAPPING:
        raise ClassConfigError("unknown", f"model_type {model_type!r}: transformers 5.24 has "
                               "no such model", model_type)
    if model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES:  # BERT, RoBERTa, BART ...: their
        # causal-LM class is the encoder (or a decoder half) run with is_decoder=True
        raise ClassConfigError("encoder", f"model_type {model_type!r} is an encoder model "
                               "(it has a masked-LM class), not a decoder-only LM", model_type)
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise ClassConfigError("not-causal", f"model_type {model_type!r} is not a decoder-only "
                               "causal LM (transformers has no AutoModelForCausalLM class "
                               "for it)", model_type)
    fields = {k: v for k, v in cfg.items()
              if k not in ("model_type", "architectures", "transformers_version",
                           "torch_dtype", "dtype", "quantization_config")}
    try:
        config = AutoConfig.for_model(model_type, **fields)
    except (TypeError, ValueError, KeyError) as error:
        raise ClassConfigError("cannot-build", f"transformers cannot build {model_type!r} "
                               f"from this config.json: {str(error).splitlines()[0]}",
                               model_type) from None
    if getattr(config, "is_encoder_decoder", False):
        raise ClassConfigError("encoder-decoder", f"model_type {model_type!r} is an "
                               "encoder-decoder model, not a decoder-only LM", model_type)
    causal = causal_class(config)
    if "ConditionalGeneration" in causal.__name__:
        raise ClassConfigError("multimodal", f"model_type {model_type!r} builds "
                               f"{causal.__name__}, not a decoder-only LM", model_type)
    return config


def causal_class(config) -> type:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    return MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]


def kernels(config) -> tuple[str, ...]:
    """The attention kernels the class supports of sdpa and eager (Gemma 2: eager only,
    `_supports_sdpa = False`: SDPA has no soft-capping)."""
    cls = causal_class(config)
    return ("sdpa", "eager") if getattr(cls, "_supports_sdpa", False) else ("eager",)


def layer_types(config) -> tuple[str, ...]:
    """Each decoder layer's type in order: its attention (config.layer_types where the class
    has them: sliding_attention / full_attention ...; else one type) and, in a model that
    mixes dense and MoE layers (dense_layers), DENSE_MLP after a dense layer's."""
    n = int(config.num_hidden_layers)
    types = getattr(config, "layer_types", None)
    if not (isinstance(types, (list, tuple)) and len(types) == n):
        types = ("full_attention",) * n
    dense = dense_layers(config)
    if 0 < len(dense) < n:
        return tuple(str(t) + (DENSE_MLP if i in dense else "") for i, t in enumerate(types))
    return tuple(str(t) for t in types)


def expert_count(config) -> int:
    for key in ("num_experts", "num_local_experts", "n_routed_experts"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return 0


def dense_layers(config) -> set[int]:
    """The decoder layers of an MoE model that run a dense MLP, as the classes read their
    configs: DeepSeek V2/V3 (and GLM-4-MoE) the first `first_k_dense_replace` (transformers
    5.24 reads no `moe_layer_freq`); Qwen2/Qwen3-MoE those in `mlp_only_layers` and those
    off the `decoder_sparse_step` (MoE where (i + 1) % step == 0). Empty for a dense model."""
    n = int(config.num_hidden_layers)
    if not expert_count(config):
        return set()
    first = getattr(config, "first_k_dense_replace", None)
    if isinstance(first, int):
        return set(range(min(max(first, 0), n)))
    if hasattr(config, "mlp_only_layers") or hasattr(config, "decoder_sparse_step"):
        only = set(getattr(config, "mlp_only_layers", None) or ())
        step = int(getattr(config, "decoder_sparse_step", None) or 1)
        return {i for i in range(n) if i in only or (i + 1) % step != 0}
    return set()


def window(config) -> int | None:
    """The sliding window where the class uses one (Mistral v0.1, Gemma 2 and 3's local
    layers, Qwen with use_sliding_window), else None."""
    w = getattr(config, "sliding_window", None)
    if not isinstance(w, int) or w < 1:
        return None
    if getattr(config, "use_sliding_window", True) is False:
        return None
    return w


def reduced_layers(types: tuple[str, ...]) -> tuple[str, ...]:
    """The layer types of the reduced model that is measured: the model's first layers, as
    few as hold every type met after layer 0 at an index ≥ 1 (layer 0 keeps less under
    LoRA without checkpointing: its input needs no gradient), and layer 0's type again at
    index 1 where no later layer has it (DeepSeek-V2-Lite's one dense layer)."""
    if len(types) <= 1:
        return types
    need = set(types[1:])
    n = next((n for n in range(2, len(types) + 1) if set(types[1:n]) >= need), len(types))
    out = types[:n]
    if types[0] not in out[1:]:
        out = (types[0], *out)
    return out



def reduced_config(config, layout: tuple[str, ...] | None, variant: Variant):
    """The config with the decoder layers of `layout` (layer types, reduced_layers; None:
    all of the model's): its attention types in layer_types where the class has them,
    its dense MLPs where the model mixes dense and MoE layers."""
    small = copy.deepcopy(config)
    if layout is not None:
        small.num_hidden_layers = len(layout)
        if getattr(small, "layer_types", None) is not None and len(
                config.layer_types) == config.num_hidden_layers:
            small.layer_types = [t.removesuffix(DENSE_MLP) for t in layout]
        dense = [i for i, t in enumerate(layout) if t.endswith(DENSE_MLP)]
        if isinstance(getattr(small, "first_k_dense_replace", None), int):
            if dense != list(range(len(dense))):
                raise ValueError(f"dense layers {dense} are not the first ones")
            small.first_k_dense_replace = len(dense)
        elif dense_layers(config):
            small.mlp_only_layers = dense
            small.decoder_sparse_step = 1
    if variant.device == "cuda" and variant.kernel == "sdpa":
        for key in ATTENTION_DROPOUT:  # CUDA's flash kernel drops inside the kernel
            if getattr(small, key, 0):
                setattr(small, key, 0.0)
    return small
