"""Just enough PDF reading for the tests: which characters the embedded (subset) fonts can
show, read from their ToUnicode maps. A subset font holds only the glyphs the page uses, so a
character listed here was drawn with a real glyph of the shipped font."""

from __future__ import annotations

import re
import zlib

_STREAM = re.compile(rb"stream\r?\n(.*?)\r?\nendstream", re.DOTALL)
_BFCHAR = re.compile(rb"beginbfchar(.*?)endbfchar", re.DOTALL)
_PAIR = re.compile(rb"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>")


def embedded_characters(pdf: bytes) -> set[str]:
    characters: set[str] = set()
    for raw in _STREAM.findall(pdf):
        try:
            stream = zlib.decompress(raw)
        except zlib.error:
            stream = raw
        for block in _BFCHAR.findall(stream):
            for _, text in _PAIR.findall(block):
                characters.update(bytes.fromhex(text.decode()).decode("utf-16-be"))
    return characters
