"""`python -m tools.translations`: what the translations still lack (exit 1 if anything).

The translation checks, as functions the tests call on the real files and on small
fixtures: each returns a list of problems, empty when all is well.

* `catalog_problems`: a message of the template without a (non-fuzzy) translation, or a
  translation whose {placeholders} differ from its English source.
* `lesson_problems`: a translated lesson whose widgets, value placeholders or demo link
  differ from the English file.
* `quiz_overlay_problems`: a quiz overlay that misses a question, an option or an
  explanation, or that tries to carry an answer key.
* `leftover_english`: English sentences of the catalog found in a German or Vietnamese
  page's rendered text (usable from AppTest and browser tests).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po

from i18n.catalog import TEMPLATE, po_path
from i18n.languages import CODES, DEFAULT, language
from i18n.numbers import placeholders
from lessons.document import split_front_matter

# ------------------------------------------------------------------------------ catalogs


def read_catalog(path: Path, code: str | None = None) -> Catalog:
    with path.open("rb") as handle:
        return read_po(handle, locale=language(code).babel_locale if code else None)


def _ids(message: Any) -> tuple[str, ...]:
    return message.id if isinstance(message.id, tuple) else (message.id,)


def _forms(message: Any) -> tuple[str, ...]:
    if isinstance(message.string, tuple | list):
        return tuple(message.string)
    return (message.string,)


def _shown(message: Any) -> str:
    text = _ids(message)[0]
    return repr(text if len(text) <= 70 else text[:67] + "...")


def catalog_problems(template: Catalog, translated: Catalog, code: str) -> list[str]:
    """What keeps `translated` (language `code`) from covering every message of
    `template` correctly."""
    problems: list[str] = []
    for source in template:
        if not source.id:
            continue  # the header
        message = translated.get(source.id, source.context)
        if message is None:
            problems.append(f"{code}: {_shown(source)} is not in the catalog "
                            f"(run `make messages`)")
            continue
        forms = _forms(message)
        if message.fuzzy or not all(form.strip() for form in forms):
            problems.append(f"{code}: {_shown(source)} has no translation"
                            + (" (fuzzy)" if message.fuzzy else ""))
            continue
        problems.extend(f"{code}: {_shown(source)}: {problem}"
                        for problem in placeholder_problems(_ids(source), forms))
    return problems


def placeholder_problems(source: Sequence[str], forms: Sequence[str]) -> list[str]:
    """A translation must use exactly the source's {placeholders}. For a plural message
    each form may drop names (German "eine Schicht" for "{count} layer"), but none may add
    one, and the last form (the general one) uses every name of the English plural."""
    problems: list[str] = []
    wanted = placeholders(source[-1])
    allowed = frozenset().union(*(placeholders(text) for text in source))
    for index, form in enumerate(forms):
        names = placeholders(form)
        if _broken(form) and not _broken(source[-1]):
            problems.append(f"form {index} is not a valid format string: {form!r}")
            continue
        if len(source) == 1 and names != wanted:
            problems.append(f"placeholders {sorted(names)} instead of {sorted(wanted)}")
        elif len(source) > 1 and not names <= allowed:
            problems.append(f"form {index} has unknown placeholders {sorted(names - allowed)}")
    if len(source) > 1 and forms and placeholders(forms[-1]) != wanted:
        problems.append(f"last form has placeholders {sorted(placeholders(forms[-1]))} "
                        f"instead of {sorted(wanted)}")
    return problems


def _broken(text: str) -> bool:
    try:
        list(string.Formatter().parse(text))
    except ValueError:
        return True
    return False


def catalog_files_problems(codes: Iterable[str]) -> list[str]:
    """`catalog_problems` for the real template and each language's .po file."""
    template = read_catalog(TEMPLATE)
    problems: list[str] = []
    for code in codes:
        path = po_path(code)
        if not path.exists():
            problems.append(f"{code}: {path} is missing (pybabel init, see docs/I18N.md)")
            continue
        problems.extend(catalog_problems(template, read_catalog(path, code), code))
    return problems


# ------------------------------------------------------------------------------- lessons

_BLOCK = re.compile(r"^\{\{\s*(?!value:|lesson:)([a-z-]+(?::[a-z0-9_-]+)?)\s*\}\}\s*$",
                    re.MULTILINE)
_ANY = re.compile(r"\{\{(.*?)\}\}")


def lesson_problems(english: str, translated: str, name: str = "lesson") -> list[str]:
    """How a translated lesson file differs from the English one in what must not change:
    the widgets (same ones, same order), the {{value:…}}/{{lesson:…}} placeholders (same
    ones, as often, in any order), the demo link and the number of takeaways."""
    problems: list[str] = []
    try:
        meta_en, body_en = split_front_matter(english)
        meta_tr, body_tr = split_front_matter(translated)
    except ValueError as error:
        return [f"{name}: {error}"]
    widgets_en, widgets_tr = _BLOCK.findall(body_en), _BLOCK.findall(body_tr)
    if widgets_en != widgets_tr:
        problems.append(f"{name}: widgets {widgets_tr} instead of {widgets_en}")
    marks_en = Counter(re.sub(r"\s+", "", m) for m in _ANY.findall(english))
    marks_tr = Counter(re.sub(r"\s+", "", m) for m in _ANY.findall(translated))
    if marks_en != marks_tr:
        missing, extra = marks_en - marks_tr, marks_tr - marks_en
        problems.append(f"{name}: placeholders differ: missing "
                        f"{sorted(missing.elements())}, extra {sorted(extra.elements())}")
    if sorted(meta_en) != sorted(meta_tr):
        problems.append(f"{name}: front matter keys {sorted(meta_tr)} instead of "
                        f"{sorted(meta_en)}")
    if len(meta_en.get("takeaways") or []) != len(meta_tr.get("takeaways") or []):
        problems.append(f"{name}: {len(meta_tr.get('takeaways') or [])} takeaways instead "
                        f"of {len(meta_en.get('takeaways') or [])}")
    demo_en, demo_tr = meta_en.get("demo") or {}, meta_tr.get("demo") or {}
    for key in ("path", "query"):
        if demo_en.get(key) != demo_tr.get(key):
            problems.append(f"{name}: demo {key} {demo_tr.get(key)!r} instead of "
                            f"{demo_en.get(key)!r}")
    return problems


def lesson_files_problems(content_dir: Path, codes: Iterable[str]) -> list[str]:
    """`lesson_problems` for every translated lesson under content_dir/<code>/ against the
    English file content_dir/<slug>.md; a translated file without an English one is an
    error, an English lesson not translated yet is reported by `missing_lessons`."""
    problems: list[str] = []
    for code in codes:
        for path in sorted((content_dir / code).glob("*.md")):
            english = content_dir / path.name
            if not english.exists():
                problems.append(f"{code}/{path.name}: no English lesson {path.name}")
                continue
            problems.extend(lesson_problems(english.read_text(encoding="utf-8"),
                                            path.read_text(encoding="utf-8"),
                                            f"{code}/{path.name}"))
    return problems


def missing_lessons(content_dir: Path, slugs: Iterable[str], code: str) -> list[str]:
    """The lessons (by slug) that have no file in content_dir/<code>/."""
    return [slug for slug in slugs if not (content_dir / code / f"{slug}.md").exists()]


# ---------------------------------------------------------------------------------- quiz

OVERLAY_FIELDS = ("prompt", "options", "explanations")


def quiz_overlay_problems(english: Sequence[Mapping[str, Any]], overlay: Any,
                          code: str) -> list[str]:
    """How a quiz overlay ({id: {prompt, options, explanations}}) fails to cover the
    English bank `english` (its entries as read from questions.yaml) question by
    question, option by option. The answer key stays in the English bank only."""
    if not isinstance(overlay, Mapping):
        return [f"{code}: the overlay must map question ids to their texts"]
    problems: list[str] = []
    ids = [str(entry["id"]) for entry in english]
    for entry in english:
        qid = str(entry["id"])
        item = overlay.get(qid)
        if not isinstance(item, Mapping):
            problems.append(f"{code}: question {qid!r} is missing")
            continue
        for field in sorted(set(item) - set(OVERLAY_FIELDS)):
            problems.append(f"{code}: {qid}: {field!r} does not belong in an overlay "
                            f"(only {', '.join(OVERLAY_FIELDS)}; the key stays in English)")
        prompt = item.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            problems.append(f"{code}: {qid}: no prompt")
        for field in ("options", "explanations"):
            texts = item.get(field)
            wanted = len(entry.get(field) or [])
            if not isinstance(texts, list):
                problems.append(f"{code}: {qid}: no {field}")
                continue
            if len(texts) != wanted:
                problems.append(f"{code}: {qid}: {len(texts)} {field} instead of {wanted}")
            for index, text in enumerate(texts):
                if not isinstance(text, str) or not text.strip():
                    problems.append(f"{code}: {qid}: {field}[{index}] is empty")
    for qid in overlay:
        if str(qid) not in ids:
            problems.append(f"{code}: {qid!r} is not a question of the English bank")
    return problems


# ------------------------------------------------------------------- rendered pages

_MARKUP = re.compile(r":material/[a-z_]+:|[*_`#>]+|\[|\]\([^)]*\)")
_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


def _normalized(text: str) -> str:
    return re.sub(r"\s+", " ", _MARKUP.sub(" ", text)).strip().casefold()


def english_sentences(messages: Iterable[str], min_words: int = 4) -> set[str]:
    """The pieces of English messages long enough to be telling on a page: each message is
    cut at its {placeholders} and sentence ends, Markdown is dropped, and pieces of at
    least `min_words` words are kept (normalized: lower case, single spaces)."""
    pieces: set[str] = set()
    for message in messages:
        for part in re.split(r"\{[^{}]*\}|(?<=[.!?:;])\s+|\n", message):
            piece = _normalized(part)
            if len(_WORD.findall(piece)) >= min_words:
                pieces.add(piece)
    return pieces


def leftover_english(page_text: str, sentences: Iterable[str]) -> list[str]:
    """The English sentences (from `english_sentences`) that appear in `page_text`."""
    shown = _normalized(page_text)
    return sorted(sentence for sentence in sentences if sentence in shown)


def catalog_sentences(code: str, min_words: int = 4) -> set[str]:
    """The English sentences of the template whose translation into `code` differs from
    them (a message translated as itself, such as a name, is not a leftover)."""
    template = read_catalog(TEMPLATE)
    translated = read_catalog(po_path(code), code) if po_path(code).exists() else Catalog()
    messages: list[str] = []
    for source in template:
        if not source.id:
            continue
        message = translated.get(source.id, source.context)
        forms = _forms(message) if message is not None else ()
        for text in _ids(source):
            if text not in forms:
                messages.append(text)
    return english_sentences(messages, min_words)


def untranslated_on_page(page_text: str, code: str, min_words: int = 4) -> list[str]:
    """English sentences of the catalog left on a page rendered in language `code`."""
    return leftover_english(page_text, catalog_sentences(code, min_words))


def main() -> int:
    problems = catalog_files_problems(code for code in CODES if code != DEFAULT)
    print("\n".join(problems) or "every message is translated")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
