"""What every command of the course shares in a terminal: an argument parser whose bad
option ends with one line on stderr and exit code 2, never a traceback, and whose help
shows each option's default. Used by `python -m demos` and `python -m planner`."""

from __future__ import annotations

import argparse


def _unset(default: object) -> bool:
    """A default that says nothing: none, a flag's False, argparse's SUPPRESS (0 is a
    value: `--kv-heads 0`)."""
    return default is None or default is False or default == argparse.SUPPRESS


class DefaultsShown(argparse.HelpFormatter):
    """Every option's help ends with its default, where it has one worth showing (the
    choices are in the option's own line)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (action.option_strings and not _unset(action.default)
                and "default" not in text):
            text += (" " if text else "") + "(default: %(default)s)"
        return text


class CourseParser(argparse.ArgumentParser):
    """Bad options end with one line on stderr and exit code 2, never a traceback; the
    help shows each option's default."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        kwargs.setdefault("formatter_class", DefaultsShown)
        super().__init__(*args, **kwargs)

    def _add_action(self, action: argparse.Action) -> argparse.Action:
        if action.help is None:  # argparse prints no line for it, so no default either
            action.help = ""
            if action.option_strings and not _unset(action.default):
                action.help = "(default: %(default)s)"
        return super()._add_action(action)

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")
