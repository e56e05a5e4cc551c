"""The certificate's fonts for fpdf2, parsed once per process instead of on every PDF.

fpdf2's `add_font` reads and parses the whole font file (the character widths, glyph ids and
names of every glyph: DejaVu has 6,000, the CJK fallback 30,000), and its output subsets the
parsed font in place, so a parsed font serves one document. Here each font file is parsed
once, under a lock, and kept read-only. Every document gets its own `TTFFont`: it shares
what is only read (the character map, the parsed font HarfBuzz's shaping looks glyph names
up in), copies what drawing or output changes (widths, glyph ids, the font descriptor the
output numbers), and gets, just before output, a fresh lazily read font over the cached
file bytes for the subsetting to rewrite. The PDF is byte for byte the one `add_font`
would give."""

from __future__ import annotations

import copy
import io
import threading
from dataclasses import dataclass
from pathlib import Path

from fontTools.ttLib import TTFont
from fpdf import FPDF
from fpdf.fonts import SubsetMap, TTFFont

# What a document changes in its TTFFont (the rest is shared with the parsed one).
_PER_DOCUMENT = {"i", "fontkey", "cw", "glyph_ids", "missing_glyphs", "subset",
                 "biggest_size_pt", "_hbfont", "ttfont", "desc"}


@dataclass(frozen=True)
class _Parsed:
    font: TTFFont  # never changed after parsing: documents get copies of what they change
    data: bytes  # the file, for each document's own font to subset


_lock = threading.Lock()
_parsed: dict[tuple[Path, str], _Parsed | None] = {}  # None: not shareable, parse per PDF


def _parse(path: Path, style: str) -> _Parsed | None:
    scratch = FPDF()
    scratch.add_font("font", style, str(path))
    font = scratch.fonts["font" + style]
    assert isinstance(font, TTFFont)
    shareable = (
        font.color_font is None  # colour glyphs are drawn from the parsed font itself
        and not font.is_compressed
        # fpdf2 draws a .notdef into a font that lacks one: a fresh read would lack it
        and ("glyf" not in font.ttfont or ".notdef" in font.ttfont["glyf"])
    )
    return _Parsed(font, path.read_bytes()) if shareable else None


def parsed(path: Path, style: str) -> _Parsed | None:
    """The font file parsed once per process (the first caller parses, the others wait)."""
    key = (path, style)
    with _lock:
        if key not in _parsed:
            _parsed[key] = _parse(path, style)
        return _parsed[key]


def add_font(pdf: FPDF, family: str, style: str, path: Path) -> None:
    """`pdf.add_font(family, style, path)`, from the font parsed once per process."""
    shared = parsed(path, style)
    if shared is None:
        pdf.add_font(family, style, str(path))
        return
    template = shared.font
    font = TTFFont.__new__(TTFFont)
    for slot in TTFFont.__slots__:
        if slot not in _PER_DOCUMENT and hasattr(template, slot):
            setattr(font, slot, getattr(template, slot))
    font.i = len(pdf.fonts) + 1
    font.fontkey = f"{family.lower()}{style}"
    font.cw = copy.copy(template.cw)  # a defaultdict: reading a missing width adds it
    font.glyph_ids = dict(template.glyph_ids)
    font.desc = copy.copy(template.desc)  # the output numbers it and links the font file
    font.missing_glyphs = []
    font.biggest_size_pt = 0
    font._hbfont = None  # HarfBuzz's font: one per document, created when first shaped
    font.ttfont = template.ttfont  # read while drawing; replaced by `own_fonts` for output
    font.subset = SubsetMap(font)
    pdf.fonts[font.fontkey] = font


def own_fonts(pdf: FPDF) -> None:
    """Give every shared font of `pdf` its own parsed font for the output's subsetting."""
    with _lock:
        files = {id(shared.font.ttfont): shared.data for shared in _parsed.values() if shared}
    for font in pdf.fonts.values():
        if isinstance(font, TTFFont) and id(font.ttfont) in files:
            font.ttfont = TTFont(io.BytesIO(files[id(font.ttfont)]), recalcTimestamp=False,
                                 fontNumber=font.collection_font_number, lazy=True)
