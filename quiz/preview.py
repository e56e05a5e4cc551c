"""The certificate as a PNG preview (Pillow), drawn from the same layout as the PDF."""

from __future__ import annotations

import functools
import io

from PIL import Image, ImageDraw, ImageFont

from quiz.fonts import BOLD, REGULAR, cjk_font, needs_fallback
from quiz.layout import PAGE_HEIGHT, PAGE_WIDTH, PT, Frame, Item, QrCode, Text, qr_runs

_ANCHORS = {"left": "ls", "center": "ms", "right": "rs"}


@functools.lru_cache(maxsize=32)
def _font(bold: bool, pixels: int, cjk: bool = False) -> ImageFont.FreeTypeFont:
    fallback = cjk_font() if cjk else None  # a line DejaVu cannot draw: the CJK font's
    return ImageFont.truetype(str(fallback or (BOLD if bold else REGULAR)), pixels)


def render_png(items: list[Item], pixels_per_mm: float = 4.0) -> bytes:
    scale = pixels_per_mm
    image = Image.new("RGB", (round(PAGE_WIDTH * scale), round(PAGE_HEIGHT * scale)), "white")
    draw = ImageDraw.Draw(image)
    for item in items:
        if isinstance(item, Frame):
            draw.rectangle(
                [
                    item.x * scale,
                    item.y * scale,
                    (item.x + item.w) * scale,
                    (item.y + item.h) * scale,
                ],
                outline=item.color,
                width=max(1, round(item.line * scale)),
            )
        elif isinstance(item, Text):
            cjk = needs_fallback(item.text, BOLD if item.bold else REGULAR)
            font = _font(item.bold, max(1, round(item.size * PT * scale)), cjk)
            draw.text(
                (item.x * scale, item.y * scale),
                item.text,
                font=font,
                fill=item.color,
                anchor=_ANCHORS[item.align],
            )
        elif isinstance(item, QrCode):
            module = item.size / len(item.matrix) * scale
            for row, column, length in qr_runs(item.matrix):
                x, y = item.x * scale + column * module, item.y * scale + row * module
                draw.rectangle([x, y, x + length * module - 1, y + module - 1], fill="black")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()
