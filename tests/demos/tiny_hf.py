"""Tiny random-init Hugging Face models of the planner's families, shared by the tests that
run its printed scripts (in-process, and in each process of a real FSDP launch)."""

from __future__ import annotations

import torch
import transformers
from transformers import GPT2Config, LlamaConfig, Qwen2Config

TINY = {
    "gpt2": lambda: GPT2Config(n_layer=4, n_embd=32, n_head=4, vocab_size=128,
                               n_positions=64),
    "llama": lambda: LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                                 num_attention_heads=4, num_key_value_heads=2,
                                 vocab_size=128),
    "qwen2": lambda: Qwen2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                                 num_attention_heads=4, num_key_value_heads=2,
                                 vocab_size=128),
}
SEQ = 16


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The decoder layers of a transformers model (its GradientCheckpointingLayers)."""
    return [m for m in model.modules()
            if isinstance(m, transformers.GradientCheckpointingLayer)]
