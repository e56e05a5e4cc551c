"""The certificate's fonts: DejaVu Sans (shipped in quiz/fonts/) and, for Chinese, Japanese
and Korean names, a CJK fallback font found on the system (Debian's fonts-wqy-microhei,
installed by `make run`/`make test` when missing, or `CERT_CJK_FONT`); without it such names
are refused with a clear reason. Paths, widths (the fallback's glyphs included), coverage."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from fontTools.ttLib import TTFont

FONT_DIR = Path(__file__).with_name("fonts")
REGULAR = FONT_DIR / "DejaVuSans.ttf"
BOLD = FONT_DIR / "DejaVuSans-Bold.ttf"
CJK_CANDIDATES = (
    Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),  # fonts-wqy-microhei, 5 MB
    Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"),  # fonts-noto-cjk
    Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc"),  # fonts-wqy-zenhei
)


def cjk_font() -> Path | None:
    """The CJK fallback font (`CERT_CJK_FONT`, else the first one installed), or None."""
    configured = os.environ.get("CERT_CJK_FONT")
    for path in ((Path(configured),) if configured else CJK_CANDIDATES):
        if path.is_file():
            return path
    return None


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
def _own_metrics(path: Path) -> FontMetrics:
    font = TTFont(str(path), lazy=True, fontNumber=0)  # the first face of a collection
    cmap = font.getBestCmap()
    hmtx = font["hmtx"]
    advances = {code: hmtx[glyph][0] for code, glyph in cmap.items()}
    return FontMetrics(path, font["head"].unitsPerEm, advances)


def metrics(path: Path) -> FontMetrics:
    """The font's coverage and widths, with the CJK fallback's glyphs added for what it
    lacks (scaled to its units), as the PDF draws them."""
    own = _own_metrics(path)
    fallback = cjk_font()
    return _merged(path, fallback) if fallback and fallback != path else own


@functools.cache
def _merged(path: Path, fallback_path: Path) -> FontMetrics:
    own, fallback = _own_metrics(path), _own_metrics(fallback_path)
    scale = own.units_per_em / fallback.units_per_em
    advances = {code: round(width * scale) for code, width in fallback.advances.items()}
    advances.update(own.advances)
    return FontMetrics(own.path, own.units_per_em, advances)


def missing_characters(text: str, path: Path = BOLD) -> list[str]:
    """The distinct characters of `text` the font has no glyph for, in order of appearance."""
    font = metrics(path)
    missing: list[str] = []
    for char in text:
        if not font.covers(char) and char not in missing:
            missing.append(char)
    return missing


def needs_fallback(text: str, path: Path = BOLD) -> bool:
    """True when `text` has a character the DejaVu face lacks (drawn by the CJK font)."""
    own = _own_metrics(path)
    return any(not own.covers(char) for char in text)
