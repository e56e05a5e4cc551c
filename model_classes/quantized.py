"""QLoRA's 4-bit base, built as the libraries build it: bitsandbytes' NF4 through
transformers' quantizer (a language model) or diffusers' (a UNet or diffusion
transformer) and peft's prepare_model_for_kbit_training, on real data (saved and loaded
back, as a practitioner loads it) or under fake tensors (for full size)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

QLORA_SKIP = ("QLoRA needs bitsandbytes (requirements.txt) for its 4-bit NF4 layers, and it "
              "is not installed in this environment, so QLoRA is not measured here.")


def qlora_available() -> bool:
    """Whether bitsandbytes, QLoRA's 4-bit layers, can be imported here."""
    import importlib.util

    return importlib.util.find_spec("bitsandbytes") is not None


def nf4_config(library: str = "transformers"):
    """QLoRA's quantization as the planner's code loads it: 4-bit NF4, double quantization,
    bf16 compute (the BitsAndBytesConfig of transformers, or of diffusers: the same
    fields)."""
    if library == "diffusers":
        from diffusers import BitsAndBytesConfig
    else:
        from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                              bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=torch.bfloat16)


def load_in_4bit(model: torch.nn.Module, dtype: torch.dtype, kernel: str) -> torch.nn.Module:
    """QLoRA's base on real data, as the planner's code loads it: the model saved to a
    temporary folder and loaded back in `dtype` with bitsandbytes' 4-bit NF4 (nf4_config),
    then peft's prepare_model_for_kbit_training(use_gradient_checkpointing=False), which
    casts every parameter that is not 4-bit (embeddings, norms, the head) to fp32
    (peft/utils/other.py)."""
    import tempfile
    import warnings

    from peft import prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM

    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(
            folder, dtype=dtype, attn_implementation=kernel, quantization_config=nf4_config())
        return prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)



def quantized_base(model: torch.nn.Module) -> torch.nn.Module:
    """QLoRA's base from a model built under FakeTensorMode: what `from_pretrained(...,
    quantization_config=nf4_config())`  and then peft's
    prepare_model_for_kbit_training do to it, with the libraries' own code. transformers'
    bitsandbytes quantizer picks the linear layers (all but the output head and what the
    class keeps in fp32) and puts bitsandbytes' Linear4bit in their place
    (replace_with_bnb_linear); then _packed_weights."""
    from transformers.integrations.bitsandbytes import replace_with_bnb_linear
    from transformers.quantizers.quantizer_bnb_4bit import Bnb4BitHfQuantizer

    config = nf4_config()

    def replace() -> None:
        skip = Bnb4BitHfQuantizer.get_modules_to_not_convert(
            model, config.llm_int8_skip_modules, model._keep_in_fp32_modules)
        replace_with_bnb_linear(model, modules_to_not_convert=skip, quantization_config=config)

    return _packed_weights(model, replace)


def kept_in_16bit(model: torch.nn.Module) -> list[str]:
    """The modules diffusers' bitsandbytes quantizer leaves unquantized: the class's
    `_keep_in_fp32_modules` (none in the UNet, SD3 and Flux classes of diffusers 0.42.1:
    every nn.Linear of them is quantized; convolutions never are)."""
    return list(getattr(type(model), "_keep_in_fp32_modules", None) or [])


def quantized_diffusers_base(model: torch.nn.Module) -> torch.nn.Module:
    """QLoRA's base of a diffusers model built under FakeTensorMode: what
    `from_pretrained(..., quantization_config=nf4_config("diffusers"))` and peft's
    prepare_model_for_kbit_training do to it: diffusers' own replace_with_bnb_linear
    (diffusers/quantizers/bitsandbytes/utils.py) puts Linear4bit in place of every
    nn.Linear but those the class keeps (kept_in_16bit); then _packed_weights."""
    from diffusers.quantizers.bitsandbytes.utils import replace_with_bnb_linear

    def replace() -> None:
        replace_with_bnb_linear(model, modules_to_not_convert=kept_in_16bit(model),
                                quantization_config=nf4_config("diffusers"))

    return _packed_weights(model, replace)


@contextlib.contextmanager
def diffusers_on_cpu() -> Iterator[None]:
    """diffusers' 4-bit loading on a machine without a GPU: its quantizer refuses one
    ("No GPU found", BnB4BitDiffusersQuantizer.validate_environment) and places the model
    on cuda:0 (update_device_map), though bitsandbytes 0.50 runs NF4 on the CPU. On such a
    machine these two are replaced by the CPU; with a GPU nothing changes."""
    from unittest import mock

    from diffusers.quantizers.bitsandbytes.bnb_quantizer import BnB4BitDiffusersQuantizer

    if torch.cuda.is_available():
        yield
        return
    with mock.patch.object(BnB4BitDiffusersQuantizer, "validate_environment",
                           lambda self, *args, **kwargs: None), \
            mock.patch.object(BnB4BitDiffusersQuantizer, "update_device_map",
                              lambda self, device_map: device_map or {"": "cpu"}):
        yield


def load_diffusers_in_4bit(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """QLoRA's base of a diffusers model on real data, as the planner's code loads it: saved
    to a temporary folder and loaded back in `dtype` with diffusers' BitsAndBytesConfig
    (nf4_config("diffusers")), then peft's prepare_model_for_kbit_training(
    use_gradient_checkpointing=False), as diffusers' Flux QLoRA example does."""
    import tempfile
    import warnings

    from peft import prepare_model_for_kbit_training

    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save_pretrained(folder)
        with diffusers_on_cpu():
            model = type(model).from_pretrained(folder, torch_dtype=dtype,
                                                quantization_config=nf4_config("diffusers"))
        return prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)


def _packed_weights(model: torch.nn.Module, replace) -> torch.nn.Module:
    """After a library's `replace()` put bitsandbytes' Linear4bit in place of the linear
    layers (on the meta device, as the libraries make them), each weight is quantized by
    bitsandbytes' quantize_4bit, whose kernels have fake implementations; the packed weight
    is held as a plain parameter carrying its quant_state (bitsandbytes' Params4bit is a
    tensor subclass, which cannot wrap a fake tensor; Linear4bit's forward reads only the
    quant_state of it). So each frozen 4-bit linear runs Linear4bit.forward and MatMul4Bit
    as on real data: the input cast to the compute dtype, the output cast back to the
    input's dtype, nothing but the packed weight kept for backward; and PEFT wraps it in its
    own 4-bit LoRA layer. prepare_model_for_kbit_training then casts every other 16-bit
    parameter (embeddings, norms, the head, a UNet's convolutions) to fp32."""
    import bitsandbytes as bnb
    from peft import prepare_model_for_kbit_training
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():  # on the meta device, as transformers makes them
        # bitsandbytes' double quantization computes its 8-bit code book from data once
        # (functional.name2qmap): made here on a real tensor, as its first real use does
        bnb.functional.quantize_4bit(torch.zeros(64), compress_statistics=True)
        before = dict(model.named_modules())
        replace()
    for name, module in model.named_modules():
        if not isinstance(module, bnb.nn.Linear4bit):
            continue
        source = before[name]
        source_cls = getattr(module, "source_cls", None)
        weight = source.weight.T if getattr(source_cls, "__name__", "") == "Conv1D" else \
            source.weight
        four = module.weight
        packed, state = bnb.functional.quantize_4bit(
            weight.data.contiguous(), blocksize=four.blocksize,
            compress_statistics=four.compress_statistics, quant_type=four.quant_type,
            quant_storage=four.quant_storage)
        param = torch.nn.Parameter(packed, requires_grad=False)
        for key in ("blocksize", "compress_statistics", "quant_type", "quant_storage"):
            setattr(param, key, getattr(four, key))
        param.quant_state = state
        module.weight = param
        module.quant_state = state
        module.bias = source.bias
    model.is_loaded_in_4bit = True
    return prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
