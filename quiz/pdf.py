"""The certificate as a PDF (fpdf2, the shipped DejaVu Sans, a CJK fallback font when one is
installed, HarfBuzz shaping when present). fpdf2 embeds only the glyphs used (subsetting),
so a 5 MB CJK font adds a few kilobytes per name."""

from __future__ import annotations

import importlib.util

from fpdf import FPDF

from quiz.config import COURSE_NAME
from quiz.fonts import BOLD, REGULAR, cjk_font, needs_fallback
from quiz.layout import PAGE_HEIGHT, PAGE_WIDTH, PT, Frame, Item, QrCode, Text, qr_runs
from quiz.pdf_fonts import add_font, own_fonts

FAMILY = "DejaVu"
CJK_FAMILY = "CJK"


def _draw_text(pdf: FPDF, item: Text) -> None:
    """A line of text on its baseline. `cell()` rather than `text()`, because only cells are
    shaped (joined Arabic letters, right-to-left order)."""
    pdf.set_font(FAMILY, "B" if item.bold else "", item.size)
    pdf.set_text_color(*item.color)
    height = item.size * PT
    if item.align == "center":
        half = min(item.x, PAGE_WIDTH - item.x)
        left, width, align = item.x - half, 2 * half, "C"
    elif item.align == "right":
        left, width, align = 0.0, item.x, "R"
    else:
        left, width, align = item.x, PAGE_WIDTH - item.x, "L"
    # fpdf2 puts a cell's baseline 0.5 h + 0.3 size below its top: 0.8 size when h == size.
    pdf.set_xy(left, item.y - 0.8 * height)
    pdf.cell(width, height, item.text, align=align)


def _needs_fallback(items: list[Item]) -> bool:
    """Whether a text has a character DejaVu lacks: only then is the CJK font embedded."""
    texts = [item.text for item in items if isinstance(item, Text)]
    return any(needs_fallback(text, face) for text in texts for face in (REGULAR, BOLD))


def render_pdf(items: list[Item], title: str = COURSE_NAME) -> bytes:
    pdf = FPDF(orientation="L", unit="mm", format=(PAGE_HEIGHT, PAGE_WIDTH))
    pdf.set_auto_page_break(False)
    pdf.set_margin(0)
    pdf.c_margin = 0
    pdf.set_title(title)
    pdf.set_creator(COURSE_NAME)
    add_font(pdf, FAMILY, "", REGULAR)
    add_font(pdf, FAMILY, "B", BOLD)
    fallback = cjk_font() if _needs_fallback(items) else None
    if fallback is not None:  # one weight: bold CJK names are drawn in its regular face
        add_font(pdf, CJK_FAMILY, "", fallback)
        add_font(pdf, CJK_FAMILY, "B", fallback)
        pdf.set_fallback_fonts([CJK_FAMILY], exact_match=False)
    if importlib.util.find_spec("uharfbuzz") is not None:
        pdf.set_text_shaping(True)  # right-to-left scripts and joined letters
    pdf.add_page()
    for item in items:
        if isinstance(item, Frame):
            pdf.set_draw_color(*item.color)
            pdf.set_line_width(item.line)
            pdf.rect(item.x, item.y, item.w, item.h)
        elif isinstance(item, Text):
            _draw_text(pdf, item)
        elif isinstance(item, QrCode):
            module = item.size / len(item.matrix)
            pdf.set_fill_color(0, 0, 0)
            for row, column, length in qr_runs(item.matrix):
                pdf.rect(
                    item.x + column * module,
                    item.y + row * module,
                    length * module,
                    module,
                    style="F",
                )
    own_fonts(pdf)
    return bytes(pdf.output())
