"""Showing untrusted text (names, revocation reasons) through Markdown as literal text."""

from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>&$:])")


def escape_markdown(text: str) -> str:
    """`text` with every Markdown (and HTML-looking) character backslash-escaped, and line
    breaks flattened, so it renders exactly as typed."""
    return _SPECIAL.sub(r"\\\1", " ".join(text.split()))
