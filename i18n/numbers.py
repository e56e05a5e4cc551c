"""Numbers in the style of a language, through Babel: 4.0 / 4,0 / 4,0 and 1,024 / 1.024 /
1.024 in English / German / Vietnamese.

Inside a message a number keeps its Python format spec and is written in the language's
style: ``t("{size:.1f} GB", size=4.0)`` gives "4.0 GB", "4,0 GB", "4,0 GB". The specs
understood are those the app uses, with Python's meaning (grouping only with ","):

    {n}  {n:d}  {n:,}  {n:,d}  {x:.2f}  {x:,.1f}  {p:.0%}  {p:,.1%}

Any other spec (width, alignment, "e", "g") is applied by Python unchanged, not localized.
Strings pass through as they are: a value already formatted (for example by i18n/units.py
with ``locale=``) is simply placed in the text.
"""

from __future__ import annotations

import copy
import decimal
import re
import string
from collections.abc import Mapping
from numbers import Number
from typing import Any

from babel import Locale
from babel import numbers as babel_numbers

from i18n.languages import DEFAULT, language

_SPEC = re.compile(r"^(?P<group>,)?(?:\.(?P<digits>\d+))?(?P<kind>[dfn%]?)$")


def _locale(code: str) -> str:
    return language(code).babel_locale


def _pattern(grouping: bool, digits: int | None, minimum_digits: bool = True) -> str:
    integer = "#,##0" if grouping else "0"
    if not digits:
        return integer
    return integer + "." + ("0" if minimum_digits else "#") * digits


def format_decimal(value: float, code: str = DEFAULT, digits: int | None = None,
                   grouping: bool = True) -> str:
    """`value` with exactly `digits` decimals (None: as many as needed, up to 3), grouped:
    format_decimal(1024.5, "de", 1) == "1.024,5"."""
    if digits is None:
        return babel_numbers.format_decimal(value, locale=_locale(code), group_separator=grouping)
    return babel_numbers.format_decimal(value, format=_pattern(grouping, digits),
                                        locale=_locale(code), decimal_quantization=True)


def format_number(value: int, code: str = DEFAULT) -> str:
    """A whole number with the language's thousands separator: 1,024 / 1.024 / 1.024."""
    return babel_numbers.format_decimal(int(value), format="#,##0", locale=_locale(code))


def format_percent(value: float, code: str = DEFAULT, digits: int = 0,
                   grouping: bool = True) -> str:
    """A fraction as a percentage in the language's style, with exactly `digits` decimals:
    0.3 -> "30%" / "30 %" / "30%" (the language's own pattern: German puts a space)."""
    locale = Locale.parse(_locale(code))
    pattern = copy.copy(locale.percent_formats[None])
    pattern.frac_prec = (digits, digits)
    return pattern.apply(value, locale, group_separator=grouping)


def localize(value: Any, spec: str, code: str) -> str | None:
    """`value` formatted for `spec` in language `code`, or None when this module does not
    localize that combination (then Python's own format applies)."""
    if isinstance(value, bool) or not isinstance(value, Number | decimal.Decimal):
        return None
    match = _SPEC.match(spec)
    if match is None:
        return None
    grouping = bool(match["group"])
    digits = int(match["digits"]) if match["digits"] is not None else None
    kind = match["kind"]
    locale = _locale(code)
    if kind == "%":
        return format_percent(value, code, 6 if digits is None else digits, grouping)
    if kind == "d" or (kind in ("", "n") and isinstance(value, int) and digits is None):
        if not isinstance(value, int):
            return None  # Python refuses {x:d} for a float: keep its error
        return babel_numbers.format_decimal(value, format=_pattern(grouping, None),
                                            locale=locale)
    if kind in ("f", "n", "") and digits is not None:
        return babel_numbers.format_decimal(value, format=_pattern(grouping, digits),
                                            locale=locale)
    # A float without a precision: as many decimals as it needs, like str() but localized.
    return babel_numbers.format_decimal(value, locale=locale, group_separator=grouping)


class LocaleFormatter(string.Formatter):
    """str.format whose numbers follow a language (see the module's docstring)."""

    def __init__(self, code: str) -> None:
        self.code = code

    def format_field(self, value: Any, format_spec: str) -> str:
        localized = localize(value, format_spec, self.code)
        return localized if localized is not None else super().format_field(value, format_spec)


def fill(text: str, code: str, params: Mapping[str, Any]) -> str:
    """`text` with its {named} placeholders filled in language `code`'s style. A text
    given no parameters is returned as it is (its braces need no doubling)."""
    if not params:
        return text
    return LocaleFormatter(code).vformat(text, (), params)


def placeholders(text: str) -> frozenset[str]:
    """The names of the {placeholders} in a message ("{size:.1f} GB" -> {"size"}); empty
    for a text that is not a valid format string."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return frozenset()
    return frozenset(name.split(".")[0].split("[")[0] for _, name, _, _ in parsed
                     if name is not None)
