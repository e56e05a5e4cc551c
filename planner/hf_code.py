"""The Hugging Face code for a plan: one script that loads the model, applies every step of
the plan (quantisation, PEFT adapters, checkpointing of the plan's layers, the optimizer,
the chunked loss, FSDP) and trains it with the Trainer.

Names as transformers 5.24.0, peft 0.21.2 and accelerate 1.15.0 spell them (checked
against the installed sources, cited beside each choice below; the tests run the printed
code on tiny random-init models of each family):
* `activation_checkpointing_enable(activation_checkpointing_kwargs=..., every_n_layers=...,
  offload=...)` and the Trainer's `activation_checkpointing` / `activation_checkpointing_
  kwargs` (transformers/modeling_utils.py, training_args.py; the `gradient_checkpointing*`
  names are deprecated aliases that warn and go in v6; the default is use_reentrant=False).
* "Only some layers": the library's own flag, `gradient_checkpointing` on each
  `GradientCheckpointingLayer` (transformers/modeling_layers.py), switched off after the
  first k; never `checkpoint(layer, x)` on a decoder layer, which needs more arguments.
* FSDP: `fsdp=True` with `fsdp_config` wrapping each decoder layer
  (`auto_wrap_policy="TRANSFORMER_BASED_WRAP"`, `transformer_layer_cls_to_wrap`), and the
  model's own checkpointing (`activation_checkpointing_enable()`, inside each FSDP unit;
  FSDP2's pre-forward hook leaves the unshard to the pre-backward one while a layer is
  recomputed, torch/distributed/fsdp/_fully_shard/_fsdp_state.py), not
  `fsdp_config["activation_checkpointing"]`: accelerate 1.15 applies that as
  `checkpoint_wrapper(layer, preserve_rng_state=False)` (utils/fsdp_utils.py,
  fsdp2_apply_ac), so a dropout draws other masks when backward recomputes it.
* SGD with momentum: `optim="sgd"` with `optim_args="momentum=0.9"`
  (transformers/trainer_optimizer.py, _get_sgd; without it torch's SGD has no momentum).
* Precision: `bf16=True` is autocast (training_args.py: mixed_precision="bf16", which
  accelerate runs as torch.autocast), so it is printed exactly for the plans the planner
  counts under autocast: mixed precision (fp32 weights; a bf16 base under LoRA) and QLoRA
  in 16-bit. Pure bf16 loads `dtype=torch.bfloat16` without it. PEFT keeps the adapters
  fp32 either way (get_peft_model's autocast_adapter_dtype=True).
* The chunked loss: `use_liger_kernel=True` (Liger Kernel's fused linear + cross-entropy;
  the package `liger-kernel`, Triton kernels for a GPU), only for the model types Liger
  patches (LIGER_MODEL_TYPES). For any other type liger-kernel leaves the model as it is
  and says so only at the info log level (liger_kernel/transformers/monkey_patch.py,
  _apply_liger_kernel_to_instance, 0.8.5), so the code says that instead.
* Loading under FSDP: transformers 5.24's `from_pretrained` reads the whole checkpoint in
  every process that calls it (modeling_utils.py, _load_pretrained_model), about 282 GB of
  host memory per process for a 70B model in fp32. So only the first process calls it;
  the others build the model with accelerate's `init_empty_weights` (parameters on the
  meta device, buffers real), and `fsdp_config["cpu_ram_efficient_loading"]` makes
  accelerate 1.15 broadcast the first process's weights when the Trainer shards the model
  (utils/fsdp_utils.py, fsdp2_prepare_model and fsdp2_load_full_state_dict). Not for
  QLoRA: accelerate skips that path for 4-bit weights.
* More GPUs than a node holds (GPUS_PER_NODE): the launch line is multi-node, one
  `accelerate launch` per node with `--num_machines`, `--machine_rank`,
  `--main_process_ip` (accelerate/utils/launch.py turns them into torchrun's --nnodes,
  --node_rank and rendezvous endpoint), or torchrun itself.
"""

from __future__ import annotations

import math

from i18n import DEFAULT, gettext
from memory.footprint import PlannerInputs
from planner.snippets import comment

HF_VERSION = "5.24.0"
PEFT_VERSION = "0.21.2"
ACCELERATE_VERSION = "1.15.0"

# The decoder layer class of each family (transformers/models/<family>/modeling_<family>.py)
DECODER_LAYERS = {"gpt2": "GPT2Block", "llama": "LlamaDecoderLayer",
                  "mistral": "MistralDecoderLayer", "qwen2": "Qwen2DecoderLayer",
                  "gemma": "GemmaDecoderLayer", "gemma2": "Gemma2DecoderLayer"}
# The model types Liger Kernel patches (liger-kernel 0.8.5, the keys of
# MODEL_TYPE_TO_APPLY_LIGER_FN in liger_kernel/transformers/monkey_patch.py; among the
# families above, gpt2 is not one of them)
LIGER_MODEL_TYPES = frozenset({
    "deepseek_v2", "deepseek_v3", "deepseek_v4", "exaone4", "falcon_h1", "gemma", "gemma2",
    "gemma3", "gemma3_text", "gemma4", "gemma4_text", "glm4", "glm4v", "glm4v_moe", "gpt_oss",
    "granite", "hunyuan_v1_dense", "hunyuan_v1_moe", "internvl", "llama", "llama4",
    "llama4_text", "llava", "ministral", "mistral", "mixtral", "mllama", "mllama_text_model",
    "muse_glimmer", "nemotron", "olmo2", "olmo3", "paligemma", "phi3", "pixtral", "qwen2",
    "qwen2_5_vl", "qwen2_5_vl_text", "qwen2_vl", "qwen2_vl_text", "qwen3", "qwen3_5",
    "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_5_text", "qwen3_moe", "qwen3_next", "qwen3_vl",
    "qwen3_vl_moe", "qwen3_vl_moe_text", "qwen3_vl_text", "smollm3", "smolvlm"})
# LoRA targets by the module names of each layer kind (PEFT matches a name's last parts)
LORA_MODULES = {
    ("gpt", "attention"): ["attn.c_attn", "attn.c_proj"],
    ("llama", "attention"): ["q_proj", "k_proj", "v_proj", "o_proj"],
}
OPTIM = {"adamw": 'optim="adamw_torch",', "adamw-8bit": 'optim="adamw_8bit",',
         "sgd-momentum": 'optim="sgd",\n    optim_args="momentum=0.9",',
         "sgd": 'optim="sgd",'}
# What the Trainer names each optimizer (the test checks the optimizer it builds)
OPTIM_NAMES = {"adamw": "adamw_torch", "adamw-8bit": "adamw_8bit", "sgd-momentum": "sgd",
               "sgd": "sgd"}
GPUS_PER_NODE = 8  # an 8-GPU server (HGX / DGX): a plan with more GPUs spans nodes
MAIN_PORT = 29500  # accelerate's and torchrun's default rendezvous port


def nodes(p: PlannerInputs) -> int:
    """The machines a plan's GPUs take, GPUS_PER_NODE each."""
    return max(1, math.ceil(p.shards / GPUS_PER_NODE))


def launch_lines(p: PlannerInputs, code: str = DEFAULT) -> list[str]:
    """How to start the script: one `accelerate launch` on one machine, or on each of
    several (the first's address as MAIN_IP, each its NODE_RANK), or torchrun there.
    Sentences, and commands (indented, their lines continued with a backslash)."""
    count, machines = p.shards, nodes(p)
    if machines == 1:
        return [gettext(code, "launch with: accelerate launch --num_processes {count} "
                              "train.py", count=count)]
    per = count // machines
    return [gettext(code, "{nodes} nodes of {per} GPUs: on each, with NODE_RANK 0 on the "
                          "first and 1, 2 ... on the others, MAIN_IP the first's address:",
                    nodes=machines, per=per),
            f"  accelerate launch --num_machines {machines} --num_processes {count} \\\n"
            f"    --machine_rank $NODE_RANK --main_process_ip $MAIN_IP \\\n"
            f"    --main_process_port {MAIN_PORT} train.py",
            gettext(code, "or with torchrun:"),
            f"  torchrun --nnodes {machines} --nproc_per_node {per} \\\n"
            f"    --node_rank $NODE_RANK --master_addr $MAIN_IP --master_port {MAIN_PORT} "
            f"train.py"]


def model_id(p: PlannerInputs) -> str:
    """The Hub id of a preset (from its config.json address), else a placeholder."""
    source = p.arch.source.split()[0] if p.arch.source else ""
    prefix = "https://huggingface.co/"
    if source.startswith(prefix) and "/blob/" in source:
        return source[len(prefix):].split("/blob/")[0]
    return "path/to/your-model"


def model_type(p: PlannerInputs) -> str:
    """The plan's Hugging Face model_type (its family, or the kind's reference family)."""
    return p.arch.family or ("gpt2" if p.arch.kind == "gpt" else "llama")


def _import(module: str, names: list[str]) -> str:
    line = f"from {module} import {', '.join(names)}"
    if len(line) <= 88:
        return line
    return "\n".join([f"from {module} import (", *(f"    {n}," for n in names), ")"])


def hf_code(p: PlannerInputs, code: str = DEFAULT) -> str:
    """The script for the settings `p` (its strategy, tuning, GPUs, batch, precision,
    optimizer, loss), commented in language `code`; the code is the same in every
    language."""
    lora = p.tuning in ("lora", "qlora")
    qlora = p.tuning == "qlora"
    fsdp = p.shards > 1
    k = max(0, min(p.arch.layers, p.some_layers))
    strategy = p.strategy
    if strategy == "some-layers" and k >= p.arch.layers:
        strategy = "every-layer"
    # FSDP plans switch the model's own checkpointing on too (see the module docstring)
    model_level = strategy == "some-layers" or (fsdp and strategy == "every-layer")
    trainer_level = strategy == "every-layer" and not fsdp
    sixteen = p.precision == "bf16" or (lora and p.precision != "fp32")
    # The Trainer's bf16=True is autocast (training_args.py: mixed_precision="bf16", which
    # accelerate runs as torch.autocast); the planner's p.autocast says when it counts that:
    # mixed precision (full fine-tuning over fp32 weights, LoRA over a bf16 base) and QLoRA
    # in 16-bit (its non-4-bit parameters are fp32 after prepare_model_for_kbit_training, so
    # there is no pure-bf16 QLoRA). Pure bf16 ("bf16") loads bf16 weights, without autocast.
    autocast = p.autocast
    dtype = "torch.bfloat16" if sixteen else "torch.float32"
    attention = "sdpa" if p.fused or strategy == "selective" else "eager"
    if "sdpa" not in getattr(p.source, "kernels", ("sdpa",)):
        attention = "eager"  # the class has no SDPA (Gemma 2: soft-capping)

    first_loads = fsdp and not qlora  # only the first process reads the checkpoint
    imports = ["import torch"] + (["from accelerate import init_empty_weights"]
                                  if first_loads else [])
    peft_names = ["LoraConfig", "get_peft_model"] + (["prepare_model_for_kbit_training"]
                                                     if qlora else [])
    if lora:
        imports.append(_import("peft", peft_names))
    names = (["AutoConfig"] if first_loads else []) + ["AutoModelForCausalLM"] + (
        ["BitsAndBytesConfig"] if qlora else []) + (
        ["GradientCheckpointingLayer"] if strategy == "some-layers" else []) + [
        "Trainer", "TrainingArguments"]
    imports.append(_import("transformers", names))
    lines = [*imports, ""]

    if qlora:
        lines += [*comment(gettext(code, "QLoRA: the frozen base in 4-bit NF4 (needs the "
                                         "bitsandbytes package; 0.50.2 runs it on the CPU "
                                         "too).")),
                  "quantization = BitsAndBytesConfig(",
                  "    load_in_4bit=True,", '    bnb_4bit_quant_type="nf4",',
                  "    bnb_4bit_use_double_quant=True,",
                  "    bnb_4bit_compute_dtype=torch.bfloat16,"]
        if fsdp:  # FSDP shards flat tensors of one dtype: the 4-bit weights stored as bf16
            lines.append("    bnb_4bit_quant_storage=torch.bfloat16,  # " + gettext(
                code, "so that FSDP can shard the 4-bit weights"))
        lines.append(")")
    note = (gettext(code, "a fused kernel: it recomputes the attention scores in backward")
            if strategy == "selective" else "")
    kwargs = [f"dtype={dtype},",
              f'attn_implementation="{attention}",' + (f"  # {note}" if note else "")]
    if qlora:
        kwargs.append("quantization_config=quantization,")
    load = ["model = AutoModelForCausalLM.from_pretrained(", f'    "{model_id(p)}",',
            *(f"    {k}" for k in kwargs), ")"]
    if first_loads:
        lines += ["# MODEL",
                  *comment(gettext(code, "Only the first of the {count} processes reads the "
                                         "weights (host memory for one copy, not {count}); "
                                         "the others build the model without them and get "
                                         "the first one's when the Trainer shards it "
                                         "(cpu_ram_efficient_loading above).",
                                   count=p.shards)),
                  "if args.process_index == 0:", *(f"    {line}" for line in load),
                  "else:",
                  "    with init_empty_weights():  # " + gettext(
                      code, "parameters on the meta device, buffers as the model makes them"),
                  "        model = AutoModelForCausalLM.from_config(",
                  f'            AutoConfig.from_pretrained("{model_id(p)}"),',
                  *(f"            {k}" for k in kwargs), "        )",
                  *comment(gettext(code, "uninitialised host memory for each parameter (no "
                                         "RAM until written), for the first process's "
                                         "weights to land in; then the tied ones (input "
                                         "and output embeddings) tied again"), "    "),
                  "    empty = {}",
                  "    for module in model.modules():",
                  "        for name, param in module.named_parameters(recurse=False):",
                  "            if id(param) not in empty:",
                  "                empty[id(param)] = torch.nn.Parameter(",
                  '                    torch.empty_like(param, device="cpu"), '
                  "param.requires_grad)",
                  "            module.register_parameter(name, empty[id(param)])",
                  "    model.tie_weights()"]
    else:
        lines += load
    if qlora:
        lines += [*comment(gettext(code, "Without its own checkpointing: the plan's is "
                                         "switched on below.")),
                  "model = prepare_model_for_kbit_training(model, "
                  "use_gradient_checkpointing=False)"]
    if lora:
        names = (getattr(p.source, "attention_modules", None)  # a measured class's own
                 or LORA_MODULES[(p.arch.kind, "attention")])
        targets = ('"all-linear"' if p.lora_targets == "all-linear" else
                   repr(names).replace("'", '"'))
        lines += ["", "model = get_peft_model(model, LoraConfig(",
                  f"    r={p.lora_rank},", f"    lora_alpha={2 * p.lora_rank},",
                  f"    target_modules={targets},", '    task_type="CAUSAL_LM",', "))"]
    if model_level:
        lines.append("")
        if fsdp:
            lines += comment(gettext(
                code, "With FSDP too, and not fsdp_config's activation_checkpointing: "
                      "accelerate applies that as checkpoint_wrapper(layer, "
                      "preserve_rng_state=False), and a dropout would draw other masks when "
                      "backward recomputes a layer."))
        lines += [*comment(gettext(code, "Checkpointing on the model itself "
                                         "(use_reentrant=False is the default):")),
                  "model.activation_checkpointing_enable()"]
        if strategy == "some-layers":
            lines += [*comment(gettext(code, "only the first {count} decoder layers: switch "
                                             "the others back off", count=k)),
                      "layers = [m for m in model.modules() "
                      "if isinstance(m, GradientCheckpointingLayer)]",
                      f"for layer in layers[{k}:]:",
                      "    layer.gradient_checkpointing = False"]
    model_end = len(lines)
    lines += ["", "args = TrainingArguments(", '    output_dir="out",',
              f"    per_device_train_batch_size={p.batch},",
              f"    gradient_accumulation_steps={p.accumulation},"]
    if autocast:
        lines.append("    bf16=True,  # " + gettext(code, "the step under torch.autocast "
                                                       "(bf16 compute)"))
    elif p.precision == "bf16":
        lines += comment(gettext(code, "No bf16=True: the weights are loaded in bf16; "
                                       "bf16=True would also run the step under "
                                       "torch.autocast, which keeps other tensors for "
                                       "backward than this plan counts."), "    ")
    lines.append("    " + OPTIM[p.optimizer])
    if trainer_level:
        lines += ["    activation_checkpointing=True,",
                  '    activation_checkpointing_kwargs={"use_reentrant": False},']
    else:
        lines.append("    activation_checkpointing=False,  # " + (
            (gettext(code, "set on the model below") if first_loads else
             gettext(code, "set on the model above")) if model_level else
            gettext(code, "not in the Trainer: see the PyTorch code")
            if strategy in ("two-layer", "budget") else
            gettext(code, "not needed: it fits without")))
    if p.chunked_loss and model_type(p) in LIGER_MODEL_TYPES:
        lines.append("    use_liger_kernel=True,  # " + gettext(
            code, "fused linear + cross-entropy in chunks (pip install liger-kernel)"))
    elif p.chunked_loss:
        lines += comment(gettext(code, "The plan's chunked loss: Liger Kernel has no kernels "
                                       "for {family} models, and use_liger_kernel=True would "
                                       "leave the loss as it is. Compute the loss a slice of "
                                       "positions at a time in your own training loop.",
                                 family=model_type(p)), "    ")
    if fsdp:
        layer = DECODER_LAYERS.get(model_type(p))
        lines += [*comment(gettext(code, "FSDP over {count} GPUs, each decoder layer its own "
                                         "unit;", count=p.shards), "    "),
                  *(out for line in launch_lines(p, code)
                    for out in (comment(line, "    ") if not line.startswith("  ")
                                else [f"    # {part}" for part in line.split("\n")])),
                  "    fsdp=True,", "    fsdp_config={", '        "version": 2,',
                  '        "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",']
        if layer:
            lines.append(f'        "transformer_layer_cls_to_wrap": ["{layer}"],')
        if p.offload:
            lines.append('        "cpu_offload": True,')
        if first_loads:
            lines.append('        "cpu_ram_efficient_loading": True,  # ' + gettext(
                code, "the first process's weights, broadcast"))
        lines.append("    },")
    lines.append(")")
    if first_loads:  # the arguments first: they start the processes' group the model asks
        model_start = lines.index("# MODEL")
        lines = (lines[:model_start] + lines[model_end + 1:] + [""]
                 + lines[model_start + 1:model_end] + [""])
    lines += ["trainer = Trainer(model=model, args=args, train_dataset=train_dataset)",
              "trainer.train()"]
    return "\n".join(lines)
