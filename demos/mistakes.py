"""The lab of mistakes: the classic ways gradient checkpointing goes wrong, each run twice
on the lab's own model (the wrong way and the fixed way) beside a plain run, and measured
on this run: live bytes at the peak (demos.tracker.LiveTracker), counted FLOPs, which
parameters got no gradient, the largest gradient difference to the plain run, a running
statistic, and the text of the warning or error torch raised. No Streamlit.

What torch does is checked against torch 2.13's torch/utils/checkpoint.py:
- `check_backward_validity` warns "None of the inputs have requires_grad=True. Gradients
  will be None" when a reentrant checkpoint (`CheckpointFunction.forward`) gets no input
  that needs a gradient; it runs the function under `torch.no_grad()`, so nothing inside
  is recorded and the parameters inside get no gradient.
- `preserve_rng_state=False` skips `torch.random.fork_rng` around the recomputation, so a
  dropout inside draws new masks in backward.
- `_checkpoint_without_reentrant_generator` returns at once when grad mode is off
  ("if not torch.is_grad_enabled(): yield; return"): nothing is saved, nothing recomputed.
- `_CheckpointFrame.check_recomputed_tensors_match` raises `CheckpointError` when the
  recomputation saves a different number of tensors, or tensors with other shapes, dtypes
  or devices, than the forward did (the determinism check, `determinism_check="default"`).
- Non-reentrant checkpointing stops recomputing once every saved tensor is rebuilt
  (`early_stop=True`), so a side effect placed after the last saved op may not repeat.

The cases of today's libraries are demos.mistake_library_cases; those of image-model
training (sampling with checkpointing on, a flag never applied, a frozen encoder),
measured on the lab's tiny diffusers and transformers models, demos.mistake_picture_cases.
"""

from __future__ import annotations

import torch

from demos.mistake_cases import (
    differ_shows,
    error_shows,
    none_shows,
    run_batchnorm,
    run_dropout_rng,
    run_frozen_inputs,
    run_hf_cache,
    run_mismatch,
    run_no_grad,
    run_not_activations,
    run_side_effects,
    run_whole_model,
    state_shows,
    statistic_shows,
    warning_shows,
    whole_model_shows,
)
from demos.mistake_library_cases import (
    device_shows,
    reentrant_shows,
    run_fsdp_wrapper_rng,
    run_kbit_reentrant,
    run_selective_offload,
)
from demos.mistake_picture_cases import (
    flag_shows,
    frozen_shows,
    run_flag_not_applied,
    run_frozen_encoder,
    run_sampling,
    sampling_shows,
)
from demos.mistake_records import (
    CASE_CONFIG,
    PEAK_TOLERANCE,
    STATE_CONFIG,
    SYMPTOM_TITLES,
    Case,
    CaseResult,
    Measured,
    Statistic,
    Symptom,
)
from i18n import N_

__all__ = [
    "CASES", "CASE_CONFIG", "PEAK_TOLERANCE", "STATE_CONFIG", "SYMPTOM_TITLES", "Case",
    "CaseResult", "Measured", "Statistic", "Symptom", "cases_for", "run_case", "run_cases",
]

S = Symptom
CASES: dict[str, Case] = {c.id: c for c in [
    Case("whole-model-one-segment", frozenset({S.PEAK_DID_NOT_DROP, S.SLOWER}),
         N_("The whole model as one segment"),
         N_("Backward rebuilds every activation of the segment at once, so the peak is the "
            "plain run's, and a whole extra forward is paid on top."),
         N_("Checkpoint each layer (or short runs of layers), not the whole stack."),
         "loss = checkpoint(model, idx, targets, use_reentrant=False)",
         "for block in blocks:\n    x = checkpoint(block, x, use_reentrant=False)",
         "how-many", run_whole_model, whole_model_shows, estimate_s=0.5),
    Case("reentrant-frozen-inputs", frozenset({S.GRADIENTS_NONE, S.WARNING}),
         N_("Reentrant checkpoint with inputs that need no gradient"),
         N_("The reentrant variant runs the layer under no_grad and builds its graph only "
            "from inputs that need a gradient; with a frozen embedding there is none, so the "
            "layers' weights get no gradient."),
         N_("Pass use_reentrant=False (or make the inputs require a gradient: "
            "enable_input_require_grads() in Hugging Face)."),
         "model.tok.requires_grad_(False)\nx = checkpoint(block, x, use_reentrant=True)",
         "model.tok.requires_grad_(False)\nx = checkpoint(block, x, use_reentrant=False)",
         "in-practice", run_frozen_inputs, none_shows, estimate_s=0.12),
    Case("dropout-without-rng", frozenset({S.RESULTS_DIFFER}),
         N_("Dropout without the RNG state"),
         N_("Without the saved random state the recomputation draws new dropout masks, so "
            "backward differentiates a different network than the forward ran."),
         N_("Keep the default preserve_rng_state=True."),
         "checkpoint(block, x, use_reentrant=False, preserve_rng_state=False)",
         "checkpoint(block, x, use_reentrant=False)",
         "cost-and-correctness", run_dropout_rng, differ_shows, estimate_s=0.18),
    Case("batchnorm-in-checkpoint", frozenset({S.RESULTS_DIFFER}),
         N_("Batch norm inside a checkpoint in training mode"),
         N_("The recomputation runs the batch norm again in training mode, so its running "
            "statistics are updated twice per step."),
         N_("Keep the batch norm outside the checkpointed function (or use LayerNorm)."),
         "x = checkpoint(block_with_batchnorm, x, use_reentrant=False)",
         "y = checkpoint(block.fc, x, use_reentrant=False)\nx = x + F.gelu(block.bn(y))",
         "cost-and-correctness", run_batchnorm, statistic_shows, Statistic.BATCHNORM_UPDATES,
         estimate_s=0.07),
    Case("side-effects-twice", frozenset({S.RESULTS_DIFFER}),
         N_("Side effects inside a checkpointed function"),
         N_("Everything the function does runs again in backward: a counter counts twice "
            "and an auxiliary loss is appended to the list twice."),
         N_("Do side effects outside the checkpointed function, or return the value from "
            "it."),
         "def fn(x):\n    calls += 1; aux.append(x.pow(2).mean())\n    return block(x)\n"
         "x = checkpoint(fn, x, use_reentrant=False)",
         "calls += 1; aux.append(x.pow(2).mean())\n"
         "x = checkpoint(block, x, use_reentrant=False)",
         "cost-and-correctness", run_side_effects, statistic_shows, Statistic.SIDE_EFFECTS,
         estimate_s=0.17),
    Case("activations-not-the-problem", frozenset({S.PEAK_DID_NOT_DROP}),
         N_("Activations are not the problem"),
         N_("Here weights, gradients and the optimizer's two moments set the peak; "
            "checkpointing only shrinks activations, which are a small part of it."),
         N_("Shrink what sets the peak: train fewer parameters (adapters, frozen embedding "
            "and head), a lighter optimizer state, or lower precision."),
         "for block in blocks:\n    x = checkpoint(block, x, use_reentrant=False)",
         "model.tok.weight.requires_grad_(False)\nmodel.head.weight.requires_grad_(False)",
         "why-memory", run_not_activations, state_shows, estimate_s=0.32),
    Case("no-grad-or-eval", frozenset({S.WARNING, S.PEAK_DID_NOT_DROP}),
         N_("Checkpointing under no_grad, as in evaluation"),
         N_("Without autograd nothing is saved for a backward, so there is nothing to "
            "save memory on; the reentrant variant warns that gradients will be None. Eval "
            "mode alone changes nothing for torch's checkpoint (Hugging Face's layers skip "
            "checkpointing in eval mode themselves)."),
         N_("Checkpoint only when training: if self.training and torch.is_grad_enabled()."),
         "model.eval()\nwith torch.no_grad():\n    x = checkpoint(block, x, use_reentrant=True)",
         "if block.training and torch.is_grad_enabled():\n"
         "    x = checkpoint(block, x, use_reentrant=True)\nelse:\n    x = block(x)",
         "cost-and-correctness", run_no_grad, warning_shows, estimate_s=0.05),
    Case("recompute-mismatch", frozenset({S.WARNING}),
         N_("Recomputation that does not match"),
         N_("A setting that decides a shape changed between the forward and backward, so "
            "the recomputation saved tensors of other shapes and torch's determinism check "
            "stopped the backward."),
         N_("Change such settings only after backward, or pass them into the checkpointed "
            "function as arguments."),
         "loss = model(x)\nmodel.keep += 8  # before backward\nloss.backward()",
         "loss = model(x)\nloss.backward()\nmodel.keep += 8",
         "how-it-works", run_mismatch, error_shows, estimate_s=0.12),
    Case("use-cache-with-checkpointing", frozenset({S.WARNING}),
         N_("use_cache=True with checkpointing in Hugging Face"),
         N_("A key/value cache only speeds up generation; in training with checkpointing "
            "the library switches it off and says so, and without checkpointing it holds "
            "the keys and values of every layer for nothing."),
         N_("Set model.config.use_cache = False for training (turn it back on to "
            "generate)."),
         "model.activation_checkpointing_enable()\nmodel(input_ids, labels=labels, "
         "use_cache=True)",
         "model.config.use_cache = False\nmodel.activation_checkpointing_enable()\n"
         "model(input_ids, labels=labels)",
         "in-practice", run_hf_cache, warning_shows, Statistic.CACHED_TOKENS, estimate_s=0.4),
    Case("peft-kbit-reentrant", frozenset({S.WARNING}),
         N_("PEFT's 4-bit helper turns on the reentrant mode"),
         N_("prepare_model_for_kbit_training(model) passes gradient_checkpointing_kwargs={} "
            "to the model, and transformers adds use_reentrant=False only when it gets "
            "none at all, so torch's checkpoint runs its older reentrant variant and warns."),
         N_("Pass gradient_checkpointing_kwargs={\"use_reentrant\": False} to "
            "prepare_model_for_kbit_training (or use_gradient_checkpointing=False, and "
            "switch checkpointing on yourself)."),
         "model = AutoModelForCausalLM.from_pretrained(\n    name, quantization_config="
         "BitsAndBytesConfig(load_in_4bit=True))\n"
         "model = prepare_model_for_kbit_training(model)\n"
         "model = get_peft_model(model, lora_config)",
         "model = AutoModelForCausalLM.from_pretrained(\n    name, quantization_config="
         "BitsAndBytesConfig(load_in_4bit=True))\n"
         "model = prepare_model_for_kbit_training(\n"
         "    model, gradient_checkpointing_kwargs={\"use_reentrant\": False})\n"
         "model = get_peft_model(model, lora_config)",
         "in-practice", run_kbit_reentrant, reentrant_shows, Statistic.REENTRANT_CHECKPOINTS,
         estimate_s=1.5),
    Case("fsdp-checkpoint-wrapper-rng", frozenset({S.RESULTS_DIFFER}),
         N_("FSDP's activation checkpointing without the RNG state"),
         N_("With fsdp_config's activation_checkpointing, accelerate wraps each layer as "
            "checkpoint_wrapper(layer, preserve_rng_state=False), so dropout draws new "
            "masks in the recomputation and the gradients differ from the plain run. "
            "Measured here in one process, on the lab's model with dropout 0.1, with "
            "torch's own checkpoint_wrapper, which runs without FSDP."),
         N_("Leave fsdp_config's activation_checkpointing off and switch on the model's "
            "own (model.activation_checkpointing_enable() keeps the RNG state), or wrap "
            "the layers yourself with checkpoint_wrapper(layer)."),
         "# what accelerate does for fsdp_config={\"activation_checkpointing\": True}\n"
         "layer = checkpoint_wrapper(layer, preserve_rng_state=False)",
         "layer = checkpoint_wrapper(layer)  # preserve_rng_state=True by default\n"
         "# with the Trainer: model.activation_checkpointing_enable()",
         "in-practice", run_fsdp_wrapper_rng, differ_shows, estimate_s=0.18),
    Case("selective-under-save-on-cpu", frozenset({S.PEAK_DID_NOT_DROP}),
         N_("A selective policy under save_on_cpu"),
         N_("A selective policy keeps the outputs it saves in its own cache, which does not "
            "go through saved_tensors_hooks: save_on_cpu never sees them, and they stay in "
            "device memory. Only the checkpoint's inputs reach the host."),
         N_("Under save_on_cpu, checkpoint whole layers (their inputs go through the "
            "hooks), or count what the policy saves as device memory; from torch 2.14, "
            "checkpoint(..., respect_saved_tensors_hooks=True) sends it through the hooks."),
         "with save_on_cpu():\n    x = checkpoint(block, x, use_reentrant=False,\n"
         "                   context_fn=partial(create_selective_checkpoint_contexts,\n"
         "                                      save_matmuls))",
         "with save_on_cpu():\n    x = checkpoint(block, x, use_reentrant=False)",
         "in-practice", run_selective_offload, device_shows, estimate_s=0.15),
    Case("checkpointing-while-sampling", frozenset({S.PEAK_DID_NOT_DROP}),
         N_("Checkpointing left on while sampling for validation"),
         N_("A pipeline samples under no_grad, and there torch's checkpoint just runs the "
            "function (diffusers does not even call it): nothing is saved for a backward, "
            "so there is nothing to save memory on, and nothing is recomputed either. The "
            "peak and the counted FLOPs are the plain sampling's."),
         N_("Leave it on, it costs nothing there; to lower sampling memory, sample fewer "
            "images at once (or in 16-bit, or with the VAE tiled)."),
         "unet.enable_gradient_checkpointing()  # left on from training\n"
         "with torch.no_grad():  # as a pipeline samples\n"
         "    for t in timesteps:  # four images at once\n"
         "        latents = step(unet(latents, t, text).sample, latents)",
         "with torch.no_grad():\n"
         "    for one in latents.split(1):  # one image at a time\n"
         "        for t in timesteps:\n"
         "            one = step(unet(one, t, text).sample, one)",
         "image-models", run_sampling, sampling_shows, Statistic.CHECKPOINTING_FLAGS,
         estimate_s=2.5),
    Case("checkpointing-flag-not-applied", frozenset({S.PEAK_DID_NOT_DROP}),
         N_("A checkpointing flag parsed but never applied"),
         N_("The script reads --gradient_checkpointing but never calls the model's "
            "switch, so every block keeps its activations, and nothing warns. The bytes "
            "saved for backward show it: they do not drop, and the model's own flag "
            "(unet.is_gradient_checkpointing) is False."),
         N_("Apply the flag to the model you train (if args.gradient_checkpointing: "
            "unet.enable_gradient_checkpointing()), then check unet.is_gradient_"
            "checkpointing, or that the bytes saved for backward drop."),
         'parser.add_argument("--gradient_checkpointing", action="store_true")\n'
         "args = parser.parse_args()\n"
         "unet = UNet2DConditionModel.from_pretrained(name, subfolder=\"unet\")\n"
         "# args.gradient_checkpointing is never read again",
         'parser.add_argument("--gradient_checkpointing", action="store_true")\n'
         "args = parser.parse_args()\n"
         "unet = UNet2DConditionModel.from_pretrained(name, subfolder=\"unet\")\n"
         "if args.gradient_checkpointing:\n"
         "    unet.enable_gradient_checkpointing()\n"
         "assert unet.is_gradient_checkpointing",
         "image-models", run_flag_not_applied, flag_shows, Statistic.CHECKPOINTING_FLAGS,
         estimate_s=2.0),
    Case("checkpointing-frozen-encoder", frozenset({S.PEAK_DID_NOT_DROP}),
         N_("Checkpointing a frozen encoder that runs under no_grad"),
         N_("The frozen encoder runs under no_grad: it keeps nothing for backward, so "
            "checkpointing it saves nothing (transformers does not even checkpoint a layer "
            "while grad is off). The activations are in the model you train."),
         N_("Switch checkpointing on in the model you train (the UNet or the transformer); "
            "leave the frozen encoder as it is, or encode the conditions once ahead."),
         "encoder.requires_grad_(False)\n"
         "encoder.activation_checkpointing_enable()\n"
         "with torch.no_grad():\n"
         "    tokens = encoder(pixel_values=pixels).last_hidden_state\n"
         "pred = transformer(latents, encoder_hidden_states=tokens, ...)",
         "encoder.requires_grad_(False)\n"
         "transformer.enable_gradient_checkpointing()\n"
         "with torch.no_grad():\n"
         "    tokens = encoder(pixel_values=pixels).last_hidden_state\n"
         "pred = transformer(latents, encoder_hidden_states=tokens, ...)",
         "image-models", run_frozen_encoder, frozen_shows, Statistic.CHECKPOINTING_FLAGS,
         estimate_s=1.5),
]}
del S


def cases_for(symptom: Symptom) -> list[Case]:
    """The cases that show a symptom, in the lab's order."""
    return [c for c in CASES.values() if symptom in c.symptoms]


def run_case(case_id: str) -> CaseResult:
    """Run one case (plain, wrong, fixed) on this CPU and measure it."""
    case = CASES[case_id]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small tensors: threads cost more than they give
    try:
        plain, wrong, fixed, config = case.run()
    finally:
        torch.set_num_threads(threads)
    return CaseResult(case_id, plain, wrong, fixed, case.shows(wrong, plain),
                      case.shows(fixed, plain), config)


def run_cases(case_ids: list[str] | None = None) -> list[CaseResult]:
    return [run_case(c) for c in (case_ids or list(CASES))]
