"""Megatron-LM's own argument parser, for checking the flags the planner prints.

The megatron-core package ships megatron/core only; the training script's parser
(megatron/training/arguments.py: add_megatron_arguments, parse_args, validate_args) lives
in the Megatron-LM repository. `load_arguments(source)` imports it from a checkout of that
repository at the tag of the installed megatron-core (core_v0.16.1), beside the installed
megatron.core, without megatron/training/__init__.py (which imports the whole training
loop, Triton's kernels among it): only what arguments.py needs (global_vars, utils,
argument_utils and megatron/legacy; the tokenizers want `six` and `regex`).

Without a checkout the tests check the flags against FLAGS_FILE: every option of that
parser (its option strings, nargs, choices, type, action and default), written from it by

    .venv-frameworks/bin/python -m tests.frameworks.megatron_source <checkout>
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import types
from pathlib import Path
from typing import Any

TAG = "core_v0.16.1"
FLAGS_FILE = Path(__file__).with_name(f"megatron_{TAG}_flags.json")
GLOBAL_GETTERS = ("get_args", "get_timers", "get_adlr_autoresume", "get_signal_handler",
                  "get_tokenizer", "get_tensorboard_writer", "get_wandb_writer",
                  "get_one_logger")
TYPES: dict[str, Any] = {"int": int, "float": float, "str": str}


def load_arguments(source: Path) -> types.ModuleType:
    """megatron.training.arguments from the checkout `source` (its megatron/training and
    megatron/legacy), over the installed megatron.core."""
    import megatron

    if str(source) not in sys.path:  # megatron.legacy (which utils imports), after core
        sys.path.append(str(source))
    if "megatron.training" not in sys.modules:
        package = types.ModuleType("megatron.training")
        package.__path__ = [str(source / "megatron" / "training")]
        sys.modules["megatron.training"] = package
        megatron.training = package  # type: ignore[attr-defined]
        global_vars = importlib.import_module("megatron.training.global_vars")
        for name in GLOBAL_GETTERS:
            setattr(package, name, getattr(global_vars, name))
    return importlib.import_module("megatron.training.arguments")


def _action_kind(action: argparse.Action) -> str:
    return type(action).__name__.lstrip("_").replace("Action", "").lower() or "store"


def flag_table(arguments: types.ModuleType) -> list[dict]:
    """Every option of Megatron's parser as plain data."""
    parser = arguments.add_megatron_arguments(
        argparse.ArgumentParser(allow_abbrev=False, add_help=False))
    table = []
    for action in parser._actions:
        if not action.option_strings:
            continue
        kind = getattr(action.type, "__name__", None) if action.type else None
        table.append({"options": list(action.option_strings), "dest": action.dest,
                      "action": _action_kind(action), "nargs": action.nargs,
                      "choices": (None if action.choices is None else
                                  [c if isinstance(c, int | float | str) else str(c)
                                   for c in action.choices]),
                      "type": kind if kind in TYPES else None,
                      "default": (action.default if isinstance(
                          action.default, bool | int | float | str | type(None)) else None)})
    return table


def read_table() -> list[dict]:
    return json.loads(FLAGS_FILE.read_text(encoding="utf-8"))


def table_parser(table: list[dict]) -> argparse.ArgumentParser:
    """A parser with the table's options: unknown flags, missing or extra values, values
    outside the choices or of the wrong type fail as in Megatron's own parser."""
    parser = argparse.ArgumentParser(allow_abbrev=False, add_help=False,
                                     exit_on_error=False)
    for row in table:
        kwargs: dict[str, Any] = {"dest": row["dest"], "default": row["default"]}
        action, options = row["action"], row["options"]
        if action == "booleanoptional":  # --x and --no-x; argparse adds the second
            positive = [o for o in options if not o.startswith("--no-")]
            parser.add_argument(*positive, dest=row["dest"], default=row["default"],
                                action=argparse.BooleanOptionalAction)
            continue
        if action in ("storetrue", "storefalse", "storeconst", "count", "appendconst"):
            kwargs["action"] = {"storetrue": "store_true", "storefalse": "store_false",
                                "count": "count"}.get(action, "store_true")
        else:
            kwargs["action"] = "append" if action == "append" else "store"
            if row["nargs"] is not None:
                kwargs["nargs"] = row["nargs"]
            if row["type"]:
                kwargs["type"] = TYPES[row["type"]]
            if row["choices"] is not None:
                kwargs["choices"] = row["choices"]
        parser.add_argument(*options, **kwargs)
    return parser


def main(argv: list[str]) -> int:
    table = flag_table(load_arguments(Path(argv[0]).resolve()))
    rows = ",\n".join(json.dumps(row) for row in table)
    FLAGS_FILE.write_text(f"[\n{rows}\n]\n", encoding="utf-8")
    print(f"{len(table)} options written to {FLAGS_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
