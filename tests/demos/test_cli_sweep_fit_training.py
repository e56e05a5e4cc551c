import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from demos.cli import main
from demos.fit import largest_fitting
from demos.sweep import parse_vary, sweep
from demos.training import train_losses
from memory.config import ConfigError, ModelConfig
from memory.strategies import parse_strategies, parse_strategy

ROOT = Path(__file__).resolve().parents[2]
TINY_ARGS = ["--layers", "2", "--hidden", "32", "--heads", "2", "--seq", "16", "--batch", "2",
             "--vocab", "64", "--repeats", "1", "--device", "cpu"]
TINY = ModelConfig(layers=2, hidden=32, heads=2, seq_len=16, batch=2, vocab=64)


def test_compare_json_follows_the_contract():
    out = subprocess.run([sys.executable, "-m", "demos", "compare", *TINY_ARGS,
                          "--strategies", "none,every-layer,sqrt,selective", "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "DEMOS_THREADS": "1"})
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) >= {"config", "device", "results"}
    assert data["config"]["layers"] == 2 and data["device"]["kind"] in ("cpu", "cuda")
    keys = {"strategy", "peak_bytes", "activation_bytes", "predicted_activation_bytes",
            "step_seconds", "loss", "max_grad_diff", "fits", "measured_by"}
    assert [r["strategy"] for r in data["results"]] == ["none", "every-layer", "sqrt",
                                                       "selective:save-matmuls"]
    assert isinstance(data["timed_while_busy"], bool)
    for r in data["results"]:
        assert keys <= set(r)
        assert r["fits"] is True and isinstance(r["peak_bytes"], int)
        assert r["step_seconds"] > 0
        assert r["cpu_seconds"] > 0 and len(r["cpu_seconds_runs"]) == len(r["step_seconds_runs"])
        # torch's FLOP counter around the whole step, and the theory's prediction of it
        assert isinstance(r["flops_counted"], int)
        assert r["flops_counted"] == pytest.approx(r["flops_predicted"], rel=0.01)
    counted = {r["strategy"]: r["flops_counted"] for r in data["results"]}
    assert counted["every-layer"] > counted["none"]


@pytest.mark.parametrize("argv,needle", [
    (["compare", "--layers", "0"], "layers=0"),
    (["compare", "--strategies", "every-k:x"], "every-k"),
    (["compare", "--dtype", "int8"], "dtype"),
    (["compare", "--nope"], "unrecognized arguments"),
    (["sweep", "--vary", "depth=1,2"], "vary"),
    (["compare", "--batch", "two"], "invalid int value"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_options_exit_2_with_one_line(argv, needle, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cli_sweep_csv(capsys):
    assert main(["sweep", *TINY_ARGS, "--vary", "layers=1,2", "--strategies", "none,every-layer",
                 "--csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("layers,value,strategy")
    assert len(lines) == 1 + 4


def test_sweep_rows_and_progress():
    calls = []
    frame = sweep(TINY, "seq_len", [8, 16], parse_strategies("none,every-layer"), device="cpu",
                  repeats=1,
                  progress=lambda done, total: calls.append((done, total)))
    assert len(frame) == 4 and calls == [(1, 2), (2, 2)]
    assert list(frame["seq_len"]) == [8, 8, 16, 16]
    for col in ("peak_bytes", "activation_bytes", "predicted_activation_bytes",
                "predicted_peak_bytes", "step_seconds", "fits", "error"):
        assert col in frame.columns
    big = frame[frame.seq_len == 16].set_index("strategy")["activation_bytes"]
    small = frame[frame.seq_len == 8].set_index("strategy")["activation_bytes"]
    assert (big > small).all()
    ks = sweep(TINY.replace(layers=4), "k", [1, 2, 4], [], device="cpu", repeats=0)
    assert list(ks["strategy"]) == ["every-k:1", "every-k:2", "every-k:4"]
    assert parse_vary("seq=1,2") == ("seq_len", [1, 2])
    with pytest.raises(ConfigError):
        sweep(TINY, "k", [5], [], device="cpu")


def test_largest_fitting_is_predicted_then_confirmed():
    budget = 3 * 2**20
    fit = largest_fitting(TINY, parse_strategy("every-layer"), "batch", budget, device="cpu")
    assert fit.value_predicted is not None and fit.value_predicted > 1
    assert fit.value_confirmed is not None and fit.total_bytes <= budget
    assert fit.tokens_per_second and fit.tokens_per_second > 0
    none = largest_fitting(TINY, parse_strategy("none"), "batch", budget, device="cpu",
                           confirm=False)
    assert none.value_predicted < fit.value_predicted  # checkpointing fits a bigger batch
    tiny = largest_fitting(TINY, parse_strategy("none"), "batch", 1000, device="cpu", confirm=False)
    assert tiny.value_predicted is None and "over the budget" in tiny.note


def test_training_losses_drop_and_match_across_strategies():
    cfg = ModelConfig(layers=2, hidden=32, heads=2, seq_len=32, batch=8, vocab=64, dropout=0.1)
    frame = train_losses(cfg, parse_strategies("none,every-layer,selective"), steps=12, lr=1e-2)
    assert list(frame.columns) == ["step", "strategy", "loss"] and len(frame) == 36
    table = frame.pivot(index="step", columns="strategy", values="loss")
    assert table.iloc[-1].max() < table.iloc[0].min() - 0.3
    assert (table.max(axis=1) - table.min(axis=1)).max() < 1e-5
