"""The planner's words: the catalog messages (N_) keyed by the ids of the memory model and
planner/ (strategies, components, remedies, inputs, reasons, approximations, problems, table
columns), and the pure helpers that word an id, a size or a plan in the session's language.
Names (fp32, AdamW, LoRA, GELU ...) stay as they are. The page that shows them: ui.plan_view.
"""

from __future__ import annotations

from i18n import N_, units
from memory import hardware
from memory.architectures import Architecture
from planner import recommend as recommend_module
from ui.i18n import babel_locale, fmt_percent, t, tn

GiB = hardware.GiB
NAMES: dict[str, str] = {  # ids whose words are names, the same in every language
    "fp32": "fp32", "adamw": "AdamW", "gelu": "GELU",
    "swiglu": "SwiGLU", "layernorm": "LayerNorm", "rmsnorm": "RMSNorm",
}
WORDS: dict[str, str] = {
    # strategies
    "none": N_("No checkpointing"), "selective": N_("Selective (recompute attention scores)"),
    "some-layers": N_("Only some layers"), "two-layer": N_("Two-layer segments"),
    "every-layer": N_("Every layer"), "budget": N_("Compiler memory budget"),
    # components
    "weights": N_("Weights"), "gradients": N_("Gradients"), "optimizer": N_("Optimizer state"),
    "activations_kept": N_("Activations: kept checkpoints"),
    "activations_rebuilt": N_("Activations: layer being rebuilt"),
    "logits": N_("Logits and loss peak"),
    "workspace": N_("Workspace and fragmentation (allowance)"),
    # remedies
    "chunked-loss": N_("Chunked loss"), "lora": N_("LoRA adapters"),
    "qlora": N_("QLoRA (4-bit base)"), "more-gpus": N_("Shard over more GPUs"),
    "adamw-8bit": N_("8-bit AdamW"), "sharded-adamw": N_("AdamW (torch), not 8-bit"),
    "shorter-seq": N_("Shorter sequence"),
    "fused-attention": N_("Fused attention (SDPA)"),
    "smaller-batch": N_("Micro-batch 1 with more accumulation"),
    "offload": N_("Offload to CPU memory"),
    # inputs
    "mixed": N_("bf16 mixed (fp32 master weights)"), "bf16": N_("pure bf16"),
    "sgd-momentum": N_("SGD with momentum"), "full": N_("Full fine-tuning"),
    "attention": N_("attention (q, k, v, o)"), "all-linear": N_("all linear layers"),
    "fused": N_("SDPA (fused: recomputes the scores)"),
    "math": N_("eager (stores the scores)"),
    "custom": N_("Custom"), "config": N_("Paste a config.json"),
    "whole": N_("whole logits"), "chunked": N_("chunked"),
    "no": N_("no"), "yes": N_("yes"), "other-gpu": N_("Other (GiB)"),
}
REASONS: dict[str, str] = {
    "fits-without-checkpointing": N_(
        "Everything fits as it is: checkpointing would only make each step slower, so leave "
        "it off (and check that your recipe does not switch it on)."),
    "scores-are-cheap-to-recompute": N_(
        "The attention scores are large in memory but cheap to compute: the fused attention "
        "kernel (SDPA) keeps none of them and recomputes them in its backward. Switching "
        "to it fits, for a few percent more arithmetic."),
    "fused-kernel-keeps-no-scores": N_(
        "The layer being rebuilt still holds its attention scores with eager attention; the "
        "fused kernel (SDPA) keeps none of them and recomputes them in its backward."),
    "only-as-many-layers-as-needed": N_(
        "Checkpointing only as many layers as needed to fit recomputes the fewest layers."),
    "every-layer-keeps-least": N_(
        "Checkpoint every layer first: it keeps the least of the choices Hugging Face's "
        "switch offers, for about one more forward pass of the layers."),
    "every-layer-fits": N_(
        "Keeping only each layer's input fits; it costs about one more forward pass of the "
        "layers."),
    "two-layer-keeps-less": N_(
        "In a model this deep, segments of two layers keep less than every layer, for the "
        "same recomputation."),
    "loss-in-chunks": N_(
        "Computing the logits and the loss a chunk of tokens at a time keeps the b·s·V "
        "tensors small; layer checkpointing cannot shrink them."),
    "optimizer-state-shrinks": N_(
        "AdamW's two fp32 states (8 bytes per parameter) shrink to 2 bytes per parameter."),
    "train-adapters-only": N_(
        "Frozen weights need no gradients and no optimizer state; only the small adapters "
        "train."),
    "four-bit-base": N_("The frozen base weights are stored in 4 bits instead of 16."),
    "eight-bit-adamw-not-sharded": N_(
        "Across GPUs FSDP2 holds each parameter as a DTensor, and bitsandbytes' 8-bit AdamW "
        "cannot step one (its update mixes plain tensors with the DTensor and stops at the "
        "first step): the plan uses torch's AdamW, which steps DTensors, and counts its "
        "states."),
    "fewer-tokens": N_(
        "The activations grow with the tokens per sample: a shorter sequence (more "
        "accumulation keeps the tokens per optimizer step where it divides) fits."),
    "shard-the-state": N_(
        "FSDP / ZeRO-3 splits weights, gradients and optimizer state over the GPUs; fewer "
        "accumulation steps keep the tokens per optimizer step."),
    "same-tokens-per-step-with-accumulation": N_(
        "A smaller micro-batch with more accumulation steps keeps the tokens per optimizer "
        "step and shrinks activations and logits."),
    "state-in-host-memory": N_(
        "FSDP's CPU offload keeps the parameter shards, their gradients and the optimizer "
        "state in CPU memory and runs the optimizer step there: more than ZeRO-Offload, "
        "which leaves the parameters on the GPU. Every step pays the transfers."),
    "nothing-fits": N_(
        "Even with all of the above this does not fit: shorten the sequence, use more GPUs "
        "or a bigger one."),
}
APPROXIMATIONS: dict[str, str] = {
    "workspace": N_(
        "Workspace allowance (CUDA context, cuBLAS and attention workspaces): {size}."),
    "fragmentation": N_(
        "Fragmentation allowance, {share:.0%} of everything allocated: {size}."),
    "peaks-added": N_(
        "The layer being rebuilt and the loss peak are added as if they came at once; they "
        "come one after the other, so the peak is overstated by up to {size}."),
    "gpu-kernels": N_(
        "Layer formulas: measured to the byte on the CPU; on a GPU the norm statistics, the "
        "attention log-sum-exp and 1-byte dropout masks follow the engine's CUDA rules, not "
        "yet measured on a GPU here (statistics and log-sum-exp: {size})."),
    "gpu-usable": N_(
        "GPU memory: the total that nvidia-smi reports ({size} here), less than the data "
        "sheet's GB; the CUDA context is inside the workspace allowance."),
    "logits-fp32": N_(
        "Around the loss: three fp32 b·s·V tensors (log-softmax, its gradient, the logits' "
        "gradient) plus the 16-bit logits ({size}); the engine measures this in fp32."),
    "lora-activations": N_(
        "Adapters as PEFT runs them, in fp32 (so are their gradients and optimizer state): "
        "frozen layers keep only what the input gradients need; each adapter keeps its input "
        "(an fp32 copy in pure bf16, a 16-bit one under autocast) and its rank-r "
        "intermediate ({size}), measured on tiny models in fp32, pure bf16 and mixed "
        "precision."),
    "adapter-backward": N_(
        "With adapters, backward is counted as one forward (no weight gradients for the "
        "frozen base) when the extra compute is given as a share."),
    "qlora-bits": N_(
        "QLoRA: {share:.3f} bits per frozen linear weight (NF4 plus double-quantized "
        "constants); embeddings, norms and head in fp32 (PEFT's "
        "prepare_model_for_kbit_training)."),
    "fsdp-gather": N_(
        "Sharding: two whole layers gathered in the compute dtype at a time ({size})."),
    "fsdp-root": N_(
        "Sharding: the output head and the final norm stay whole on every GPU from the loss "
        "through backward, one unit that accelerate never reshards after forward ({size} "
        "more than their shard); the input embedding is gathered only while it runs."),
    "headroom": N_(
        "Headroom: a plan fits only if it keeps {share:.0%} of the GPU free ({size}), for "
        "what the model leaves out and for longer batches than planned; the table and the "
        "recommendation apply it alike."),
    "compiler-budget": N_(
        "Compiler budget {share:.0%}, an approximation: torch.compile's partitioner saves "
        "only a graph's inputs at 0 and its default choice at 1, and interpolates between "
        "those two sizes. Modelled here with each layer compiled as its own graph: its input, "
        "plus that share of the way to what the plain layer keeps (the default keeps at most "
        "that), dropping the tensors cheapest to recompute per byte first. The partitioner "
        "decides on the real graph, so measure."),
    "chunk-size": N_("Chunked loss: {share:,.0f} tokens per chunk."),
}
PROBLEMS: dict[str, str] = {  # memory.architectures.ShapeError's problems
    "at-least-one": N_("every size must be at least 1"),
    "hidden-heads": N_("the hidden size ({hidden:,}) must be a multiple of the attention "
                       "heads ({heads})"),
    "heads-kv": N_("the attention heads ({heads}) must be a multiple of the key/value heads "
                   "({kv_heads})"),
    "kind": N_("unknown MLP kind or norm"),
}
CONFIG_PROBLEMS: dict[str, str] = {  # memory.hf_config.ConfigJsonError's problems
    "not-json": N_("This is not a JSON object; paste the whole config.json."),
    "family": N_("The model type {value} is not one the planner knows (GPT-2, Llama, Mistral, "
                 "Qwen2, Gemma)."),
    "missing": N_("The config.json has no field {field}."),
    "bad-value": N_("The field {field} must be a whole number of at least {limit}."),
    "shape": N_("The sizes in this config.json are not consistent."),
    "too-long": N_("This text is longer than {limit:,} characters; a config.json is a few "
                   "thousand."),
    "too-deep": N_("This JSON nests more than {limit} levels deep; a config.json nests "
                   "three or four."),
    "too-large": N_("The field {field} is {value:,}: no real model has more than {limit:,}. "
                    "The planner refuses it before building anything."),
    "top-k": N_("The field {field} is {value:,}: a token cannot pick more than the {limit:,} "
                "there are."),
    "too-many": N_("The field {field} lists {value:,} levels: no real model has more than "
                   "{limit:,}. The planner refuses it before building anything."),
}
CLASS_PROBLEMS: dict[str, str] = {  # model_classes' ClassConfigError problems
    "no-model-type": N_("The config.json has no field model_type."),
    "unknown": N_("transformers has no model of type {model_type}."),
    "encoder": N_("{model_type} is an encoder model, not a decoder-only language model."),
    "not-causal": N_("{model_type} is not a decoder-only language model: transformers has "
                     "no causal-LM class for it."),
    "cannot-build": N_("transformers cannot build a {model_type} model from this "
                       "config.json."),
    "encoder-decoder": N_("{model_type} is an encoder-decoder model, not a decoder-only "
                          "language model."),
    "multimodal": N_("This {model_type} config.json describes a multimodal model; paste "
                     "its language model's config (its text_config)."),
    "window": N_("Its sliding window is too small to plan."),
    "image-model": N_("{model_type} is an image model: the planner plans decoder-only "
                      "language models. The Pictures page measures image models "
                      "(UNets, diffusion transformers, vision encoders)."),
    "image-class": N_("{model_type} is no diffusers class the course measures (it "
                      "measures UNet2DConditionModel, SD3Transformer2DModel and "
                      "FluxTransformer2DModel)."),
    # planner.class_worker.MeasureFailed's problems
    "time-limit": N_("Measuring this config.json's class took longer than {seconds} s, the "
                     "limit of one measurement on this server, and was stopped. A real model "
                     "takes a few seconds: check its sizes."),
    "memory-limit": N_("Measuring this config.json's class needed more than {size} of "
                       "memory, the limit of one measurement on this server, and was "
                       "stopped. A real model needs far less: check its sizes."),
    "failed": N_("transformers could not run a training step of this {model_type} model: "
                 "{detail}"),
}
LAYOUT_PROBLEMS: dict[str, str] = {  # planner.parallel_plan.LayoutRefused's problems
    "tp-heads": N_("Tensor parallel {tp} does not divide the model's {heads} attention "
                   "heads: tensor parallelism gives each GPU whole heads. Pick a size that "
                   "divides them."),
    "tp-kv-heads": N_("Tensor parallel {tp} does not divide the model's {kv_heads} "
                      "key/value heads. Each GPU would need a share of a key/value head, "
                      "or a copy of one: torch's tensor-parallel styles and transformers' "
                      "tp_plan split them whole and copy none, and the planner counts the "
                      "keys and values split over the GPUs. Pick a size that divides them."),
    "tp-node": N_("Tensor parallel {tp} is more than the {per_node} GPUs of a node: tensor "
                  "parallelism stays inside one node."),
    "pp-layers": N_("{pp} pipeline stages are more than the model's {layers} layers: each "
                    "stage needs at least one."),
    "chunks-layers": N_("{stages} pipeline chunks ({pp} stages, interleaved) are more than "
                        "the model's {layers} layers: each chunk needs at least one."),
    "microbatches": N_("The {schedule} schedule needs at least as many micro-batches as "
                       "pipeline stages ({pp}), not {microbatches}."),
}
COLUMNS = {  # the strategy table's columns: id -> header
    "strategy": N_("Checkpointing"), "peak": N_("Peak per GPU"), "fits": N_("Fits"),
    "extra": N_("Extra compute"), "batch": N_("Largest micro-batch"),
    "seq": N_("Longest sequence"),
}


def word(key: str) -> str:
    """An id's words in the session's language (names as they are)."""
    return NAMES[key] if key in NAMES else t(WORDS[key]) if key in WORDS else key


def gib(size: float) -> str:
    return f"{units.number(size / GiB, 1, locale=babel_locale())} GiB"


def preset_caption(arch: Architecture) -> str:
    if not arch.source:
        return t("{layers} layers · hidden {hidden:,} · {heads} heads ({kv} key/value) · MLP "
                 "{mlp:,} {kind} · {norm} · vocabulary {vocab:,} · {params:,.2f}B parameters",
                 layers=arch.layers, hidden=arch.hidden, heads=arch.heads, kv=arch.kv_heads,
                 mlp=arch.mlp_width, kind=word(arch.mlp), norm=word(arch.norm),
                 vocab=arch.vocab, params=arch.params() / 1e9)
    return t("{layers} layers · hidden {hidden:,} · {heads} heads ({kv} key/value) · MLP "
             "{mlp:,} {kind} · {norm} · vocabulary {vocab:,} · {params:,.2f}B parameters · "
             "[source]({url})", layers=arch.layers, hidden=arch.hidden, heads=arch.heads,
             kv=arch.kv_heads, mlp=arch.mlp_width, kind=word(arch.mlp), norm=word(arch.norm),
             vocab=arch.vocab, params=arch.params() / 1e9, url=arch.source.split()[0])


def verdict(spare: float, fits: bool = True, headroom: float = 0.0) -> str:
    """'fits, 2.8 GiB to spare'; 'only 0.2 GiB to spare, less than the 5% kept free' (within
    the GPU but not its headroom: it does not fit); 'short by 9.7 GiB'. `spare`: the GPU's
    bytes less the peak; `fits`: whether the peak keeps the headroom (the plan's own
    verdict, memory.footprint.fits)."""
    if spare < 0:
        return t("short by {size}", size=gib(-spare))
    if not fits:
        return t("only {size} to spare, less than the {share} kept free", size=gib(spare),
                 share=fmt_percent(headroom))
    return t("fits, {size} to spare", size=gib(spare))


def row_name(plan: recommend_module.Plan, strategy: str, saves: bool) -> str:
    marks = [word(strategy)]
    if strategy == "some-layers":
        marks = [tn("{name} (the first layer)", "{name} (the first {count} layers)",
                    plan.table_layers, name=word(strategy))]
    if not saves and strategy != "none":
        marks.append(t("(saves nothing here)"))
    if plan.row_is_yours(strategy):
        marks.append(t("· yours"))
    if strategy == plan.recommended_row:
        marks.append(t("· recommended"))
    return " ".join(marks)


def advice_title(step: recommend_module.Advice) -> str:
    name = word(step.action)
    if step.action == "some-layers" and step.value:
        return tn("{name} (the first layer)", "{name} (the first {count} layers)",
                  int(step.value), name=name)
    if step.action == "more-gpus" and step.value:
        return tn("{name} ({count} GPU)", "{name} ({count} GPUs)", int(step.value), name=name)
    if step.action == "shorter-seq" and step.value:
        return t("{name} ({tokens} tokens)", name=name,
                 tokens=units.number(int(step.value), locale=babel_locale()))
    return name


def plan_title(rec: recommend_module.Recommendation) -> str:
    """The whole plan in one line: every step's name (the GPU count follows it)."""
    return " + ".join(word(step.action) if step.action == "more-gpus" else
                      advice_title(step) for step in rec.steps)
