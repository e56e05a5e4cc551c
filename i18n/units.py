"""Units and number formatting: the one place sizes, times and plain numbers become text.

Two ways to write a size, both here:

* binary (the demos): KiB, MiB, GiB, as the engine measures them: "1.50 GiB", "9.8 KiB";
* decimal GB (the lessons): 10**9 bytes, the way the source documents write them:
  "4.0 GB", "0.23 GB", with TB/PB or MB/kB at a calculator's extremes.

Every formatter takes `locale` ("en", "de", "vi", ...): the digits are written by Babel, so
German reads "4,0 GB" and "1.024". The unit names stay as they are (SI symbols).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal

from babel.numbers import format_decimal

KIB, MIB, GIB = 2**10, 2**20, 2**30
GB = 1e9
MISSING = "–"  # what a table shows for a value that was not measured


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value: float, decimals: int = 0, *, locale: str = "en", grouping: bool = True
           ) -> str:
    """A plain number with `decimals` digits after the point and thousands grouped:
    number(1024) -> '1,024' ('1.024' in German), number(4, 1) -> '4.0' ('4,0')."""
    pattern = ("#,##0" if grouping else "0") + ("." + "0" * decimals if decimals else "")
    # Decimal(value) is the float's exact value, so it rounds as Python's format() does
    return format_decimal(Decimal(value), format=pattern, locale=locale)


def format_bytes(size: float | None, *, decimal: bool = False, locale: str = "en") -> str:
    """A size for reading. Binary (default): '512 B', '9.8 KiB', '3.0 MiB', '1.50 GiB'.
    decimal=True, the sources' GB: '4.0 GB', '0.23 GB', '12 TB', '1.5 MB'.
    '–' for a missing value (None or NaN)."""
    if _missing(size):
        return MISSING
    assert size is not None
    if decimal:
        return _decimal_bytes(float(size), locale)
    if abs(size) >= GIB:
        return f"{number(size / GIB, 2, locale=locale)} GiB"
    if abs(size) >= MIB:
        return f"{number(size / MIB, 1, locale=locale)} MiB"
    if abs(size) >= KIB:
        return f"{number(size / KIB, 1, locale=locale)} KiB"
    return f"{int(size)} B"


def _decimal_bytes(size: float, locale: str) -> str:
    """GB the way the sources write them; sizes a calculator reaches at its extremes read
    in TB/PB or MB/kB instead of "38,853,467.7 GB" or "0.00 GB"."""
    amount = size / GB
    if amount >= 1e7:
        return f"{number(amount / 1e6, locale=locale)} PB"
    if amount >= 1e4:
        return f"{number(amount / 1e3, locale=locale)} TB"
    if amount >= 1:
        return f"{number(amount, 1, locale=locale)} GB"
    if amount >= 0.01 or size == 0:
        return f"{number(amount, 2, locale=locale)} GB"
    if size >= 1e6:
        return f"{number(size / 1e6, 1, locale=locale)} MB"
    if size >= 1e3:
        return f"{number(size / 1e3, 1, locale=locale)} kB"
    return f"{number(size, locale=locale)} bytes"


_BINARY = (("GiB", GIB, 2), ("MiB", MIB, 1), ("KiB", KIB, 1))


def column_unit(sizes: Iterable[float | None]) -> str | None:
    """The one binary unit for a table column of sizes: the unit format_bytes gives the
    largest (so no column reads '900.0 KiB' above '1.2 MiB'); None when none is known."""
    known = [abs(float(s)) for s in sizes if not _missing(s)]
    if not known:
        return None
    largest = max(known)
    return next((unit for unit, size, _ in _BINARY if largest >= size), "B")


def format_bytes_in(size: float | None, unit: str | None, *, locale: str = "en") -> str:
    """`size` in `unit` (column_unit's choice): '0.9 MiB'; format_bytes when unit is None."""
    if unit is None or _missing(size):
        return format_bytes(size, locale=locale)
    assert size is not None
    for name, scale, digits in _BINARY:
        if unit == name:
            return f"{number(size / scale, digits, locale=locale)} {name}"
    return f"{int(size)} B"


def format_gb(size: float, *, locale: str = "en") -> str:
    """Bytes as the sources' decimal GB: format_bytes(size, decimal=True)."""
    return format_bytes(size, decimal=True, locale=locale)


def format_ms(seconds: float | None, *, locale: str = "en") -> str:
    """A step time: '400 ms', '12.5 ms' (one decimal under 100 ms); '–' when missing."""
    if _missing(seconds):
        return MISSING
    assert seconds is not None
    decimals = 0 if seconds >= 0.1 else 1
    return f"{number(seconds * 1000, decimals, locale=locale, grouping=False)} ms"


def flop_unit(top: float) -> tuple[str, float]:
    """The unit for FLOP counts up to `top`: GFLOP, MFLOP or kFLOP, and its size."""
    if top >= 1e9:
        return "GFLOP", 1e9
    if top >= 1e6:
        return "MFLOP", 1e6
    return "kFLOP", 1e3


def format_flops(value: float | None, *, locale: str = "en") -> str:
    """A FLOP count: '23.07 MFLOP', '1.50 GFLOP', '0 FLOP'; '–' when missing."""
    if _missing(value):
        return MISSING
    assert value is not None
    if not value:
        return "0 FLOP"
    unit, scale = flop_unit(abs(float(value)))
    return f"{number(float(value) / scale, 2, locale=locale, grouping=False)} {unit}"


def byte_unit(max_bytes: float) -> tuple[str, int]:
    """The axis unit for sizes up to max_bytes: MiB under 2 GiB, GiB above."""
    return ("GiB", GIB) if max_bytes >= 2 * GIB else ("MiB", MIB)
