"""The course's languages, without Streamlit: demos/, lessons/ and quiz/ may import it.

* `languages`: the table of supported languages and how a code, a URL value or a browser
  locale maps onto one of them.
* `catalog`: one read-only gettext translation per language (compiled from
  locale/<code>/LC_MESSAGES/messages.po), and `gettext`/`ngettext`/`pgettext` that take the
  language as an argument: nothing here is process-wide.
* `numbers`: numbers written the way a language writes them (Babel), also inside messages.
* `checks`: the checks the tests run on catalogs, lessons, quiz overlays and rendered pages.

The Streamlit side (the session's language, the picker, `t()`) is ui/i18n.py.
docs/I18N.md says how to translate and how to add a language.
"""

from i18n.catalog import N_, gettext, ngettext, pgettext
from i18n.languages import (
    DEFAULT,
    QUERY_KEY,
    SUPPORTED,
    Language,
    language,
    match_locale,
    parse_lang,
    resolve_language,
    with_lang,
)
from i18n.numbers import format_decimal, format_number, format_percent

__all__ = [
    "DEFAULT", "N_", "QUERY_KEY", "SUPPORTED", "Language", "format_decimal", "format_number",
    "format_percent", "gettext", "language", "match_locale", "ngettext", "parse_lang",
    "pgettext", "resolve_language", "with_lang",
]
