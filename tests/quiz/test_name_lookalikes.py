"""Names that look like another name on the certificate: characters that draw nothing, or a
blank that is not a space, are removed as the zero-width ones are, so two certificates that
look the same carry the same signed name. Checked on the certificate PDF itself, rasterised
with PDFium: a name is drawn and compared pixel for pixel with the plain name's."""

from __future__ import annotations

import functools
import unicodedata

import pypdfium2
import pytest
import regex

from quiz.certificate_records import Certificate
from quiz.names import NameError_, normalise_name
from quiz.service import certificate_pdf

PLAIN = "Ada Lovelace"
# Each one drew exactly like PLAIN, or put a blank where none is typed.
LOOK_ALIKES = {
    "U+034F combining grapheme joiner": "Ada Lo\u034fvelace",
    "U+FE0F variation selector 16": "Ada Love\ufe0flace",
    "U+FE0E variation selector 15": "\ufe0eAda Lovelace",
    "U+E0100 ideographic variation selector": "Ada Lovelace\U000e0100",
    "U+3164 Hangul filler": "Ada\u3164 Lovelace",
    "U+115F Hangul choseong filler": "Ada \u115fLovelace",
    "U+1160 Hangul jungseong filler": "Ada\u1160 Lovelace",
    "U+FFA0 halfwidth Hangul filler": "Ada \uffa0Lovelace",
    "U+2800 Braille pattern blank": "Ada \u2800Lovelace",
    "U+17B4 Khmer vowel inherent aq": "Ada\u17b4 Lovelace",
    "U+180B Mongolian free variation selector": "Ada \u180bLovelace",
    "U+1D173 musical symbol begin beam": "Ada\U0001d173 Lovelace",
}
JOINERS = {"\u200c", "\u200d"}  # kept between letters of scripts that need them


def certificate(name: str) -> Certificate:
    return Certificate(id="4Z8K2-M9QXT-7RJ3V-H6W1P-F", attempt_id="a" * 24, name=name,
                       course="Gradient Checkpointing Lab", course_version="1.0",
                       date="2026-12-03", score=92, show_score=True, key_id="0" * 16,
                       signature="")


@functools.cache
def drawn(name: str) -> bytes:
    """The certificate PDF with this name, rasterised (RGB bytes at 100 dpi)."""
    document = pypdfium2.PdfDocument(certificate_pdf(certificate(name), "https://lab.example"))
    try:
        return document[0].render(scale=100 / 72).to_pil().convert("RGB").tobytes()
    finally:
        document.close()


def test_the_table_of_default_ignorable_code_points_is_unicodes() -> None:
    """The ranges the names module strips are Unicode's Default_Ignorable_Code_Point, as the
    regex module's Unicode database has them."""
    from quiz.names import DEFAULT_IGNORABLE

    prop = regex.compile(r"\p{Default_Ignorable_Code_Point}")
    listed = {code for lo, hi in DEFAULT_IGNORABLE for code in range(lo, hi + 1)}
    assert listed == {code for code in range(0x110000) if prop.match(chr(code))}


def test_the_renderer_draws_the_look_alikes_like_the_plain_name() -> None:
    """Why they must go: the PDF draws U+034F and U+FE0F inside a name exactly as the plain
    name (if this fails, the renderer changed and the list above needs a new look)."""
    for raw in (LOOK_ALIKES["U+034F combining grapheme joiner"],
                LOOK_ALIKES["U+FE0F variation selector 16"]):
        assert drawn(raw) == drawn(PLAIN)


@pytest.mark.parametrize("raw", LOOK_ALIKES.values(), ids=LOOK_ALIKES.keys())
def test_a_look_alike_name_is_signed_as_the_plain_name(raw: str) -> None:
    assert normalise_name(raw) == PLAIN


def _may_draw_nothing(char: str) -> bool:
    """Every cased letter and ASCII character draws ink in the certificate fonts; any other
    character is drawn alone to see (a PDF takes seconds to make on a busy machine)."""
    return not (char.isascii() or unicodedata.category(char) in ("Lu", "Ll", "Lt"))


@pytest.mark.parametrize("raw", [*LOOK_ALIKES.values(), "Nguyễn Thị Minh Khai",
                                 "Jürgen Groß-Müßig", "Ελένη Παπαδοπούλου", "Ann ❤\ufe0f Lee",
                                 "e\u034f\u0301 Lovelace"],
                         ids=[*LOOK_ALIKES.keys(), "vi", "de", "el", "emoji", "cgj-mark"])
def test_every_character_a_name_keeps_draws_something(raw: str) -> None:
    """Drawn alone, every character the stored name keeps (but spaces and the joiners a
    script needs) leaves ink: a certificate whose name draws as a blank would look like
    another's. A different stored name is a different drawing."""
    try:
        name = normalise_name(raw)
    except NameError_:
        return  # refused: nothing is signed
    assert unicodedata.is_normalized("NFC", name)
    for char in sorted(set(name) - JOINERS):
        if _may_draw_nothing(char):
            assert drawn(char) != drawn(" "), f"U+{ord(char):04X} draws nothing"
    if name != PLAIN:
        assert drawn(name) != drawn(PLAIN)
