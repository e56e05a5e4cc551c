"""Certificate IDs: format, tolerant parsing, and a check symbol that catches every
single-symbol typo and every swap of neighbours."""

from __future__ import annotations

import random
import re
from urllib.parse import quote

import pytest

from quiz.ids import (
    BITS,
    CHECK_SYMBOLS,
    DATA_SYMBOLS,
    IdError,
    IdProblem,
    format_id,
    new_id,
    parse_id,
)

SHAPE = re.compile(r"^[0-9A-HJKMNP-TV-Z]{5}(-[0-9A-HJKMNP-TV-Z]{5}){3}-[0-9A-HJKMNP-TV-Z*~$=U]$")
SAMPLE_VALUES = [0, 1, (1 << BITS) - 1, *(random.Random(11).getrandbits(BITS) for _ in range(40))]


def problem_of(text: str) -> IdProblem:
    with pytest.raises(IdError) as error:
        parse_id(text)
    return error.value.problem


def test_new_ids_have_the_grouped_shape_and_100_random_bits() -> None:
    ids = {new_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(SHAPE.match(i) for i in ids)
    # Each of the 20 data positions takes many values: the bits are really random.
    for position in range(20):
        assert len({i.replace("-", "")[position] for i in ids}) == 32


@pytest.mark.parametrize("value", SAMPLE_VALUES)
def test_format_then_parse_round_trips(value: int) -> None:
    text = format_id(value)
    assert SHAPE.match(text)
    assert parse_id(text).value == value


def test_parsing_tolerates_case_spaces_dashes_and_look_alikes() -> None:
    value = int("0" * 99 + "1", 2) * 0x1234567 + 0o1010
    text = format_id(value)
    compact = text.replace("-", "")
    variants = [
        text.lower(),
        compact,
        " ".join(compact),
        f"  {text}  ",
        "--".join(text.split("-")),
        text.replace("0", "O").replace("1", "I"),
        text.replace("1", "l").lower().replace("0", "o"),
        text.replace("1", "L"),
    ]
    for variant in variants:
        assert parse_id(variant).value == value, variant


@pytest.mark.parametrize("value", SAMPLE_VALUES)
def test_every_single_symbol_typo_is_caught(value: int) -> None:
    compact = format_id(value).replace("-", "")
    for position, original in enumerate(compact):
        for replacement in CHECK_SYMBOLS:
            if replacement == original:
                continue
            typo = compact[:position] + replacement + compact[position + 1 :]
            assert problem_of(typo) in {IdProblem.BAD_CHECK, IdProblem.BAD_SYMBOL}, typo


@pytest.mark.parametrize("value", SAMPLE_VALUES)
def test_every_swap_of_neighbours_is_caught(value: int) -> None:
    compact = format_id(value).replace("-", "")
    for position in range(len(compact) - 1):
        a, b = compact[position], compact[position + 1]
        if a == b:
            continue
        swapped = compact[:position] + b + a + compact[position + 2 :]
        assert problem_of(swapped) in {IdProblem.BAD_CHECK, IdProblem.BAD_SYMBOL}, swapped


def test_swaps_with_the_check_symbol_are_caught_even_where_plain_mod_37_misses() -> None:
    """Plain Crockford (check = value mod 37) misses a swap of the last data symbol with the
    check symbol whenever the first 19 symbols are 0 mod 37; this ID scheme does not."""
    caught = 0
    for head in range(0, 37 * 400, 37):  # first 19 symbols' value = 0 mod 37
        for last in range(32):
            value = head * 32 + last
            compact = format_id(value).replace("-", "")
            if compact[-1] == compact[-2]:
                continue
            swapped = compact[:-2] + compact[-1] + compact[-2]
            assert problem_of(swapped) in {IdProblem.BAD_CHECK, IdProblem.BAD_SYMBOL}
            caught += 1
    assert caught > 10_000


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", IdProblem.EMPTY),
        ("  - -  ", IdProblem.EMPTY),
        ("A" * 10_000, IdProblem.TOO_LONG),
        ("'; DROP TABLE certificates; --", IdProblem.BAD_SYMBOL),
        ("1' OR '1'='1", IdProblem.BAD_SYMBOL),
        ("<script>alert(1)</script>", IdProblem.BAD_SYMBOL),
        ("ABCDE-FGHJK", IdProblem.BAD_LENGTH),
        ("U" + format_id(5)[1:], IdProblem.BAD_SYMBOL),
        (format_id(5) + "0", IdProblem.BAD_LENGTH),
    ],
)
def test_junk_is_refused_with_a_reason(text: str, problem: IdProblem) -> None:
    assert problem_of(text) is problem


def test_format_refuses_values_out_of_range() -> None:
    with pytest.raises(ValueError):
        format_id(1 << BITS)
    with pytest.raises(ValueError):
        format_id(-1)
    assert set(DATA_SYMBOLS).isdisjoint("ILOU")


def test_a_pasted_verify_link_is_read_for_its_id() -> None:
    """The certificate prints "Verify at <link>"; pasting that whole link into the verify
    box used to be a TYPO ("a symbol that IDs never use")."""
    value = next(v for v in range(1, 10_000) if format_id(v)[-1] == "=")  # encoded as %3D
    text = format_id(value)
    for link in (f"https://lab.example/verify?id={quote(text, safe='-')}",
                 f"  http://localhost:8501/verify?foo=1&id={text}#top ",
                 f"https://lab.example/verify?id={text.lower().replace('-', '')}"):
        assert parse_id(link).value == value, link
    assert problem_of("https://lab.example/verify?page=2") is IdProblem.BAD_SYMBOL
    assert problem_of("https://lab.example/verify?id=" + "A" * 5_000) is IdProblem.TOO_LONG


def test_every_id_is_a_safe_file_name_part() -> None:
    """Browsers replace a character file systems refuse ("*" on Windows) with "_", which
    reads as part of the ID: the download's name spells it out."""
    from quiz.ids import CHECK_SYMBOLS, file_name_part

    for symbol in CHECK_SYMBOLS:
        value = next(v for v in range(1, 10_000) if format_id(v)[-1] == symbol)
        name = file_name_part(format_id(value))
        assert not set(name) & set('<>:"/\\|?*$='), name
    star = next(v for v in range(1, 10_000) if format_id(v)[-1] == "*")
    assert file_name_part(format_id(star)) == format_id(star)[:-1] + "star"
