"""The certificate's fonts are parsed once per process and lent to every PDF: each PDF is the
one fpdf2's own `add_font` gives (byte for byte), the second render of a process is as
whole as the first, and learners' certificates drawn at once in threads all come out
right."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from fpdf import FPDF

import quiz.pdf
from quiz.certificate_records import Certificate
from quiz.fonts import cjk_font
from quiz.layout import certificate_layout
from quiz.pdf import render_pdf
from tests.quiz.pdf_text import embedded_characters

LATIN = "Nguyễn Thị Minh Khai"
CJK = ["Lý Tiểu Long 李小龍"] if cjk_font() else []  # the CJK font: 0.5 CPU-s a render
NAMES = [LATIN, "Jürgen Groß-Müßig", *CJK]


def _layout(name: str, lang: str = "vi") -> list:
    certificate = Certificate(
        id="K7QF-3MXD-8WPA", attempt_id="attempt", name=name, course="course",
        course_version="1", date="2026-03-04", score=92, show_score=True, key_id="key",
        signature="signature", lang=lang,
    )
    return certificate_layout(certificate, "https://example.org/verify?id=K7QF-3MXD-8WPA")


class _Dated(FPDF):
    """fpdf2's FPDF with a fixed creation date, so two renders can be compared byte for byte."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        super().__init__(*args, **kwargs)
        self.set_creation_date(datetime(2026, 3, 4, tzinfo=UTC))


def _page_text(pdf: bytes) -> str:
    """The page's text as a PDF reader extracts it (the file must open to give any)."""
    document = pdfium.PdfDocument(pdf)
    assert len(document) == 1
    return document[0].get_textpage().get_text_range()


def _parsing_every_time(pdf: FPDF, family: str, style: str, path: Path) -> None:
    pdf.add_font(family, style, str(path))


@pytest.mark.parametrize("name", [LATIN, *CJK])
def test_a_pdf_from_the_shared_fonts_is_the_one_fpdf_gives(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quiz.pdf, "FPDF", _Dated)
    shared = [render_pdf(_layout(name)) for _ in range(2)]
    monkeypatch.setattr(quiz.pdf, "add_font", _parsing_every_time)
    monkeypatch.setattr(quiz.pdf, "own_fonts", lambda pdf: None)
    parsed_each_time = render_pdf(_layout(name))
    assert shared == [parsed_each_time] * 2


def test_every_render_of_a_process_is_a_whole_pdf() -> None:
    """The output's subsetting rewrites a parsed font: were the shared one rewritten, the
    next certificate would lose the glyphs the first one did not use."""
    first = render_pdf(_layout("Ada Lovelace", "en"))
    for name in NAMES:
        pdf = render_pdf(_layout(name))
        assert pdf.startswith(b"%PDF-") and pdf.rstrip().endswith(b"%%EOF")
        assert set(name.replace(" ", "")) <= embedded_characters(pdf)
        assert name in _page_text(pdf)
    assert "Ada Lovelace" in _page_text(render_pdf(_layout("Ada Lovelace", "en")))
    assert "Ada Lovelace" in _page_text(first)


def test_certificates_drawn_at_once_in_threads_are_each_right(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Byte for byte the PDF each name gets alone: a font object shared by PDFs written at
    once (the output numbers its descriptor) would point one PDF at another's objects."""
    monkeypatch.setattr(quiz.pdf, "FPDF", _Dated)
    names = [*NAMES, LATIN]  # a name twice: the same font lent to two PDFs at once
    alone = {name: render_pdf(_layout(name)) for name in NAMES}
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        pdfs = list(pool.map(lambda name: render_pdf(_layout(name)), names))
    for name, pdf in zip(names, pdfs, strict=True):
        assert pdf == alone[name]
        assert name in _page_text(pdf)


def test_latin_names_leave_the_cjk_font_out() -> None:
    """The CJK fallback is embedded only when a text needs it (a Latin-only page used to
    carry two empty subsets of it)."""
    assert render_pdf(_layout(LATIN)).count(b"/FontFile2") == 2  # DejaVu regular and bold
    if cjk_font() is not None:
        assert render_pdf(_layout(CJK[0])).count(b"/FontFile2") == 4
