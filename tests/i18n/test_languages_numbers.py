"""The languages table, how a session's language is resolved, links that carry it, and
numbers written the way each language writes them."""

from __future__ import annotations

import pytest

from i18n import SUPPORTED, format_decimal, format_number, format_percent, language
from i18n.languages import match_locale, resolve_language, with_lang
from i18n.numbers import fill, placeholders


def test_the_table_names_each_language_in_itself() -> None:
    assert [(item.code, item.native_name) for item in SUPPORTED] == [
        ("en", "English"), ("de", "Deutsch"), ("vi", "Tiếng Việt")]
    assert language("de").babel_locale == "de_DE"
    with pytest.raises(KeyError):
        language("fr")


@pytest.mark.parametrize(("value", "code"), [
    ("de", "de"), ("DE", "de"), ("de-AT", "de"), ("de_CH", "de"), ("vi-VN", "vi"),
    ("en-GB", "en"), ("fr-FR", None), ("", None), (None, None), ("d", None),
    ("de;q=0.9", None), ("../de", None),
])
def test_a_browser_locale_or_url_value_maps_to_a_supported_language(value, code) -> None:
    assert match_locale(value) == code


@pytest.mark.parametrize(("query", "remembered", "browser", "expected"), [
    ("vi", "de", "de-DE", "vi"),  # the URL decides
    (None, "de", "vi-VN", "de"),  # a page change dropped ?lang=: the session remembers
    ("fr", "de", "vi-VN", "de"),  # an unsupported ?lang= is ignored
    (None, None, "vi-VN", "vi"),  # nothing chosen: the browser's language
    (None, None, "de-AT", "de"),
    (None, None, "fr-FR", "en"),  # a language we do not have: English
    (None, None, None, "en"),
    ("xx", None, None, "en"),
])
def test_resolution_order(query, remembered, browser, expected) -> None:
    assert resolve_language(query, remembered, browser) == expected


def test_links_carry_the_language() -> None:
    assert with_lang("https://host/compare?layers=4&lang=vi", "de") == (
        "https://host/compare?layers=4&lang=de")
    assert with_lang("/verify?id=4VACW", "vi") == "/verify?id=4VACW&lang=vi"
    assert with_lang("/quiz", "de") == "/quiz?lang=de"
    assert with_lang("layers=4&seq=128", "vi") == "layers=4&seq=128&lang=vi"
    assert with_lang({"layers": "4", "lang": "en"}, "de") == {"layers": "4", "lang": "de"}
    with pytest.raises(KeyError):
        with_lang("/quiz", "fr")


@pytest.mark.parametrize(("code", "gigabytes", "tokens"), [
    ("en", "4.0 GB", "1,024 tokens"),
    ("de", "4,0 GB", "1.024 Tokens"),
    ("vi", "4,0 GB", "1.024 token"),
])
def test_numbers_follow_the_language(code, gigabytes, tokens) -> None:
    word = {"en": "tokens", "de": "Tokens", "vi": "token"}[code]
    assert fill("{size:.1f} GB", code, {"size": 4.0}) == gigabytes
    assert fill("{count:,} " + word, code, {"count": 1024}) == tokens
    assert format_decimal(4.0, code, 1) + " GB" == gigabytes
    assert format_number(1024, code) + " " + word == tokens


def test_format_specs_keep_their_python_meaning() -> None:
    cases = {
        "{n}": 1024, "{n:d}": 1024, "{n:,}": 1234567, "{n:,d}": 1234567, "{x:.2f}": 0.125,
        "{x:,.1f}": 12345.67, "{x}": 2.5, "{x:,}": 1234.5, "{p:.0%}": 0.3, "{p:.1%}": 0.305,
    }
    for text, value in cases.items():
        name = text[1]
        assert fill(text, "en", {name: value}) == text.format(**{name: value}), text
    assert fill("{x:,.1f}|{n}|{p:.0%}", "de", {"x": 12345.67, "n": 1024, "p": 0.3}) == (
        "12.345,7|1024|30\u00a0%")
    assert fill("{x:,.1f}|{p:.0%}", "vi", {"x": 12345.67, "p": 0.3}) == "12.345,7|30%"
    # Specs this module does not localize are Python's; text passes through.
    assert fill("{x:>6.2e}|{s}|{b}", "de", {"x": 1500.0, "s": "4,0 GB", "b": True}) == (
        "1.50e+03|4,0 GB|True")
    with pytest.raises(ValueError):
        fill("{x:d}", "de", {"x": 1.5})


def test_helpers_in_each_language() -> None:
    assert [format_decimal(1234.5678, code, 2) for code in ("en", "de", "vi")] == [
        "1,234.57", "1.234,57", "1.234,57"]
    assert [format_percent(0.25, code) for code in ("en", "de", "vi")] == [
        "25%", "25\u00a0%", "25%"]


def test_a_text_without_parameters_keeps_its_braces() -> None:
    assert fill("{{value:x}} stays", "de", {}) == "{{value:x}} stays"
    assert placeholders("{size:.1f} GB of {total} ({a.b}, {c[0]})") == {"size", "total", "a", "c"}
    assert placeholders("broken {") == frozenset()
