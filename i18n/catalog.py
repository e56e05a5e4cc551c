"""Per-language gettext translations, cached once per language and never installed
process-wide (one server answers learners in several languages at once).

A message is an English string with named placeholders, ``"{size} GB"``; `gettext` looks
up its translation for the language asked for and fills the placeholders through
`i18n.numbers.LocaleFormatter`, so numbers come out in that language's style. A message
missing from a catalog falls back to English (and the catalog tests fail).
"""

from __future__ import annotations

import contextlib
import gettext as _gettext
import io
import logging
import threading
from pathlib import Path
from typing import Any

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from i18n.languages import DEFAULT, language
from i18n.numbers import fill

ROOT = Path(__file__).resolve().parent.parent
LOCALE_DIR = ROOT / "locale"
DOMAIN = "messages"
TEMPLATE = LOCALE_DIR / f"{DOMAIN}.pot"

_log = logging.getLogger(__name__)
_lock = threading.Lock()
_cache: dict[tuple[str, int], _gettext.NullTranslations] = {}


def po_path(code: str) -> Path:
    return LOCALE_DIR / code / "LC_MESSAGES" / f"{DOMAIN}.po"


def mo_path(code: str) -> Path:
    return LOCALE_DIR / code / "LC_MESSAGES" / f"{DOMAIN}.mo"


def N_(msgid: str) -> str:  # noqa: N802 (the gettext convention)
    """Marks a string for the catalog without translating it (tables built at import
    time, such as page titles); translate it where it is shown."""
    return msgid


def _stamp(code: str) -> int:
    """Changes whenever the language's .po or .mo file changes, so an edited catalog is
    picked up without a restart."""
    stamp = 0
    for path in (po_path(code), mo_path(code)):  # on every message: one stat each, no exists()
        with contextlib.suppress(FileNotFoundError):
            stamp = max(stamp, path.stat().st_mtime_ns)
    return stamp


def _read(code: str) -> _gettext.NullTranslations:
    po, mo = po_path(code), mo_path(code)
    if mo.exists() and (not po.exists() or mo.stat().st_mtime_ns >= po.stat().st_mtime_ns):
        with mo.open("rb") as handle:
            return _gettext.GNUTranslations(handle)
    if po.exists():
        # No compiled catalog, or an older one than its .po: compile in memory rather than
        # serve stale text. `make run` / `make test` build the .mo files (pybabel compile).
        _log.warning("%s is missing or older than its .po; compiling %s in memory", mo, po)
        with po.open("rb") as handle:
            catalog = read_po(handle, locale=language(code).babel_locale)
        buffer = io.BytesIO()
        write_mo(buffer, catalog)
        buffer.seek(0)
        return _gettext.GNUTranslations(buffer)
    _log.warning("no catalog for %r under %s; showing English", code, LOCALE_DIR)
    return _gettext.NullTranslations()


def translations(code: str) -> _gettext.NullTranslations:
    """The read-only translation object of a language (English: the source, no catalog).
    Shared by every session; safe to use from many threads."""
    language(code)  # KeyError for an unsupported code
    if code == DEFAULT:
        return _ENGLISH
    key = (code, _stamp(code))
    found = _cache.get(key)
    if found is None:
        with _lock:
            found = _cache.get(key)
            if found is None:
                found = _read(code)
                for old in [k for k in _cache if k[0] == code]:
                    del _cache[old]
                _cache[key] = found
    return found


_ENGLISH = _gettext.NullTranslations()


def gettext(code: str, msgid: str, **params: Any) -> str:
    """`msgid` in language `code`, its {named} placeholders filled in that language's style."""
    return fill(translations(code).gettext(msgid), code, params)


def ngettext(code: str, singular: str, plural: str, count: int, **params: Any) -> str:
    """The form of a message for `count` (the language's own plural rule); `{count}` in
    the text is the number, written in that language's style."""
    params.setdefault("count", count)
    return fill(translations(code).ngettext(singular, plural, count), code, params)


def pgettext(code: str, context: str, msgid: str, **params: Any) -> str:
    """Like `gettext`, for a short message whose translation depends on where it is shown
    (context "chart legend" vs "table header")."""
    return fill(translations(code).pgettext(context, msgid), code, params)
