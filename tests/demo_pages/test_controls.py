"""ui.demo_controls: the widgets' options and defaults follow the server's device."""

from __future__ import annotations

from demos.device import DeviceInfo
from memory.config import demo_default
from memory.strategies import describe, parse_strategy
from ui.demo_controls import (
    budget_help,
    budget_range,
    default_config,
    fit_default,
    strategy_options,
)

GPU = DeviceInfo("cuda", "H200", 140 * 2**30, 100 * 2**30 + 123, 16, "2.13")
CPU = DeviceInfo("cpu", "no GPU found", 24 * 2**30, 20 * 2**30, 2, "2.13")


def test_the_controls_follow_the_device() -> None:
    low, high, step, default = budget_range(GPU)
    assert default == 100 * 1024 and high == 140 * 1024 and step == 256  # free memory, MiB
    assert budget_range(CPU)[3] == 128
    assert "free memory" in budget_help(GPU) and "no fixed memory limit" in budget_help(CPU)
    cpu = [spec.label for spec in strategy_options("cpu")]
    assert "offload" in [spec.label for spec in strategy_options("cuda")] and "offload" not in cpu
    assert "none" not in cpu
    assert "budget:dp:40%" in cpu  # the budget strategy is on the pages
    assert default_config(GPU).dtype == "bfloat16" and default_config(CPU).seq_len == 256
    assert fit_default(GPU).hidden > fit_default(CPU).hidden and fit_default(GPU).batch == 1


def test_the_ui_opens_with_the_engine_s_demo_default() -> None:
    for info in (CPU, GPU):
        assert default_config(info) == demo_default(info.kind)
    assert demo_default("cpu").dtype == "float32"
    assert fit_default(GPU) == demo_default("cuda").replace(batch=1)


def test_describe_names_the_segment_size() -> None:
    assert "2 layers" in describe(parse_strategy("every-k:2"))
    assert describe(parse_strategy("selective:save-matmuls"))
