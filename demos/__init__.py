"""The demos of Gradient Checkpointing Lab: a small GPT (or Llama) trained one step at a
time with and without activation checkpointing, measured exactly on CPU and GPU, served
to many learners at once. No Streamlit.

Rooms, by what they hold (what they predict with is the memory model, memory/):
    engine/     the model (blocks over one probed base), the live-bytes tracker, measure
                (one measured training step per strategy), fit, sweep, training, bench,
                the mistakes lab, the compiler's memory budget swept (compiler_budget),
                the device and its fair queue
    runtime/    the demo service: jobs split into steps, the worker process, the shared
                result store
    reports/    tables, sentences and Plotly figures of measured results
    cli         python -m demos compare | sweep | budget | bench | plan | mistakes | ...
"""

import os

# Idle OpenMP threads sleep instead of spinning: on a shared CPU, spinning threads that
# wait for a descheduled sibling made steps 3-10x slower. Takes effect only if torch has
# not been imported yet.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import model_classes  # noqa: E402, F401  (quiets bitsandbytes' import-time warning; see there)
