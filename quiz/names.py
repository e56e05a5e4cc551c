"""The name printed on a certificate: normalised, checked, and drawable by the PDF font."""

from __future__ import annotations

import unicodedata

from quiz.fonts import cjk_font, missing_characters

MAX_NAME_LENGTH = 80
MAX_INPUT_LENGTH = 1000  # longer input is refused before any other work
# Bidirectional embeddings, overrides and isolates, and the implicit marks: they can make a
# name read differently from how it is stored.
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
_REFUSED_CATEGORIES = {"Cc", "Cs", "Co", "Cn", "Zl", "Zp"}
# Hangul fillers are letters (Lo) that draw nothing.
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")


def has_visible_letter(text: str) -> bool:
    """At least one letter (Unicode category L*) that draws something: a name of zero-width
    spaces, a byte-order mark, soft hyphens, lone combining marks or a Braille blank has none."""
    return any(unicodedata.category(ch).startswith("L") and ch not in _BLANK_LETTERS
               for ch in text)


class NameError_(ValueError):
    """A name that cannot go on a certificate; the message says why, for the learner."""


def _describe(char: str) -> str:
    name = unicodedata.name(char, "unnamed character")
    return f"{char} (U+{ord(char):04X} {name.title()})"


def normalise_name(raw: str) -> str:
    """The name as it will be printed and signed: NFC, single spaces, trimmed.
    Raises NameError_ with a message for the learner."""
    if len(raw) > MAX_INPUT_LENGTH:
        raise NameError_(
            f"A name has at most {MAX_NAME_LENGTH} characters; this one has {len(raw)}."
        )
    bidi = [ch for ch in raw if ch in BIDI_CONTROLS]
    if bidi:
        raise NameError_(
            "The name contains an invisible text-direction control "
            f"(U+{ord(bidi[0]):04X}); please type it without one."
        )
    controls = [ch for ch in raw if unicodedata.category(ch) in _REFUSED_CATEGORIES]
    if controls:
        raise NameError_(
            f"The name contains a control or unassigned character (U+{ord(controls[0]):04X}); "
            "please type it without one."
        )
    name = " ".join(unicodedata.normalize("NFC", raw).split())
    if not name:
        raise NameError_("Please type the name to print on the certificate.")
    if not has_visible_letter(name):
        raise NameError_(
            "The name has no visible letter (only invisible or combining characters, "
            "punctuation or symbols); please type the name to print."
        )
    if len(name) > MAX_NAME_LENGTH:
        raise NameError_(
            f"A name has at most {MAX_NAME_LENGTH} characters; this one has {len(name)}."
        )
    missing = missing_characters(name)
    if missing:
        shown = ", ".join(_describe(ch) for ch in missing[:3])
        cjk = cjk_font() is not None
        covered = "Chinese, Japanese and Korean, " if cjk else ""
        lacking = "Chinese, Japanese or Korean characters or " if not cjk else ""
        raise NameError_(
            f"The certificate fonts (DejaVu Sans{' and a CJK font' if cjk else ''}) "
            f"cannot draw {shown}{' and more' if len(missing) > 3 else ''}. They cover Latin "
            f"(Vietnamese and German included), Greek, Cyrillic, Arabic, Hebrew, {covered}"
            f"but not {lacking}colour emoji. Please write the name with letters they can "
            "draw, for example in a Latin transcription."
        )
    return name
