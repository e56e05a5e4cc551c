"""Comments and docstrings inside the code the planner prints, wrapped to one width."""

from __future__ import annotations

import textwrap

COMMENT_WIDTH = 88  # the longest line a wrapped comment or docstring of a snippet makes


def comment(text: str, indent: str = "") -> list[str]:
    """`text` (already in the snippet's language) as comment lines, wrapped."""
    return textwrap.wrap(text, COMMENT_WIDTH, initial_indent=f"{indent}# ",
                         subsequent_indent=f"{indent}# ", break_long_words=False,
                         break_on_hyphens=False)


def docstring(text: str, indent: str) -> str:
    """`text` as a docstring at `indent`, wrapped (a translation never closes it early)."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    lines = textwrap.wrap(text, COMMENT_WIDTH - 3, initial_indent=f'{indent}"""',
                          subsequent_indent=indent, break_long_words=False,
                          break_on_hyphens=False)
    return "\n".join(lines) + '"""'
