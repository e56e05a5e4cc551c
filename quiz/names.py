"""The name printed on a certificate: normalised, checked, and drawable by the PDF font."""

from __future__ import annotations

import unicodedata
from enum import Enum
from typing import Any

from quiz.fonts import cjk_font, missing_characters

MAX_NAME_LENGTH = 80
MAX_INPUT_LENGTH = 1000  # longer input is refused before any other work
# Bidirectional embeddings, overrides and isolates, and the implicit marks: they can make a
# name read differently from how it is stored.
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
_REFUSED_CATEGORIES = {"Cc", "Cs", "Co", "Cn", "Zl", "Zp"}
# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt): characters a renderer
# draws as nothing unless it supports them: the soft hyphen, the combining grapheme joiner,
# the Hangul fillers (letters, Lo, that draw nothing), the zero-width and bidi format
# characters, variation selectors (U+FE0F and the ideographic ones draw no different glyph
# in the certificate's fonts), the byte-order mark, tags.
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
# Not ignorable, but drawn as a blank that is not a space: the Braille pattern blank.
_BLANK_SYMBOLS = frozenset("\u2800")


ZWNJ, ZWJ = "\u200c", "\u200d"
# Scripts whose spelling needs a zero-width (non-)joiner between two of their letters:
# Arabic (Persian, Urdu, ...), Syriac, N'Ko, the Brahmic scripts of India and Sri Lanka,
# Myanmar, Khmer and Mongolian. Code point ranges of their blocks.
_JOINING_SCRIPTS = (
    (0x0600, 0x06FF), (0x0700, 0x074F), (0x0750, 0x077F), (0x07C0, 0x07FF),
    (0x0860, 0x08FF), (0x0900, 0x0DFF), (0x1000, 0x109F), (0x1780, 0x17FF),
    (0x1800, 0x18AF), (0xA8E0, 0xA8FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF),
)
# Format characters that draw something (prepended number signs, the Syriac abbreviation
# mark) and are kept.
_VISIBLE_FORMAT = frozenset("\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u08e2")


def _in_joining_script(char: str) -> bool:
    code = ord(char)
    return unicodedata.category(char)[0] in "LM" and any(
        lo <= code <= hi for lo, hi in _JOINING_SCRIPTS)


def draws_nothing(char: str) -> bool:
    """True for a character the certificate draws as nothing, or as a blank that is not a
    space: a default-ignorable code point (zero-width and format characters, the combining
    grapheme joiner, variation selectors, Hangul fillers, ...), any other invisible format
    character, or the Braille blank."""
    code = ord(char)
    return (char in _BLANK_SYMBOLS
            or (unicodedata.category(char) == "Cf" and char not in _VISIBLE_FORMAT)
            or any(lo <= code <= hi for lo, hi in DEFAULT_IGNORABLE))


def strip_invisible(text: str) -> str:
    """`text` without the characters that draw nothing (draws_nothing: zero-width space,
    word joiner, byte-order mark, soft hyphen, U+034F, U+FE0F, Hangul fillers, the Braille
    blank, tags, ...), which would let two names that look the same on the certificate
    differ. A zero-width joiner or non-joiner stays where a script needs it: between two
    letters of a joining script (Persian می‌خواهم, Hindi क्‍ष)."""
    def needed(index: int, char: str) -> bool:
        return (char in (ZWJ, ZWNJ) and 0 < index < len(text) - 1
                and _in_joining_script(text[index - 1]) and _in_joining_script(text[index + 1]))

    return "".join(char for index, char in enumerate(text)
                   if not draws_nothing(char) or needed(index, char))


def has_visible_letter(text: str) -> bool:
    """At least one letter (Unicode category L*) that draws something: a name of zero-width
    spaces, a byte-order mark, soft hyphens, lone combining marks, Hangul fillers or a
    Braille blank has none."""
    return any(unicodedata.category(ch).startswith("L") and not draws_nothing(ch)
               for ch in text)


class NameProblem(Enum):
    """Why a name cannot go on a certificate: a stable id; the page words it (with the
    error's `params`) in the learner's language."""

    EMPTY = "empty"  # nothing but spaces
    TOO_LONG = "too-long"  # params: limit, length
    BIDI_CONTROL = "bidi-control"  # params: character ("U+202E")
    CONTROL = "control-character"  # params: character
    NO_VISIBLE_LETTER = "no-visible-letter"
    UNDRAWABLE = "undrawable"  # params: characters, more (how many more beyond those shown)
    UNDRAWABLE_NO_CJK = "undrawable-no-cjk-font"  # the same, and no CJK font is installed


class NameError_(ValueError):
    """A name that cannot go on a certificate: `problem` says why, `params` the details."""

    def __init__(self, problem: NameProblem, **params: Any) -> None:
        self.problem = problem
        self.params = params
        details = ", ".join(f"{key}={value!r}" for key, value in params.items())
        super().__init__(f"{problem.value}" + (f" ({details})" if details else ""))


SHOWN_CHARACTERS = 3  # the undrawable characters a refusal names


def _code(char: str) -> str:
    return f"U+{ord(char):04X}"


def _describe(char: str) -> str:
    name = unicodedata.name(char, "unnamed character")
    return f"{char} ({_code(char)} {name.title()})"


def normalise_name(raw: str) -> str:
    """The name as it will be printed and signed: NFC, characters that draw nothing removed
    (strip_invisible), single spaces, trimmed. Raises NameError_ with the reason."""
    if len(raw) > MAX_INPUT_LENGTH:
        raise NameError_(NameProblem.TOO_LONG, limit=MAX_NAME_LENGTH, length=len(raw))
    bidi = [ch for ch in raw if ch in BIDI_CONTROLS]
    if bidi:
        raise NameError_(NameProblem.BIDI_CONTROL, character=_code(bidi[0]))
    controls = [ch for ch in raw if unicodedata.category(ch) in _REFUSED_CATEGORIES]
    if controls:
        raise NameError_(NameProblem.CONTROL, character=_code(controls[0]))
    if not " ".join(raw.split()):
        raise NameError_(NameProblem.EMPTY)
    # NFC again after stripping: a removed U+034F may have kept two characters apart.
    name = " ".join(unicodedata.normalize(
        "NFC", strip_invisible(unicodedata.normalize("NFC", raw))).split())
    if not name or not has_visible_letter(name):
        raise NameError_(NameProblem.NO_VISIBLE_LETTER)
    if len(name) > MAX_NAME_LENGTH:
        raise NameError_(NameProblem.TOO_LONG, limit=MAX_NAME_LENGTH, length=len(name))
    missing = missing_characters(name)
    if missing:
        problem = (NameProblem.UNDRAWABLE if cjk_font() is not None
                   else NameProblem.UNDRAWABLE_NO_CJK)
        raise NameError_(problem,
                         characters=", ".join(map(_describe, missing[:SHOWN_CHARACTERS])),
                         more=max(0, len(missing) - SHOWN_CHARACTERS))
    return name
