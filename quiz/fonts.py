"""The certificate's fonts (DejaVu Sans, shipped in quiz/fonts/): paths, widths, coverage."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from fontTools.ttLib import TTFont

FONT_DIR = Path(__file__).with_name("fonts")
REGULAR = FONT_DIR / "DejaVuSans.ttf"
BOLD = FONT_DIR / "DejaVuSans-Bold.ttf"


@dataclass(frozen=True)
class FontMetrics:
    """Character coverage and advance widths read from a TTF's tables."""

    path: Path
    units_per_em: int
    advances: dict[int, int]  # code point -> advance width in font units

    def covers(self, char: str) -> bool:
        return ord(char) in self.advances

    def width(self, text: str, size: float) -> float:
        """Width of `text` at `size` (same unit as `size`), without kerning (as drawn)."""
        units = sum(self.advances.get(ord(ch), self.units_per_em // 2) for ch in text)
        return units * size / self.units_per_em


@functools.cache
def metrics(path: Path) -> FontMetrics:
    font = TTFont(str(path), lazy=True)
    cmap = font.getBestCmap()
    hmtx = font["hmtx"]
    advances = {code: hmtx[glyph][0] for code, glyph in cmap.items()}
    return FontMetrics(path, font["head"].unitsPerEm, advances)


def missing_characters(text: str, path: Path = BOLD) -> list[str]:
    """The distinct characters of `text` the font has no glyph for, in order of appearance."""
    font = metrics(path)
    missing: list[str] = []
    for char in text:
        if not font.covers(char) and char not in missing:
            missing.append(char)
    return missing
