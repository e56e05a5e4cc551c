"""The demo engine of Gradient Checkpointing Lab: a small GPT trained one step at a time
with and without activation checkpointing, measured exactly on CPU and GPU. No Streamlit.

Modules, by what they hold:
    config      ModelConfig, its bounds (LIMITS), UI slider ranges, byte parsing
    strategies  the checkpointing strategies and their text form ("every-k:2", ...)
    model       the GPT, its segments (keep / checkpoint / selective), synthetic data
    budget      checkpoint placement under a byte budget (greedy walk, optimal DP)
    theory      predicted bytes held and peak, FLOPs, Korthikanti's formula
    tracker     the exact live-tensor-bytes tracker (TorchDispatchMode + weakrefs)
    measure     compare(): one measured training step per strategy
    sweep, fit, training   sweeps, "what fits", loss curves
    device      device detection and a fair FIFO queue for one device
    cli, bench  python -m demos compare | sweep | bench
"""

import os

# Idle OpenMP threads sleep instead of spinning: on a shared CPU, spinning threads that
# wait for a descheduled sibling made steps 3-10x slower. Takes effect only if torch has
# not been imported yet.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
