"""--arch on the CLI: compare and sweep build the Llama-style model, bench's configs follow."""

from __future__ import annotations

import json

import pytest

from demos.bench import _configs
from demos.cli import main

SMALL = ["--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "32", "--batch", "2",
         "--vocab", "128"]


def test_compare_with_arch_llama_measures_what_theory_predicts(capsys) -> None:
    assert main(["compare", *SMALL, "--arch", "llama", "--kv-heads", "1",
                 "--strategies", "none,every-layer,selective:save-attention", "--repeats", "1",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"]["arch"] == "llama" and data["config"]["kv_heads"] == 1
    for row in data["results"]:
        assert row["activation_bytes"] == row["predicted_activation_bytes"], row["strategy"]


def test_sweep_and_bench_take_the_arch(capsys) -> None:
    assert main(["sweep", *SMALL, "--arch", "llama", "--vary", "layers=1,2",
                 "--strategies", "none,every-layer", "--repeats", "1", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"arch": "llama"' in out
    assert {cfg.arch for _, cfg, _ in _configs("cpu", quick=False, arch="llama")} == {"llama"}


def test_unknown_arch_exits_2(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["compare", "--arch", "mamba"])
    assert stop.value.code == 2
    assert "mamba" in capsys.readouterr().err
