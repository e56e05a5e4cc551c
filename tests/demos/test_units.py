"""i18n.units: the one place sizes, times and numbers become text."""

from __future__ import annotations

import math

import pytest

from i18n.units import GIB, KIB, MIB, byte_unit, format_bytes, format_gb, format_ms, number


@pytest.mark.parametrize(("size", "text"), [
    (512, "512 B"), (10_000, "9.8 KiB"), (3 * MIB, "3.0 MiB"), (1536 * MIB, "1.50 GiB"),
    (None, "–"), (math.nan, "–"),
])
def test_binary_sizes(size: float | None, text: str) -> None:
    assert format_bytes(size) == text


@pytest.mark.parametrize(("size", "text"), [
    (4.0e9, "4.0 GB"), (0.235e9, "0.23 GB"), (0, "0.00 GB"), (1.5e6, "1.5 MB"),
    (2.5e3, "2.5 kB"), (12, "12 bytes"), (38_853_467.7e9, "39 PB"), (12_345e9, "12 TB"),
    (12_345.6e9 / 10, "1,234.6 GB"),
])
def test_the_sources_decimal_gb(size: float, text: str) -> None:
    assert format_gb(size) == format_bytes(size, decimal=True) == text


def test_other_locales_write_their_own_digits() -> None:
    assert format_gb(4.0e9, locale="de") == "4,0 GB"
    assert number(1024, locale="de") == "1.024"
    assert format_gb(4.0e9, locale="vi") == "4,0 GB"
    assert number(1024, locale="vi") == "1.024"
    assert format_bytes(1536 * MIB, locale="de") == "1,50 GiB"
    assert format_ms(0.0125, locale="de") == "12,5 ms"


def test_rounding_follows_the_float_as_python_does() -> None:
    # 0.235 is stored as 0.23499999...: Python's format() and number() both write 0.23
    assert number(0.235, 2) == f"{0.235:.2f}" == "0.23"


def test_times_and_axis_units() -> None:
    assert format_ms(0.4) == "400 ms" and format_ms(0.0125) == "12.5 ms"
    assert format_ms(12.0) == "12000 ms" and format_ms(None) == "–"
    assert byte_unit(100 * MIB) == ("MiB", MIB) and byte_unit(3 * GIB) == ("GiB", GIB)
    assert KIB == 1024
