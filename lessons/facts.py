"""Figures the lessons quote from published sources (see ../shared/FACTS.md).

These are reported results, not things we can derive, so they live here once, with their
source, and the lessons inject them by name. Anything that *can* be derived (the worked
examples, percentages, ratios) is computed from a formula elsewhere in `lessons/`.
"""

from __future__ import annotations

from dataclasses import dataclass

from i18n import N_


@dataclass(frozen=True)
class Source:
    key: str
    title: str  # a paper's or page's own title: never translated
    authors: str  # names, or a documentation marked N_ (translated where shown)
    url: str
    note: str  # marked N_: translated where shown


SOURCES: tuple[Source, ...] = (
    Source(
        "chen2016",
        "Training Deep Nets with Sublinear Memory Cost",
        "Chen, Xu, Zhang, Guestrin (2016)",
        "https://arxiv.org/abs/1604.06174",
        N_("the paper that made recomputation standard: √n memory for one extra forward pass"),
    ),
    Source(
        "korthikanti2022",
        "Reducing Activation Recomputation in Large Transformer Models",
        "Korthikanti et al. (2022)",
        "https://arxiv.org/abs/2205.05198",
        N_("the per-layer activation formula, and selective recomputation"),
    ),
    Source(
        "narayanan2021",
        "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
        "Narayanan et al. (2021)",
        "https://arxiv.org/abs/2104.04473",
        N_("tensor, pipeline and data parallelism together; the interleaved pipeline "
           "schedule and its bubble"),
    ),
    Source(
        "pytorch",
        "torch.utils.checkpoint",
        N_("PyTorch documentation"),
        "https://docs.pytorch.org/docs/stable/checkpoint.html",
        N_("the API: checkpoint, checkpoint_sequential, selective checkpointing"),
    ),
    Source(
        "hf-memory",
        "Model training anatomy (GPU memory usage)",
        N_("Hugging Face Transformers documentation"),
        "https://huggingface.co/docs/transformers/model_memory_anatomy",
        N_("what training memory is spent on: weights, gradients, optimizer state, activations"),
    ),
    Source(
        "hf-single-gpu",
        "Methods and tools for efficient training on a single GPU",
        N_("Hugging Face Transformers documentation"),
        "https://huggingface.co/docs/transformers/perf_train_gpu_one",
        # (no "% " in the text: gettext tools would read it as a %-format)
        N_("gradient checkpointing, gradient accumulation and 8-bit optimizers; the figure "
           "of \"about 20%\" slower training"),
    ),
    Source(
        "openai2018",
        "openai/gradient-checkpointing",
        "Salimans and Bulatov, OpenAI (2018)",
        "https://github.com/openai/gradient-checkpointing",
        N_("node-by-node animations of plain, memory-poor and √n backprop"),
    ),
)

# Chen et al. 2016: a 1,000-layer ResNet.
CHEN_LAYERS = 1_000
CHEN_MEMORY_BEFORE_GB = 48.0
CHEN_MEMORY_AFTER_GB = 7.0
CHEN_EXTRA_RUNTIME = 0.30  # "about 30% more runtime"

# Korthikanti et al. 2022: selective recomputation on GPT-3 (175B). Pages as in
# arXiv:2205.05198v1.
GPT3 = {"hidden": 12_288, "heads": 96, "seq": 2_048, "layers": 96}
KORTHIKANTI_SELECTIVE_EXTRA_FLOPS = 0.027  # reported: ~2.7% more FLOPs on GPT-3 (p. 9)
# Their stated reason for selective recomputation: full recomputation's 30-40% time overhead
# (Section 5, p. 9).
KORTHIKANTI_FULL_RECOMPUTE_OVERHEAD = (0.30, 0.40)
# Their Table 3 (Section 6, p. 10): the GPT-3 175B run, tensor parallel 8, pipeline parallel 8,
# global batch 64 of micro-batches of 1 (so 64 micro-batches, no data parallelism), the
# interleaved schedule with m = 3 chunks per GPU (Section 6), s = 2,048.
GPT3_RUN = {"tp": 8, "pp": 8, "microbatches": 64, "chunks": 3, "micro_batch": 1}
# One layer of their 22B model, forward + backward time in milliseconds (Table 4, p. 11).
KORTHIKANTI_22B_MS = {"baseline": 19.6, "full": 27.2, "selective": 20.9}

# openai/gradient-checkpointing (2018): ">10x larger models for ~20% more compute".
OPENAI_LARGER_MODELS = 10
OPENAI_EXTRA_COMPUTE = 0.20

# Hugging Face docs, the single-GPU training page (hf-single-gpu above).
HF_SLOWDOWN = 0.20  # checkpointing is "about 20% slower"
# The transformers release whose checkpointing switch lesson 7 teaches (the one in
# requirements.txt). In transformers/modeling_utils.py of 5.24.0:
# `PreTrainedModel.activation_checkpointing_enable(activation_checkpointing_kwargs=None,
# every_n_layers=1, offload=False)` passes `{"use_reentrant": False}` when no kwargs are given,
# checkpoints every `every_n_layers`-th decoder layer, holds the saved inputs in pinned host
# memory under `offload` (torch's save_on_cpu, on the compute stream) and calls
# `enable_input_require_grads()` itself for text models and PEFT models;
# `gradient_checkpointing_enable` is a deprecated alias (a FutureWarning; "will be removed in
# v6"), as are TrainingArguments' `gradient_checkpointing{,_kwargs}` (training_args.py).
# Up to 4.x the switch was `gradient_checkpointing_enable()`, which without
# gradient_checkpointing_kwargs passed use_reentrant=True (explicitly since
# huggingface/transformers#28538, January 2024), had no every_n_layers and no offload.
HF_TRANSFORMERS_VERSION = "5.24.0"
# The diffusers release lesson 9 reads (requirements.txt): enable_gradient_checkpointing in
# diffusers/models/modeling_utils.py, the blocks' `torch.is_grad_enabled() and
# self.gradient_checkpointing`, the pipelines' max_sequence_length defaults.
DIFFUSERS_VERSION = "0.42.1"
HF_TRANSFORMERS_OLD_VERSION = "4.57.1"  # the last 4.x release the course taught

# An example accelerator for the offload-or-recompute arithmetic of lesson 7: assumptions
# stated in the text, not measurements.
EXAMPLE_ACCELERATOR_FLOPS = 400e12  # sustained 16-bit matrix throughput, FLOP/s
EXAMPLE_LINK_BYTES_PER_S = 25e9  # a PCIe 4.0 x16 link, one direction, bytes/s

# The source pages: "in practice 20-30% slower".
PRACTICE_SLOWDOWN = (0.20, 0.30)
# Vocabularies of recent models.
COMMON_VOCAB_RANGE = (150_000, 250_000)

# Measured on this course's prototype (torch CPU, fp32, pre-LN GPT, fused attention), FACTS.md.
PROTOTYPE_PEAK_CONFIG = {"layers": 16, "hidden": 256, "seq": 512, "batch": 2, "vocab": 1_000}
PROTOTYPE_PEAK_MIB = {"none": 270, "every-layer": 68, "sqrt": 107}  # peak above parameters
PROTOTYPE_TIME_CONFIG = {"layers": 8, "hidden": 256, "heads": 4, "seq": 256, "batch": 4,
                         "vocab": 8_192}
PROTOTYPE_EVERY_LAYER_SLOWDOWN = (1.19, 1.35)  # time per step relative to no checkpointing
