"""Real library classes, built and measured: the floor below both the lab (demos/) and the
planner (planner/).

    variant            what changes what a model keeps (precision, kernel, LoRA, QLoRA, device)
    kinds              the model kinds, one adapter each, in one table (KINDS, kind_for)
    causal_lm          the decoder-only causal LM of transformers: build, checkpoint, measure
    causal_lm_config   a config.json as that kind: layer types, window, the reduced config
    causal_lm_step     one step's forward, what autograd keeps per layer and module
    quantized          QLoRA's 4-bit NF4 base (bitsandbytes, peft)
    tiny               the course's presets as tiny real models (the lab's /real-model page)

Nothing here imports Streamlit; torch and the libraries are imported where they are used.
"""

import logging

# bitsandbytes' CPU backend warns at import, on CPUs with AVX512-BF16, that its optional
# `kernels` package is missing: that package fetches a kernel from the Hugging Face Hub at
# run time, which this app never does. bitsandbytes then runs its own CPU kernel, so the
# warning says nothing a learner or an operator can act on; errors still show.
logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
