"""Certificate IDs: 100 random bits in Crockford base32, grouped, with a check symbol.

Format: ``XXXXX-XXXXX-XXXXX-XXXXX-C`` (20 data symbols of 5 bits, then one check symbol).

The symbols are Crockford's: data in ``0-9 A-Z`` without I, L, O, U; the check symbol may also
be one of Crockford's five extra check symbols ``* ~ $ = U`` (values 32 to 36). Parsing follows
Crockford's decoding rules: case does not matter, spaces and dashes are ignored, O reads as 0
and I or L read as 1.

The check value is modulo 37, the prime Crockford chose. Plain Crockford takes ``value mod 37``;
this module instead picks the check ``c`` so that the whole string, read as base-32 digits with
``c`` as the last digit, is 0 modulo 37 (``(32 * value + c) % 37 == 0``, the "pure" system of
ISO 7064). It costs nothing and catches one more human slip: plain Crockford misses a swap of
the last data symbol with the check symbol for 1 ID in 37; this variant catches every single
substitution and every swap of neighbouring symbols, the check symbol included.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from enum import Enum
from urllib.parse import unquote

from i18n import N_

DATA_SYMBOLS = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
CHECK_SYMBOLS = DATA_SYMBOLS + "*~$=U"
DATA_LENGTH = 20
GROUP = 5
BITS = DATA_LENGTH * 5  # 100
MAX_INPUT_LENGTH = 100  # anything longer is not an ID, whatever it holds
_MODULUS = 37
_ALIASES = {"O": "0", "I": "1", "L": "1"}
_IGNORED = frozenset(" -\t\u00a0")


class IdProblem(Enum):
    """Why a typed text is not a certificate ID."""

    # The values are English messages of the catalog: the pages word them per language.
    EMPTY = N_("nothing was typed")
    TOO_LONG = N_("it is far too long to be an ID")
    BAD_SYMBOL = N_("it contains a symbol that IDs never use")
    BAD_LENGTH = N_("it has the wrong number of symbols (an ID has 20, then a check symbol)")
    BAD_CHECK = N_("its check symbol does not match the other symbols")


class IdError(ValueError):
    def __init__(self, problem: IdProblem, detail: str = "") -> None:
        self.problem = problem
        super().__init__(detail or f"not a certificate ID: {problem.value}")


def _check_value(value: int) -> int:
    return (-32 * value) % _MODULUS


def _encode(value: int, length: int) -> str:
    symbols = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        symbols.append(DATA_SYMBOLS[digit])
    return "".join(reversed(symbols))


def format_id(value: int) -> str:
    """The grouped text of a 100-bit value, check symbol included."""
    if not 0 <= value < 1 << BITS:
        raise ValueError("an ID value has 100 bits")
    data = _encode(value, DATA_LENGTH)
    groups = [data[i : i + GROUP] for i in range(0, DATA_LENGTH, GROUP)]
    return "-".join([*groups, CHECK_SYMBOLS[_check_value(value)]])


# Check symbols spelled out in a file name: "*" is refused by file systems (Windows; a
# browser saves it as "_", which reads as part of the ID), "$" and "=" mean something to a
# shell. Spelled, not dropped: the name still carries the whole ID.
_FILE_SPELLING = {"*": "star", "$": "dollar", "=": "equals"}


def file_name_part(certificate_id: str) -> str:
    """The ID as a downloaded file's name may hold it: the same text, the check symbols a
    file system or a shell minds spelled out."""
    return "".join(_FILE_SPELLING.get(ch, ch) for ch in certificate_id)


def new_id() -> str:
    """A fresh ID from 100 bits of `secrets`."""
    return format_id(secrets.randbits(BITS))


@dataclass(frozen=True)
class ParsedId:
    value: int

    @property
    def text(self) -> str:
        return format_id(self.value)


MAX_LINK_LENGTH = 2000  # a pasted verify link: its id= part is read
_LINK_ID = re.compile(r"[?&]id=([^&#\s]*)")


def id_from_link(text: str) -> str:
    """The id= value of a pasted verify link (as printed on the certificate, its check
    symbol percent-encoded), else the text unchanged."""
    if len(text) > MAX_LINK_LENGTH:
        return text
    found = _LINK_ID.search(text)
    return unquote(found.group(1)) if found else text


def parse_id(text: str) -> ParsedId:
    """Read a typed ID (or a pasted verify link); raises IdError naming the problem. A bad
    check symbol never needs a lookup: it is reported as a typo."""
    text = id_from_link(text)
    if len(text) > MAX_INPUT_LENGTH:
        raise IdError(IdProblem.TOO_LONG)
    compact = "".join(ch for ch in text.upper() if ch not in _IGNORED)
    if not compact:
        raise IdError(IdProblem.EMPTY)
    compact = "".join(_ALIASES.get(ch, ch) for ch in compact)
    *data, check = compact
    if any(ch not in DATA_SYMBOLS for ch in data) or check not in CHECK_SYMBOLS:
        raise IdError(IdProblem.BAD_SYMBOL)
    if len(data) != DATA_LENGTH:
        raise IdError(IdProblem.BAD_LENGTH)
    value = 0
    for ch in data:
        value = value * 32 + DATA_SYMBOLS.index(ch)
    if CHECK_SYMBOLS.index(check) != _check_value(value):
        raise IdError(IdProblem.BAD_CHECK)
    return ParsedId(value)
