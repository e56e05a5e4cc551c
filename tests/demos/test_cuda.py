"""Paths that only exist on a GPU; skipped where there is none."""

import pytest
import torch

from demos.measure import CUDA_METHOD, compare
from memory.config import ModelConfig
from memory.strategies import parse_strategies

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
CFG = ModelConfig(layers=4, hidden=128, heads=4, seq_len=128, batch=2, vocab=1024)


@cuda
def test_cuda_allocator_measures_and_offload_keeps_activations_off_the_gpu():
    comp = compare(CFG, parse_strategies("none,every-layer,offload"), device="cuda", repeats=2)
    none, every, off = comp.results
    for r in comp.results:
        assert r.fits, r.error
        assert r.measured_by == CUDA_METHOD
        assert r.max_grad_diff is not None and r.max_grad_diff < 1e-5
    assert every.peak_bytes < none.peak_bytes
    assert off.activation_bytes < every.activation_bytes
    assert none.activation_bytes == pytest.approx(none.predicted_activation_bytes, rel=0.1)


@cuda
def test_cuda_bf16_and_fp16_run():
    for dtype in ("bfloat16", "float16"):
        comp = compare(CFG.replace(dtype=dtype), parse_strategies("none,every-layer"),
                       device="cuda",
                       repeats=1)
        assert all(r.fits for r in comp.results)


@cuda
def test_cuda_out_of_memory_is_a_result_not_a_crash():
    huge = ModelConfig(layers=96, hidden=8192, heads=64, seq_len=4096, batch=64, vocab=262144)
    comp = compare(huge, parse_strategies("none"), device="cuda", time_steps=False,
                   limit_bytes=10**16)
    assert not comp.results[0].fits
    assert "does not fit" in comp.results[0].error
    torch.cuda.synchronize()
    small = compare(CFG, parse_strategies("none"), device="cuda",
                    repeats=1)  # the device still works
    assert small.results[0].fits
