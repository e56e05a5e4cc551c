"""The demo engine of Gradient Checkpointing Lab: a small GPT trained one step at a time
with and without activation checkpointing, measured exactly on CPU and GPU. No Streamlit.

Modules, by what they hold:
    config      ModelConfig, its bounds (LIMITS), UI slider ranges, byte parsing
    units       sizes, times and numbers as text (Babel, locale-aware)
    strategies  one record per checkpointing strategy, the selective policies, text forms
    segments    Segment (keep / checkpoint / selective) and the sqrt segment length
    model       the GPT, its probe protocol, synthetic data
    budget      checkpoint placement under a byte budget (greedy walk, optimal DP)
    theory      predicted bytes held and peak, FLOPs, Korthikanti's formula
    tracker     the exact live-tensor-bytes tracker (TorchDispatchMode + weakrefs)
    measure     compare(): one measured training step per strategy
    results     the records a measurement returns (Comparison, StrategyResult, ...)
    report, figures   tables, sentences and Plotly figures of those records
    sweep, fit, training   sweeps, "what fits", loss curves
    device      device detection and a fair FIFO queue for one device
    cli, bench  python -m demos compare | sweep | bench
"""

import os

# Idle OpenMP threads sleep instead of spinning: on a shared CPU, spinning threads that
# wait for a descheduled sibling made steps 3-10x slower. Takes effect only if torch has
# not been imported yet.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
