"""python -m demos compare | sweep | budget | bench | mistakes: the lab's own command, its
figures in bytes and seconds, the compiler's memory budget and the classic checkpointing
mistakes. The planner is `python -m planner` (planner.cli)."""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys

from command_line import CourseParser
from memory.config import ARCHS, ConfigError, ModelConfig, parse_bytes
from memory.strategies import STRATEGIES

DEFAULT = ModelConfig()
MOVED_PLAN = "the planner is its own command: python -m planner, with the same flags"


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
    p.add_argument(
        "--arch",
        default=d.arch,
        choices=list(ARCHS),
        help="gpt: LayerNorm, GELU MLP; llama: RMSNorm, rotary positions, "
        "grouped-query attention, SwiGLU",
    )
    p.add_argument(
        "--kv-heads",
        dest="kv_heads",
        type=int,
        default=d.kv_heads,
        help="key/value heads of a llama layer (0: half the heads)",
    )
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument(
        "--strategies",
        default="none,every-layer,sqrt,selective",
        help=f"comma-separated: {', '.join(STRATEGIES)}; e.g. every-k:2, "
        f"selective:save-attention, budget:dp:50MiB",
    )
    p.add_argument("--repeats", type=int, default=5, help="timed runs per strategy (median)")
    p.add_argument(
        "--limit",
        default=None,
        help="refuse configs predicted above this many "
        "bytes (e.g. 8GiB); default: a safe share of "
        "free memory",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = CourseParser(
        prog="python -m demos", description="Measure gradient checkpointing on a small GPT."
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CourseParser)
    p = sub.add_parser("compare", help="one training step per strategy, measured")
    _config_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--timeline", action="store_true", help="include the memory timeline (with --json)"
    )
    _placement_options(p)
    p = sub.add_parser("sweep", help="vary one parameter, e.g. --vary layers=2,4,8,16")
    _config_options(p)
    p.add_argument(
        "--vary",
        required=True,
        help="NAME=V1,V2,... with NAME one of layers, seq, batch, vocab, hidden, k",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true")
    out.add_argument("--csv", action="store_true")
    _budget_parser(sub)
    p = sub.add_parser("bench", help="the benchmark: writes benchmarks/results-<device>.*")
    p.add_argument("--out", default=None, help="JSON file to write (a .md goes beside it)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--quick", action="store_true", help="fewer configs and repeats")
    p.add_argument(
        "--arch",
        default="gpt",
        choices=list(ARCHS),
        help="the layer every config stacks (a llama run writes results-<device>-llama.*)",
    )
    p = sub.add_parser(
        "mistakes",
        help="the classic checkpointing mistakes, each run the wrong and the fixed way, measured",
    )
    p.add_argument(
        "--case", action="append", default=None, help="a case id (repeatable); default: every case"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    sub.add_parser("plan", help=f"moved: {MOVED_PLAN}", add_help=False)
    return parser


def _placement_options(p: argparse.ArgumentParser) -> None:
    from memory.lab_chain import SHAPES
    from memory.placement import METHODS

    p.add_argument(
        "--placement",
        default=None,
        help=f"instead of --strategies: checkpoint placements for a byte budget, "
        f"comma-separated ({', '.join(METHODS)}, sac: torch's SAC solver's "
        f"ops saved in every block; all: every one), each run and measured; "
        f"prints the layers each checkpoints",
    )
    p.add_argument(
        "--budget",
        default=None,
        help="with --placement: the step's peak above the parameters, in bytes "
        "(e.g. 50MiB) or as a share of the plain step's predicted peak (60%%)",
    )
    p.add_argument(
        "--shape",
        default="equal",
        choices=list(SHAPES),
        help="with --placement: equal layers, or unequal (the first MLP 16h wide, "
        "then 2h and 6h in turn)",
    )


def _placement(args, cfg: ModelConfig) -> int:
    from demos.placement_lab import SAC, run
    from memory.placement import BUDGETED, METHODS

    allowed = (*METHODS, SAC)
    methods = (
        list(allowed)
        if args.placement.strip() == "all"
        else [m.strip() for m in args.placement.split(",") if m.strip()]
    )
    unknown = [m for m in methods if m not in allowed]
    if unknown or not methods:
        raise ConfigError(
            f"placement {','.join(unknown) or args.placement!r} is unknown; "
            f"allowed: {', '.join(allowed)} or all"
        )
    text = (args.budget or "").strip()
    budgeted = sorted({*BUDGETED, SAC})
    if not text and any(m in budgeted for m in methods):
        raise ConfigError(
            f"--budget is needed for {', '.join(budgeted)}: e.g. --budget 60% or --budget 50MiB"
        )
    if text.endswith("%"):
        try:
            budget: int | float = float(text[:-1]) / 100
        except ValueError:
            raise ConfigError(f"budget={text!r}: write a share such as 60%") from None
        if not 0 < budget <= 1:
            raise ConfigError(f"budget={text!r}: a share in 1%..100%")
    else:
        budget = parse_bytes(text) if text else 0
    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    result = run(
        cfg, args.shape, budget, [m for m in methods if m != SAC], device=device, sac=SAC in methods
    )
    if args.json:
        print(json.dumps(_clean(result.to_json())))
        return 0
    print(
        f"# {args.shape} layers (MLP widths {', '.join(map(str, result.widths))}); budget "
        f"{result.budget_bytes} bytes above the parameters ({result.parameter_bytes}); "
        f"peaks measured by the live tracker, recompute counted by torch's FlopCounterMode"
    )
    for r in result.runs:
        if r.error:
            print(f"{r.method:8} {r.error}")
            continue
        within = "within budget" if r.within_budget else "OVER budget"
        print(
            f"{r.method:8} peak {r.peak_bytes} (predicted {r.predicted_peak_bytes}, {within})"
            f"; recompute {r.recompute_flops:.4g} FLOPs (predicted "
            f"{r.predicted_recompute_flops:.4g}); checkpointed layers {r.checkpointed}"
            + (
                f" (selective: the ops torch's SAC solver saves at {r.share:.1%} of each "
                f"block's op memory)"
                if r.share is not None
                else ""
            )
            + (
                f"; step {statistics.median(r.step_seconds) * 1000:.1f} ms "
                f"{'CPU' if result.timing == 'cpu' else 'wall'} (median of "
                f"{len(r.step_seconds)})"
                if r.step_seconds
                else ""
            )
        )
    return 0


def _budget_parser(sub) -> None:
    from demos.budget_settings import (
        BASE,
        BUDGETS,
        COMPILED_STRATEGIES,
        EAGER_STRATEGIES,
    )

    p = sub.add_parser(
        "budget",
        help="torch.compile's activation memory budget (private "
        "API) swept on the model, beside manual strategies",
    )
    for flag, name in (
        ("--layers", "layers"),
        ("--hidden", "hidden"),
        ("--heads", "heads"),
        ("--seq", "seq_len"),
        ("--batch", "batch"),
        ("--vocab", "vocab"),
        ("--kv-heads", "kv_heads"),
    ):
        p.add_argument(flag, dest=name, type=int, default=getattr(BASE, name))
    p.add_argument("--arch", default=BASE.arch, choices=list(ARCHS))
    p.add_argument(
        "--budgets",
        default=",".join(f"{b:g}" for b in BUDGETS),
        help="comma-separated budgets in 0..1, each compiled anew",
    )
    p.add_argument(
        "--eager",
        default=",".join(EAGER_STRATEGIES),
        help="manual strategies run eagerly (empty: none)",
    )
    p.add_argument(
        "--compiled",
        default=",".join(COMPILED_STRATEGIES),
        help="manual strategies run under torch.compile (empty: none)",
    )
    p.add_argument("--repeats", type=int, default=5, help="timed steps per point (median)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _budget(args) -> int:
    from demos.compiler_budget import sweep_budget, to_frame

    cfg = _config(args, "cpu")
    try:
        budgets = [float(b) for b in args.budgets.split(",") if b.strip()]
    except ValueError:
        raise ConfigError(
            f"budgets={args.budgets!r}: write numbers in 0..1, e.g. 1,0.5,0"
        ) from None
    if any(not 0.0 <= b <= 1.0 for b in budgets):
        raise ConfigError(f"budgets={args.budgets!r}: each must be in 0..1")
    if not 1 <= args.repeats <= 100:
        raise ConfigError(f"repeats={args.repeats} is out of range; allowed 1..100")
    names = [
        [s.strip() for s in text.split(",") if s.strip()] for text in (args.eager, args.compiled)
    ]
    frame = to_frame(sweep_budget(cfg, budgets, names[0], names[1], repeats=args.repeats))
    if args.json:
        print(
            json.dumps(
                _clean(
                    {
                        "config": cfg.as_dict(),
                        "torch": torch_version(),
                        "setting": "torch._functorch.config.activation_memory_budget (private API)",
                        "points": frame.to_dict(orient="records"),
                    }
                )
            )
        )
    else:
        print(
            "# bytes saved for backward (parameters left out); FLOPs of one training step; "
            "seconds per step (median)"
        )
        import pandas as pd

        cols = [
            "kind",
            "strategy",
            "saved_bytes",
            "flops",
            "recomputed_flops",
            "step_seconds",
            "compile_seconds",
            "max_grad_diff",
        ]
        with pd.option_context("display.width", 200, "display.max_columns", 30):
            print(frame[cols].to_string(index=False))
    return 0


def torch_version() -> str:
    import torch

    return torch.__version__


def _config(args, device: str | None = None) -> ModelConfig:
    """The model the flags describe; flags a command does not offer (the budget sweep has
    no --dtype, --dropout or --seed) keep the lab's defaults."""
    return ModelConfig(
        layers=args.layers,
        hidden=args.hidden,
        heads=args.heads,
        seq_len=args.seq_len,
        batch=args.batch,
        vocab=args.vocab,
        dtype=getattr(args, "dtype", DEFAULT.dtype),
        dropout=getattr(args, "dropout", DEFAULT.dropout),
        seed=getattr(args, "seed", DEFAULT.seed),
        arch=args.arch,
        kv_heads=args.kv_heads,
    ).validated(device)


def _clean(obj):
    """JSON-safe: NaN/inf become null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


TABLE_COLUMNS = [
    "strategy",
    "fits",
    "peak_bytes",
    "activation_bytes",
    "predicted_activation_bytes",
    "flops_counted",
    "flops_predicted",
    "flops_vs_none",
    "step_seconds",
    "cpu_seconds",
    "cpu_vs_none",
    "time_vs_none",
    "loss",
    "max_grad_diff",
    "bitwise_equal",
]


def _print_table(frame, extra: list[str] | None = None) -> None:
    import pandas as pd

    cols = (extra or []) + [c for c in TABLE_COLUMNS if c in frame.columns]
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(frame[cols].to_string(index=False))
    for _, row in frame.iterrows():
        if not row["fits"] and isinstance(row.get("error"), str):
            print(f"{row['strategy']}: {row['error']}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["plan"]:  # the planner has its own command now
        print(f"python -m demos plan: {MOVED_PLAN}", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except ConfigError as exc:
        print(f"{parser.prog} {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _mistakes(args) -> int:
    from demos.mistakes import CASES, run_cases

    unknown = [c for c in args.case or [] if c not in CASES]
    if unknown:
        raise ConfigError(f"unknown case(s): {', '.join(unknown)}; allowed {', '.join(CASES)}")
    results = run_cases(args.case)
    if args.json:
        rows = [
            {
                "id": r.case,
                "symptoms": sorted(s.value for s in CASES[r.case].symptoms),
                **r.to_json(),
            }
            for r in results
        ]
        for row in rows:  # the tracker's event log is for the snapshot export, not here
            for run in ("plain", "wrong", "fixed"):
                row[run].pop("memory_events", None)
        print(json.dumps(_clean({"cases": rows})))
        return 0
    for r in results:
        print(
            f"{r.case}: symptom {'shown' if r.wrong_shows else 'NOT shown'} the wrong way, "
            f"{'still shown' if r.fixed_shows else 'gone'} the fixed way"
        )
        for name in ("plain", "wrong", "fixed"):
            m = getattr(r, name)
            parts = [f"peak {m.peak_bytes} B ({m.peak_phase})"]
            parts += [
                f"{k} {v}"
                for k, v in (
                    ("flops", m.flops),
                    ("grad diff", m.max_grad_diff),
                    ("statistic", m.statistic),
                    ("state", m.state_bytes),
                )
                if v is not None
            ]
            if m.none_grads:
                parts.append(f"{len(m.none_grads)} parameters without gradient")
            if m.warning or m.error:
                parts.append(f"said: {m.warning or m.error}")
            print(f"  {name:5}  " + "; ".join(parts))
    return 0


def _run(args) -> int:
    if args.command == "mistakes":
        return _mistakes(args)
    from demos.measure import compare

    if args.command == "budget":
        return _budget(args)
    if args.command == "bench":
        from demos.bench import run_bench

        paths = run_bench(out=args.out, device=args.device, quick=args.quick, arch=args.arch)
        print("\n".join(str(p) for p in paths))
        return 0
    from memory.strategies import parse_strategies

    cfg = _config(args)
    specs = parse_strategies(args.strategies)
    limit = parse_bytes(args.limit) if args.limit else None
    if args.repeats < 0:
        raise ConfigError(f"repeats={args.repeats} is out of range; allowed 0..100")
    if args.command == "compare" and args.placement:
        return _placement(args, cfg)
    if args.command == "compare":
        comp = compare(
            cfg,
            specs,
            device=args.device,
            repeats=args.repeats,
            timeline=args.timeline,
            limit_bytes=limit,
        )
        if args.json:
            print(json.dumps(_clean(comp.to_json(timeline=args.timeline))))
        else:
            print(
                f"# {comp.device.label()}; parameters {comp.parameter_bytes} bytes; "
                f"bytes above the parameters; FLOPs of one whole step, counted by torch's "
                f"FlopCounterMode and predicted; seconds per step, wall and this "
                f"process's CPU time (all threads)"
            )
            if comp.busy():
                print(
                    "# timed while the machine was busy (CPU time far below wall time "
                    "or a wide spread): the times are not representative"
                )
            _print_table(comp.to_frame())
        return 0
    from demos.sweep import parse_vary, sweep

    name, values = parse_vary(args.vary)
    frame = sweep(
        cfg, name, values, specs, device=args.device, repeats=args.repeats, limit_bytes=limit
    )
    if args.json:
        print(
            json.dumps(
                _clean(
                    {"config": cfg.as_dict(), "vary": name, "rows": frame.to_dict(orient="records")}
                )
            )
        )
    elif args.csv:
        print(frame.to_csv(index=False), end="")
    else:
        _print_table(frame, [name])
    return 0
