"""QLoRA's 4-bit base, built as the libraries build it: bitsandbytes' NF4 through
transformers' quantizer and peft's prepare_model_for_kbit_training, on real data (saved
and loaded back, as a practitioner loads it) or under fake tensors (for full size)."""

from __future__ import annotations

import torch

QLORA_SKIP = ("QLoRA needs bitsandbytes (requirements.txt) for its 4-bit NF4 layers, and it "
              "is not installed in this environment, so QLoRA is not measured here.")


def qlora_available() -> bool:
    """Whether bitsandbytes, QLoRA's 4-bit layers, can be imported here."""
    import importlib.util

    return importlib.util.find_spec("bitsandbytes") is not None


def nf4_config():
    """QLoRA's quantization as the planner's code loads it: 4-bit NF4, double quantization,
    bf16 compute (transformers' BitsAndBytesConfig)."""
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
    (replace_with_bnb_linear); each weight is quantized by bitsandbytes' quantize_4bit,
    whose kernels have fake implementations; the packed weight is held as a plain parameter
    carrying its quant_state (bitsandbytes' Params4bit is a tensor subclass, which cannot
    wrap a fake tensor; Linear4bit's forward reads only the quant_state of it). So each
    frozen 4-bit linear runs Linear4bit.forward and MatMul4Bit as on real data: the input
    cast to the compute dtype, the output cast back to the input's dtype, nothing but the
    packed weight kept for backward; and PEFT wraps it in its own 4-bit LoRA layer.
    prepare_model_for_kbit_training then casts every other 16-bit parameter (embeddings,
    norms, the head) to fp32."""
    import bitsandbytes as bnb
    from peft import prepare_model_for_kbit_training
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from transformers.integrations.bitsandbytes import replace_with_bnb_linear
    from transformers.quantizers.quantizer_bnb_4bit import Bnb4BitHfQuantizer

    config = nf4_config()
    with unset_fake_temporarily():  # on the meta device, as transformers makes them
        # bitsandbytes' double quantization computes its 8-bit code book from data once
        # (functional.name2qmap): made here on a real tensor, as its first real use does
        bnb.functional.quantize_4bit(torch.zeros(64), compress_statistics=True)
        before = dict(model.named_modules())
        skip = Bnb4BitHfQuantizer.get_modules_to_not_convert(
            model, config.llm_int8_skip_modules, model._keep_in_fp32_modules)
        replace_with_bnb_linear(model, modules_to_not_convert=skip, quantization_config=config)
    for name, module in model.named_modules():
        if not isinstance(module, bnb.nn.Linear4bit):
            continue
        source = before[name]
        weight = source.weight.T if module.source_cls.__name__ == "Conv1D" else source.weight
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
