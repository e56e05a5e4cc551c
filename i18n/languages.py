"""The supported languages: adding one is one line in SUPPORTED (plus its catalog, lesson
folder and quiz overlay; see docs/I18N.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


@dataclass(frozen=True)
class Language:
    code: str  # ?lang= value; folder name in locale/, lessons/content/, quiz/i18n/<code>.yaml
    native_name: str  # as the picker shows it, in the language itself
    babel_locale: str  # for Babel's number formatting


SUPPORTED: tuple[Language, ...] = (
    Language("en", "English", "en_US"),
    Language("de", "Deutsch", "de_DE"),
    Language("vi", "Tiếng Việt", "vi_VN"),
)
DEFAULT = "en"  # the source language of every text
QUERY_KEY = "lang"  # ?lang=de
CODES: tuple[str, ...] = tuple(item.code for item in SUPPORTED)

_LOCALE = re.compile(r"^\s*([A-Za-z]{2,3})(?:[-_][A-Za-z0-9]+)*\s*$")


def language(code: str) -> Language:
    """The supported language with this exact code; KeyError otherwise."""
    for item in SUPPORTED:
        if item.code == code:
            return item
    raise KeyError(code)


def match_locale(value: str | None) -> str | None:
    """The supported language code for a browser locale or URL value ("de-AT", "vi_VN",
    "DE" -> "de"), or None when the language is not supported or the value is malformed."""
    match = _LOCALE.match(value or "")
    if match is None:
        return None
    code = match.group(1).lower()
    return code if code in CODES else None


def parse_lang(value: str | None) -> str | None:
    """The code a ?lang= value names, or None when it names no supported language."""
    return match_locale(value)


def resolve_language(query_value: str | None, remembered: str | None,
                     browser_locale: str | None) -> str:
    """The language of one run of a session, in this order: the URL's ?lang=, the choice
    this session made before (the URL may have lost it on a page change), the browser's
    preferred language, English."""
    for candidate in (parse_lang(query_value), parse_lang(remembered),
                      match_locale(browser_locale)):
        if candidate is not None:
            return candidate
    return DEFAULT


def with_lang(target: str | Mapping[str, str], code: str) -> str | dict[str, str]:
    """`target` carrying the language, for links a learner shares or follows:

    * a query mapping -> a new dict with ``lang`` set: ``{"layers": "4", "lang": "de"}``
    * a URL or path -> the same URL with ``lang`` in its query:
      ``"https://host/compare?layers=4"`` -> ``"https://host/compare?layers=4&lang=de"``
    * a bare query string ``"layers=4"`` -> ``"layers=4&lang=de"``

    An existing ``lang`` is replaced; the other parameters keep their order.
    """
    language(code)
    if isinstance(target, Mapping):
        return {**{k: v for k, v in target.items() if k != QUERY_KEY}, QUERY_KEY: code}
    is_query = "=" in target and "?" not in target and "/" not in target
    parts = urlsplit("?" + target if is_query else target)
    pairs = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
             if k != QUERY_KEY]
    query = urlencode([*pairs, (QUERY_KEY, code)])
    if is_query:
        return query
    return urlunsplit(parts._replace(query=query))
