"""The code an image plan prints (planner.picture_plan): the model loaded, LoRA added as
diffusers' training scripts add it (PEFT through `model.add_adapter`) or with PEFT's
get_peft_model for a transformers vision encoder, and the plan's checkpointing switched
on through the library's own switch; the frozen parts of a diffusion pipeline and how
they are frozen; and the command of diffusers' DreamBooth LoRA script for the family,
with only the flags that script has (examples/dreambooth/train_dreambooth_lora*.py).
The code is the same in every language; its comments are in the language `code` each
function takes (catalog messages, as planner.hf_code's).

Checkpointing, as the model kinds switch it (model_classes.diffusion,
model_classes.vision_encoder): diffusers' `enable_gradient_checkpointing()` for every
block, and for every n-th block or the first k its one argument,
`gradient_checkpointing_func`, a function that numbers the blocks in the order the
forward hands them over and checkpoints those it picks; transformers'
`activation_checkpointing_enable` (its older name, gradient_checkpointing_enable,
warns and goes in v6) with `every_n_layers`, the first k by each layer's flag."""

from __future__ import annotations

from typing import Any

from i18n import DEFAULT, N_, gettext, ngettext
from planner import picture_parts as parts
from planner.snippets import comment, docstring

# the diffusers class each frozen part is loaded with, and its folder in the pipeline
PART_CLASSES = {"vae": "AutoencoderKL", "text_encoder": "CLIPTextModel",
                "text_encoder_2": "CLIPTextModelWithProjection",
                "text_encoder_3": "T5EncoderModel"}
SUBFOLDER = {"UNet2DConditionModel": "unet", "SD3Transformer2DModel": "transformer",
             "FluxTransformer2DModel": "transformer"}

PICKER_DOC = N_("diffusers' gradient_checkpointing_func: blocks numbered in the order the "
              "forward hands them over; those picked run under torch's checkpoint, the "
              "others plainly.")
PICKER = '''class PickBlocks:
{doc}

    def __init__(self, picks):
        self.picks, self.order = picks, {}

    def __call__(self, block, *args):
        index = self.order.setdefault(block, len(self.order))
        if self.picks(index):
            return torch.utils.checkpoint.checkpoint(block.__call__, *args,
                                                     use_reentrant=False)
        return block(*args)
'''


def _indices(picked: tuple[int, ...]) -> str:
    """The picked blocks' indices as a Python set literal."""
    return "{" + ", ".join(map(str, picked)) + "}"


def _picks(strategy: str, n: int, k: int, picked: tuple[int, ...] = ()) -> str:
    if strategy == "optimal":
        return f"lambda i: i in {_indices(picked)}"
    return f"lambda i: i % {n} == 0" if strategy == "every-n" else f"lambda i: i < {k}"


def _picker(code: str) -> str:
    return PICKER.replace("{doc}", docstring(gettext(code, PICKER_DOC), "    "))


def _load(cls: str, repo: str | None, subfolder: str | None, config_path: str,
          code: str = DEFAULT) -> str:
    if repo:
        folder = f', subfolder="{subfolder}"' if subfolder else ""
        return f'{cls}.from_pretrained("{repo}"{folder})'
    return (f"{cls}.from_config({cls}.load_config({config_path!r}))  # " + gettext(
        code, "random weights: from_pretrained(<your checkpoint>) to train yours"))


def _quantized_load(cls: str, name: str, repo: str | None, dtype: str, code: str
                    ) -> list[str]:
    """QLoRA's base: diffusers' BitsAndBytesConfig on from_pretrained (4-bit NF4 with
    double-quantized constants, as the planner counts it; the compute in the weight
    dtype), then peft's prepare_model_for_kbit_training, as diffusers' Flux QLoRA example
    loads it."""
    folder = f', subfolder="{SUBFOLDER[cls]}"' if repo and cls in SUBFOLDER else ""
    source = f'"{repo}"' if repo else '"<your checkpoint>"'
    lines = [*comment(gettext(code, "QLoRA: the frozen base in 4-bit NF4 (needs the "
                                    "bitsandbytes package; diffusers loads it on a GPU).")),
             "quantization = BitsAndBytesConfig(", "    load_in_4bit=True,",
             '    bnb_4bit_quant_type="nf4",', "    bnb_4bit_use_double_quant=True,",
             f"    bnb_4bit_compute_dtype={dtype},", ")",
             f"{name} = {cls}.from_pretrained(", f"    {source}{folder},",
             f"    quantization_config=quantization, torch_dtype={dtype},", ")"]
    if not repo:
        lines += comment(gettext(code, "4-bit loading quantizes the weights you train "
                                       "from: name their folder above"))
    return lines + [*comment(gettext(code, "The rest of the base in fp32, all of it frozen; "
                                           "without its own checkpointing: the plan's is "
                                           "switched on below.")),
                    f"{name} = prepare_model_for_kbit_training({name}, "
                    "use_gradient_checkpointing=False)"]


def diffusers_code(settings: dict[str, Any], cfg: dict[str, Any], strategy: str, n: int,
                   k: int, repo: str | None = None, config_path: str = "config.json",
                   targets: list[str] | None = None, code: str = DEFAULT,
                   picked: tuple[int, ...] = ()) -> str:
    """The trained model of a diffusers pipeline, with LoRA (QLoRA: over a 4-bit base) and
    checkpointing (`picked`: the blocks "optimal" checkpoints), commented in the language
    `code`."""
    cls = cfg["_class_name"]
    name = SUBFOLDER.get(cls, "model")
    qlora = settings["tuning"] == "qlora"
    lines = ["import torch", "import torch.utils.checkpoint",
             f"from diffusers import {'BitsAndBytesConfig, ' if qlora else ''}{cls}"]
    lora = settings["tuning"] in ("lora", "qlora")
    if lora:
        lines.append("from peft import LoraConfig" + (
            ", prepare_model_for_kbit_training" if qlora else ""))
    dtype = "torch.float32" if settings["precision"] == "fp32" else "torch.bfloat16"
    lines.append("")
    if qlora:
        lines += _quantized_load(cls, name, repo, dtype, code)
    else:
        lines.append(f"{name} = {_load(cls, repo, SUBFOLDER.get(cls), config_path, code)}")
    if lora:
        if not qlora:
            lines += [f"{name}.requires_grad_(False)  # " + gettext(
                          code, "the base stays frozen"),
                      f"{name}.to(dtype={dtype})  # " + gettext(
                          code, "the frozen base in the weight dtype")]
        lines += [f"{name}.add_adapter(LoraConfig(r={settings['lora_rank']}, "
                  f"lora_alpha={settings['lora_rank']}, init_lora_weights=\"gaussian\",",
                  f"    target_modules={targets!r}))"]
        if settings["precision"] != "fp32" and (qlora or settings["precision"] == "mixed"):
            lines += ["for p in " + name + ".parameters():  # " + gettext(
                code, "the adapters train in fp32"),
                      "    if p.requires_grad:", "        p.data = p.data.float()"]
    elif settings["precision"] == "bf16":
        lines.append(f"{name}.to(dtype=torch.bfloat16)")
    lines.append(f"{name}.train()")
    if strategy == "every-layer":
        lines.append(f"{name}.enable_gradient_checkpointing()  # " + gettext(
            code, "every block"))
    elif strategy in ("every-n", "first-k", "optimal"):
        which = (gettext(code, "every n-th block, n = {n}", n=n) if strategy == "every-n"
                 else ngettext(code, "the first block", "the first {count} blocks", k)
                 if strategy == "first-k" else
                 gettext(code, "the blocks that recompute the fewest FLOPs within the budget"))
        lines += ["", _picker(code).rstrip(), "",
                  f"{name}.enable_gradient_checkpointing(  # {which}",
                  "    gradient_checkpointing_func=PickBlocks("
                  f"{_picks(strategy, n, k, picked)}))"]
    else:
        lines.append("# " + gettext(code, "no checkpointing: {name} keeps every block's "
                                    "activations", name=name))
    return "\n".join(lines) + "\n"


def pipeline_code(cfg: dict[str, Any], precision: str, encoders: str,
                  repo: str | None, code: str = DEFAULT) -> str:
    """The frozen parts of the pipeline, loaded and frozen (or, cached, freed once the
    latents and prompt embeddings are made)."""
    fam = parts.family(cfg)
    if fam is None:
        return ""
    where = repo or "<your pipeline>"
    weight = "torch.float32" if precision == "fp32" else "torch.bfloat16"
    loads = []
    for part in fam.parts:
        cls = PART_CLASSES[part.id]
        if part.id == "text_encoder_2" and "bigG" not in part.label:
            cls = "T5EncoderModel"
        if part.id == "text_encoder" and fam is parts.SD3:
            cls = "CLIPTextModelWithProjection"
        loads.append((part, cls))
    texts = sorted({cls for part, cls in loads if part.id != "vae"})
    lines = ["import torch", "from diffusers import AutoencoderKL",
             f"from transformers import {', '.join(texts)}", ""]
    for part, cls in loads:
        dtype = "torch.float32" if part.fp32 else weight
        lines += [f'{part.id} = {cls}.from_pretrained("{where}", subfolder="{part.id}")',
                  f"{part.id}.requires_grad_(False)",
                  f'{part.id}.to("cuda", dtype={dtype})']
    if encoders == "cached":
        lines += ["# " + gettext(code, "encode every image and prompt once, then free the "
                                 "encoders:"),
                  "# del vae, " + ", ".join(p.id for p in fam.parts if p.id != "vae")
                  + "; torch.cuda.empty_cache()"]
    return "\n".join(lines) + "\n"


def script_command(settings: dict[str, Any], cfg: dict[str, Any], strategy: str,
                   repo: str | None, targets: list[str], code: str = DEFAULT) -> str:
    """accelerate launch of diffusers' DreamBooth LoRA script for the family (its flags
    only); "" where none fits the plan (full fine-tuning, QLoRA, whose 4-bit loading the
    SDXL, SD3 and Flux.1 scripts do not offer, a vision encoder)."""
    fam = parts.family(cfg)
    if fam is None or settings["tuning"] != "lora":
        return ""
    precision = {"fp32": "no", "mixed": "bf16", "bf16": "bf16"}[settings["precision"]]
    flags = [f"--pretrained_model_name_or_path={repo or '<your pipeline>'}",
             "--instance_data_dir=<your images>", '--instance_prompt="<your prompt>"',
             "--output_dir=lora-out", f"--resolution={settings['resolution']}",
             f"--train_batch_size={settings['batch']}", f"--rank={settings['lora_rank']}",
             f"--mixed_precision={precision}"]
    if strategy != "none":
        flags.append("--gradient_checkpointing")
    if settings["optimizer"] == "adamw-8bit":
        flags.append("--use_8bit_adam")
    if fam in (parts.SD3, parts.FLUX):
        # the names as the plan's LoraConfig has them (PEFT matches each as a suffix:
        # SD3.5's second attention, attn2, too)
        flags.append(f'--lora_layers="{",".join(targets)}"')
        if settings["encoders"] == "cached":
            flags.append("--cache_latents")
    lines = [f"accelerate launch {fam.script} \\"]
    lines += [f"  {flag} \\" for flag in flags[:-1]] + [f"  {flags[-1]}"]
    notes = []
    if strategy in ("every-n", "first-k", "optimal"):
        notes += comment(gettext(code, "the script's --gradient_checkpointing checkpoints "
                                       "every block: more saved than the plan needs, more "
                                       "recomputed"))
    if settings["precision"] == "bf16":
        notes += comment(gettext(code, "the script trains the adapters in fp32 (mixed "
                                       "precision), not pure bf16"))
    if settings["optimizer"] == "sgd-momentum":
        notes += comment(gettext(code, "the script's optimizer is AdamW or Prodigy "
                                       "(--optimizer): SGD with momentum, as planned, needs "
                                       "a training loop of your own"))
    return "\n".join(notes + lines) + "\n"


def vision_code(settings: dict[str, Any], cfg: dict[str, Any], strategy: str, n: int,
                k: int, repo: str | None = None, config_path: str = "config.json",
                targets: list[str] | str | None = None, cls: str = "ViTModel",
                code: str = DEFAULT, picked: tuple[int, ...] = ()) -> str:
    """A transformers vision encoder (`cls`: the class measured, a dual encoder's vision
    tower for a SigLIP or CLIP config) with PEFT LoRA and its checkpointing (`picked`: the
    layers "optimal" checkpoints), commented in the language `code`."""
    lines = ["import torch", f"from transformers import {cls}"]
    lora = settings["tuning"] == "lora"
    if lora:
        lines.append("from peft import LoraConfig, get_peft_model")
    dtype = "torch.float32" if settings["precision"] == "fp32" else "torch.bfloat16"
    if settings["precision"] == "mixed" and not lora:
        dtype = "torch.float32"  # autocast over fp32 weights
    lines.append("")
    if repo:
        lines.append(f'model = {cls}.from_pretrained("{repo}", dtype={dtype})')
    else:
        lines += [f"model = {cls}({cls}.config_class.from_pretrained({config_path!r}))"
                  "  # " + gettext(code, "random weights:"),
                  "# " + gettext(code, "{cls}.from_pretrained(<yours>) to train yours",
                                 cls=cls),
                  f"model.to(dtype={dtype})"]
    if strategy != "none":
        every = f", every_n_layers={n}" if strategy == "every-n" else ""
        lines += ["# " + gettext(code, "(transformers before 5: {call})",
                                 call="gradient_checkpointing_enable("
                                      "gradient_checkpointing_kwargs=...)"),
                  "model.activation_checkpointing_enable(activation_checkpointing_kwargs="
                  f'{{"use_reentrant": False}}{every})']
        layers = ["from transformers.modeling_layers import GradientCheckpointingLayer",
                  "layers = [m for m in model.modules() "
                  "if isinstance(m, GradientCheckpointingLayer)]"]
        if strategy == "first-k":
            lines += [*layers,
                      f"for layer in layers[{k}:]:  # " + ngettext(
                          code, "the first layer only", "the first {count} layers only", k),
                      "    layer.gradient_checkpointing = False"]
        elif strategy == "optimal":
            lines += [*layers,
                      "for i, layer in enumerate(layers):  # " + gettext(
                          code, "the layers that recompute the fewest FLOPs within the "
                                "budget"),
                      f"    layer.gradient_checkpointing = i in {_indices(picked)}"]
    if lora:
        lines.append(f"model = get_peft_model(model, LoraConfig(r={settings['lora_rank']}, "
                     f"target_modules={targets!r}))")
    lines += ["model.train()", *comment(gettext(
        code, "at a side other than the config's image_size, call the model with "
              "interpolate_pos_encoding=True"))]
    return "\n".join(lines) + "\n"
