"""python -m demos compare | sweep | bench: figures in bytes and seconds."""

from __future__ import annotations

import argparse
import json
import math
import sys

from memory.config import ARCHS, ConfigError, ModelConfig, parse_bytes
from memory.strategies import STRATEGIES

DEFAULT = ModelConfig()


class _Parser(argparse.ArgumentParser):
    """Bad options end with one line on stderr and exit code 2, never a traceback."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _config_options(p: argparse.ArgumentParser) -> None:
    d = DEFAULT
    p.add_argument("--layers", type=int, default=d.layers)
    p.add_argument("--hidden", type=int, default=d.hidden)
    p.add_argument("--heads", type=int, default=d.heads)
    p.add_argument("--seq", "--seq-len", dest="seq_len", type=int, default=d.seq_len)
    p.add_argument("--batch", type=int, default=d.batch)
    p.add_argument("--vocab", type=int, default=d.vocab)
    p.add_argument("--dtype", default=d.dtype, help="float32, bfloat16 (float16 on CUDA)")
    p.add_argument("--dropout", type=float, default=d.dropout)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--arch", default=d.arch, choices=list(ARCHS),
                   help="gpt: LayerNorm, GELU MLP; llama: RMSNorm, rotary positions, "
                        "grouped-query attention, SwiGLU")
    p.add_argument("--kv-heads", dest="kv_heads", type=int, default=d.kv_heads,
                   help="key/value heads of a llama layer (0: half the heads)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--strategies", default="none,every-layer,sqrt,selective",
                   help=f"comma-separated: {', '.join(STRATEGIES)}; e.g. every-k:2, "
                        f"selective:save-attention, budget:dp:50MiB")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per strategy (median)")
    p.add_argument("--limit", default=None, help="refuse configs predicted above this many "
                                                 "bytes (e.g. 8GiB); default: a safe share of "
                                                 "free memory")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m demos",
                     description="Measure gradient checkpointing on a small GPT.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("compare", help="one training step per strategy, measured")
    _config_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--timeline", action="store_true", help="include the memory timeline "
                                                           "(with --json)")
    p = sub.add_parser("sweep", help="vary one parameter, e.g. --vary layers=2,4,8,16")
    _config_options(p)
    p.add_argument("--vary", required=True, help="NAME=V1,V2,... with NAME one of layers, "
                                                 "seq, batch, vocab, hidden, k")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true")
    out.add_argument("--csv", action="store_true")
    p = sub.add_parser("bench", help="the benchmark: writes benchmarks/results-<device>.*")
    p.add_argument("--out", default=None, help="JSON file to write (a .md goes beside it)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--quick", action="store_true", help="fewer configs and repeats")
    p.add_argument("--arch", default="gpt", choices=list(ARCHS), help="the layer every "
                   "config stacks (a llama run writes results-<device>-llama.*)")
    return parser


def _config(args) -> ModelConfig:
    return ModelConfig(layers=args.layers, hidden=args.hidden, heads=args.heads,
                       seq_len=args.seq_len, batch=args.batch, vocab=args.vocab,
                       dtype=args.dtype, dropout=args.dropout, seed=args.seed,
                       arch=args.arch, kv_heads=args.kv_heads).validated()


def _clean(obj):
    """JSON-safe: NaN/inf become null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


TABLE_COLUMNS = ["strategy", "fits", "peak_bytes", "activation_bytes",
                 "predicted_activation_bytes", "flops_counted", "flops_predicted",
                 "flops_vs_none", "step_seconds", "cpu_seconds", "time_vs_none", "loss",
                 "max_grad_diff", "bitwise_equal"]


def _print_table(frame, extra: list[str] | None = None) -> None:
    import pandas as pd

    cols = (extra or []) + [c for c in TABLE_COLUMNS if c in frame.columns]
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(frame[cols].to_string(index=False))
    for _, row in frame.iterrows():
        if not row["fits"] and isinstance(row.get("error"), str):
            print(f"{row['strategy']}: {row['error']}")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except ConfigError as exc:
        print(f"{parser.prog} {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _run(args) -> int:
    from demos.engine.measure import compare

    if args.command == "bench":
        from demos.engine.bench import run_bench

        paths = run_bench(out=args.out, device=args.device, quick=args.quick,
                          arch=args.arch)
        print("\n".join(str(p) for p in paths))
        return 0
    from memory.strategies import parse_strategies

    cfg = _config(args)
    specs = parse_strategies(args.strategies)
    limit = parse_bytes(args.limit) if args.limit else None
    if args.repeats < 0:
        raise ConfigError(f"repeats={args.repeats} is out of range; allowed 0..100")
    if args.command == "compare":
        comp = compare(cfg, specs, device=args.device, repeats=args.repeats,
                       timeline=args.timeline, limit_bytes=limit)
        if args.json:
            print(json.dumps(_clean(comp.to_json(timeline=args.timeline))))
        else:
            print(f"# {comp.device.label()}; parameters {comp.parameter_bytes} bytes; "
                  f"bytes above the parameters; FLOPs of one whole step, counted by torch's "
                  f"FlopCounterMode and predicted; seconds per step, wall and this "
                  f"process's CPU time (all threads)")
            if comp.busy():
                print("# timed while the machine was busy (CPU time far below wall time "
                      "or a wide spread): the times are not representative")
            _print_table(comp.to_frame())
        return 0
    from demos.engine.sweep import parse_vary, sweep

    name, values = parse_vary(args.vary)
    frame = sweep(cfg, name, values, [s.label for s in specs], device=args.device,
                  repeats=args.repeats, limit_bytes=limit)
    if args.json:
        print(json.dumps(_clean({"config": cfg.as_dict(), "vary": name,
                                 "rows": frame.to_dict(orient="records")})))
    elif args.csv:
        print(frame.to_csv(index=False), end="")
    else:
        _print_table(frame, [name])
    return 0
