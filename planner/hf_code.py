"""The Hugging Face code for a plan: Trainer arguments and the model-level switch."""

from __future__ import annotations

from i18n import DEFAULT, gettext
from memory.footprint import PlannerInputs
from planner.snippets import comment

# The Hugging Face names the snippets use, as transformers 4.57.1 spells them
# (https://huggingface.co/docs/transformers/v4.57.1/en/main_classes/trainer); transformers
# is not installed here, so a test checks the snippets against this table.
HF_VERSION = "4.57.1"
HF_NAMES: dict[str, frozenset[str]] = {
    "TrainingArguments": frozenset({
        "output_dir", "per_device_train_batch_size", "gradient_accumulation_steps", "bf16",
        "optim", "gradient_checkpointing", "gradient_checkpointing_kwargs", "use_liger_kernel",
        "fsdp"}),
    "optim": frozenset({"adamw_torch", "adamw_bnb_8bit", "sgd"}),
    "gradient_checkpointing_enable": frozenset({"gradient_checkpointing_kwargs"}),
    "BitsAndBytesConfig": frozenset({"load_in_4bit", "bnb_4bit_quant_type",
                                     "bnb_4bit_use_double_quant", "bnb_4bit_compute_dtype"}),
    "fsdp": frozenset({"full_shard", "offload"}),
}
_HF_OPTIM = {"adamw": "adamw_torch", "adamw-8bit": "adamw_bnb_8bit", "sgd-momentum": "sgd"}



def hf_code(p: PlannerInputs, code: str = DEFAULT) -> str:
    """Hugging Face Trainer settings for `p` (its strategy, batch, precision, optimizer...),
    commented in language `code`; the code itself is the same in every language."""
    every = p.strategy == "every-layer"
    lines = ["from transformers import TrainingArguments", ""]
    if p.tuning == "qlora":
        lines[:1] = ["import torch", "from transformers import BitsAndBytesConfig, "
                     "TrainingArguments"]
        lines += [*comment(gettext(code, "For from_pretrained(..., "
                                          "quantization_config=quantization):")),
                  "quantization = BitsAndBytesConfig(",
                  "    load_in_4bit=True,", '    bnb_4bit_quant_type="nf4",',
                  "    bnb_4bit_use_double_quant=True,",
                  "    bnb_4bit_compute_dtype=torch.bfloat16,",
                  ")", ""]
    lines += ["args = TrainingArguments(", '    output_dir="out",',
              f"    per_device_train_batch_size={p.batch},",
              f"    gradient_accumulation_steps={p.accumulation},"]
    if p.precision != "fp32":
        lines.append("    bf16=True,")
    lines.append(f'    optim="{_HF_OPTIM[p.optimizer]}",')
    lines.append(f"    gradient_checkpointing={every},")
    if every:
        lines.append('    gradient_checkpointing_kwargs={"use_reentrant": False},')
    if p.chunked_loss:
        lines.append("    use_liger_kernel=True,  # "
                     + gettext(code, "fused linear + cross-entropy, in chunks"))
    if p.shards > 1:
        lines.append(f'    fsdp="full_shard{" offload" if p.offload else ""}",')
    lines.append(")")
    if every:
        lines += ["", *comment(gettext(code, "or, on the model itself:")),
                  'model.gradient_checkpointing_enable(gradient_checkpointing_kwargs='
                  '{"use_reentrant": False})']
    elif p.strategy != "none":
        lines += ["", *comment(gettext(code, "The Trainer's switch checkpoints every layer; "
                                              "for this setting wrap the decoder layers with "
                                              "the PyTorch code instead."))]
    return "\n".join(lines)
