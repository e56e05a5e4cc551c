"""The certificate's page as a list of drawing operations in millimetres (A4 landscape).

One layout, two renderers: `quiz.pdf` (fpdf2) and `quiz.preview` (Pillow, the PNG preview),
so the preview shows what the PDF holds. The words are in the certificate's language (the
one the learner took the quiz in), through the catalog with an explicit language: this runs
outside Streamlit, and one server draws certificates in several languages at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import segno

from i18n import gettext
from quiz.certificate_records import Certificate, long_date
from quiz.config import verify_url
from quiz.fonts import BOLD, metrics

PAGE_WIDTH = 297.0
PAGE_HEIGHT = 210.0
NAME_MAX_SIZE = 34.0
NAME_MIN_SIZE = 10.0
NAME_MAX_WIDTH = 240.0
PT = 25.4 / 72  # millimetres per point
INK = (22, 44, 84)
GREY = (90, 90, 90)
ACCENT = (196, 140, 30)
Align = Literal["left", "center", "right"]


@dataclass(frozen=True)
class Text:
    x: float  # the anchor: left edge, centre or right edge, per `align`
    y: float  # baseline
    text: str
    size: float  # points
    bold: bool = False
    align: Align = "left"
    color: tuple[int, int, int] = INK


@dataclass(frozen=True)
class Frame:
    x: float
    y: float
    w: float
    h: float
    line: float  # line width, mm
    color: tuple[int, int, int] = INK


@dataclass(frozen=True)
class QrCode:
    x: float
    y: float
    size: float
    matrix: tuple[tuple[bool, ...], ...]


Item = Text | Frame | QrCode


def name_lines(name: str) -> list[tuple[str, float]]:
    """The name as (line, size) pairs that fit NAME_MAX_WIDTH: one line when it fits at
    NAME_MIN_SIZE or more, else two lines split at the space nearest the middle; a name
    that still does not fit is shrunk further rather than drawn past the border."""

    def fits_at(line: str) -> float:
        width = metrics(BOLD).width(line, NAME_MAX_SIZE * PT)
        return NAME_MAX_SIZE if width <= NAME_MAX_WIDTH else NAME_MAX_SIZE * NAME_MAX_WIDTH / width

    size = fits_at(name)
    if size >= NAME_MIN_SIZE:
        return [(name, size)]
    spaces = [i for i, ch in enumerate(name) if ch == " "]
    if spaces:
        cut = min(spaces, key=lambda i: abs(i - len(name) / 2))
        lines = [name[:cut], name[cut + 1:]]
        size = min(fits_at(line) for line in lines)
        return [(line, size) for line in lines]
    return [(name, size)]


def _name_items(name: str, centre: float, baseline: float) -> list[Item]:
    lines = name_lines(name)
    step = lines[0][1] * PT * 1.15  # line height, mm
    first = baseline - step * (len(lines) - 1)
    return [Text(centre, first + number * step, line, size, bold=True, align="center")
            for number, (line, size) in enumerate(lines)]


def qr_matrix(data: str) -> tuple[tuple[bool, ...], ...]:
    code = segno.make(data, error="m", micro=False)
    return tuple(tuple(bool(cell) for cell in row) for row in code.matrix)


def certificate_title(certificate: Certificate) -> str:
    """The PDF's document title, in the certificate's language."""
    return gettext(certificate.lang, "{course}: certificate {id}", course=certificate.course,
                   id=certificate.id)


def certificate_layout(certificate: Certificate, url: str | None = None) -> list[Item]:
    """Every mark on the page, worded in the certificate's language; `url` defaults to the
    configured verify link."""
    link = url or verify_url(certificate.id)
    code = certificate.lang
    centre = PAGE_WIDTH / 2
    qr_size = 40.0
    return [
        Frame(8, 8, PAGE_WIDTH - 16, PAGE_HEIGHT - 16, 1.4),
        Frame(12, 12, PAGE_WIDTH - 24, PAGE_HEIGHT - 24, 0.4, ACCENT),
        Text(centre, 42, gettext(code, "CERTIFICATE OF COMPLETION"), 28, bold=True,
             align="center"),
        Text(centre, 60, gettext(code, "This certifies that"), 14, align="center", color=GREY),
        *_name_items(certificate.name, centre, 82),
        Text(centre, 98, gettext(code, "has passed the final quiz of the course"), 14,
             align="center", color=GREY),
        Text(centre, 114, certificate.course, 22, bold=True, align="center"),
        Text(centre, 122, gettext(code, "version {version}", version=certificate.course_version),
             10, align="center", color=GREY),
        Text(24, 146, gettext(code, "Date: {date}", date=long_date(certificate.date, code)), 12),
        # The score only when the holder chose to show it, as on the verify page.
        Text(24, 156, gettext(code, "Score: {score:.0%}", score=certificate.score / 100)
             if certificate.show_score else gettext(code, "Score: not shown by the holder"),
             12),
        Text(24, 168, gettext(code, "Certificate ID"), 10, color=GREY),
        Text(24, 177, certificate.id, 15, bold=True),
        QrCode(PAGE_WIDTH - 24 - qr_size, 134, qr_size, qr_matrix(link)),
        Text(24, 186, gettext(code, "Verify at {link}", link=link), 9, color=GREY),
        Text(24, 191, gettext(code, "Ed25519 signature, key {key}:", key=certificate.key_id),
             6.5, color=GREY),
        Text(24, 194.5, certificate.signature, 6.5, color=GREY),
    ]


def qr_runs(matrix: tuple[tuple[bool, ...], ...]) -> list[tuple[int, int, int]]:
    """Dark modules merged into horizontal runs: (row, first column, length)."""
    runs = []
    for row, cells in enumerate(matrix):
        column = 0
        while column < len(cells):
            if cells[column]:
                start = column
                while column < len(cells) and cells[column]:
                    column += 1
                runs.append((row, start, column - start))
            else:
                column += 1
    return runs
