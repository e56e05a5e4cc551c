"""The compare page reports the device it measured on, and on a GPU the CUDA allocator's
figures. The GPU case skips without CUDA; the same check runs here on the CPU."""

from __future__ import annotations

from collections.abc import Callable

import torch

from demos.device import detect_device
from demos.measure import CUDA_METHOD, TRACKER_METHOD
from i18n import gettext
from tests.demo_pages.test_pages import TINY, no_errors, texts
from tests.demos.test_cuda import cuda

# Inside the GPU's slider ranges (hidden from 128, sequence from 64, vocabulary from 1,024).
GPU_TINY = {"layers": "2", "hidden": "128", "heads": "2", "seq": "64", "batch": "1",
            "vocab": "1024"}


def measured_caption(at) -> str:
    return next(c for c in texts(at, "caption").splitlines() if "Measured on this run on" in c)


def test_compare_page_names_the_device_and_method_it_measured_with(app_test: Callable) -> None:
    info = detect_device()
    at = app_test("pages/demos/compare.py", query=GPU_TINY if info.kind == "cuda" else TINY)
    no_errors(at)
    assert not at.warning, [w.value for w in at.warning]
    caption = measured_caption(at)
    assert info.label() in caption
    assert (CUDA_METHOD if info.kind == "cuda" else TRACKER_METHOD) in caption


def test_the_measured_device_is_worded_in_the_sessions_language(app_test: Callable) -> None:
    """The caption under a measured result names the device as the sidebar does: a CPU
    run's reason in German, not the engine's English."""
    info = detect_device()
    query = GPU_TINY if info.kind == "cuda" else TINY
    at = app_test("pages/demos/curves.py", query={**query, "lang": "de"})
    no_errors(at)
    caption = next(c for c in texts(at, "caption").splitlines() if "gemessen auf" in c)
    if info.kind == "cpu":
        assert gettext("de", info.name) in caption and info.name not in caption
        assert f"{info.cores} Kerne" in caption or f"{info.cores} Kern" in caption


@cuda
def test_compare_page_on_the_gpu_measures_offload_in_both_dtypes(app_test: Callable) -> None:
    name = torch.cuda.get_device_name()
    for dtype in ("bfloat16", "float32"):
        at = app_test("pages/demos/compare.py",
                      query={**GPU_TINY, "dtype": dtype, "strategy": "every-layer,offload"})
        no_errors(at)
        assert not at.warning, [w.value for w in at.warning]
        table = at.table[0].value
        assert list(table["strategy"]) == ["none", "every-layer", "offload"]
        assert table["same gradients"].iloc[2].startswith("✓")
        caption = measured_caption(at)
        assert name in caption and CUDA_METHOD in caption
        assert TRACKER_METHOD not in caption
