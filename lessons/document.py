"""Lesson documents: Markdown files under lessons/content/ with YAML front matter.

A document looks like::

    ---
    takeaways:
      - ...
    demo:
      path: compare
      query: {layers: 16}
      label: Compare strategies
      text: What to look for there.
    ---
    Markdown text with inline values like {{value:seed_all_kept_gb}} ...

    {{calculator:memory}}

    ... more Markdown.

A line holding only ``{{kind:name}}`` (or ``{{kind}}``) is an interactive block, drawn by the
page at that place; ``{{value:name}}`` anywhere in the text is replaced by a computed value,
and ``{{lesson:path}}`` by a link to that lesson with its number and title (from
lessons/catalog.py, so a renumbered course never leaves a stale "lesson 4");
``[the planner]({{page:plan}})`` puts the URL of an app page (ui.navigation's url_path)
with the language, so the link opens in the lesson's language.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlencode

import yaml

from i18n import DEFAULT, with_lang
from lessons import catalog

CONTENT_DIR = Path(__file__).parent / "content"

BLOCK = re.compile(r"^\{\{\s*(?!value:|lesson:|page:)([a-z-]+)(?::([a-z0-9_-]+))?\s*\}\}\s*$",
                   re.MULTILINE)
VALUE = re.compile(r"\{\{\s*value:([a-z0-9_]+)\s*\}\}")
LESSON_LINK = re.compile(r"\{\{\s*lesson:([a-z0-9-]+)\s*\}\}")
PAGE_URL = re.compile(r"\{\{\s*page:([a-z0-9-]+)\s*\}\}")
ANY_PLACEHOLDER = re.compile(r"\{\{.*?\}\}")


class DocumentError(ValueError):
    """A lesson document is malformed: bad front matter or an unknown placeholder."""


@dataclass(frozen=True)
class DemoLink:
    path: str
    label: str
    text: str
    query: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The demo's URL path with its query, e.g. /compare?layers=16."""
        query = urlencode(self.query)
        return f"/{self.path}" + (f"?{query}" if query else "")


@dataclass(frozen=True)
class Block:
    kind: str  # "markdown" or the placeholder kind ("calculator", "stepper", "figure", ...)
    name: str = ""  # the placeholder's name, e.g. "memory" in {{calculator:memory}}
    text: str = ""  # Markdown for "markdown" blocks

    @property
    def widget(self) -> str:
        """The placeholder as written, e.g. "calculator:memory" or "stepper"."""
        return f"{self.kind}:{self.name}" if self.name else self.kind


@dataclass(frozen=True)
class LessonDocument:
    path: str
    blocks: tuple[Block, ...]
    takeaways: tuple[str, ...]
    demo: DemoLink | None

    @property
    def widgets(self) -> list[str]:
        return [block.widget for block in self.blocks if block.kind != "markdown"]


def content_file(path: str, code: str = DEFAULT) -> Path:
    """The lesson's Markdown in language `code`: lessons/content/<code>/<path>.md, or the
    English lessons/content/<path>.md when that language has no file for it."""
    if code != DEFAULT:
        translated = CONTENT_DIR / code / f"{path}.md"
        if translated.exists():
            return translated
    return CONTENT_DIR / f"{path}.md"


def split_front_matter(source: str) -> tuple[dict, str]:
    if not source.startswith("---\n"):
        return {}, source
    end = source.find("\n---\n", 4)
    if end < 0:
        raise DocumentError("front matter starts with --- but never ends")
    meta = yaml.safe_load(source[4:end]) or {}
    if not isinstance(meta, dict):
        raise DocumentError("front matter must be a mapping")
    return meta, source[end + 5:]


def fill_values(text: str, values: dict[str, str], code: str = DEFAULT) -> str:
    """Replace every {{value:name}} and {{lesson:path}} (a link worded in language `code`);
    an unknown name is an error, not a silent blank."""
    def lookup(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise DocumentError(f"unknown value {{{{value:{name}}}}}")
        return values[name]

    def link(match: re.Match[str]) -> str:
        try:
            return catalog.reference(match.group(1), code)
        except KeyError:
            raise DocumentError(f"unknown lesson {{{{lesson:{match.group(1)}}}}}") from None

    def page(match: re.Match[str]) -> str:
        return with_lang(f"/{match.group(1)}", code)

    return PAGE_URL.sub(page, LESSON_LINK.sub(link, VALUE.sub(lookup, text)))


def parse(path: str, source: str, values: dict[str, str],
          code: str = DEFAULT) -> LessonDocument:
    meta, body = split_front_matter(source)
    blocks: list[Block] = []
    position = 0
    for match in BLOCK.finditer(body):
        before = body[position:match.start()].strip()
        if before:
            blocks.append(Block("markdown", text=fill_values(before, values, code)))
        blocks.append(Block(match.group(1), match.group(2) or ""))
        position = match.end()
    rest = body[position:].strip()
    if rest:
        blocks.append(Block("markdown", text=fill_values(rest, values, code)))
    for block in blocks:
        leftover = ANY_PLACEHOLDER.search(block.text)
        if leftover:
            raise DocumentError(f"{path}: placeholder {leftover.group(0)} is not on a line "
                                f"of its own or is malformed")
    takeaways = tuple(fill_values(str(item), values, code) for item in meta.get("takeaways", []))
    demo_meta = meta.get("demo")
    demo = None
    if demo_meta:
        demo = DemoLink(
            path=str(demo_meta["path"]),
            label=str(demo_meta["label"]),
            text=fill_values(str(demo_meta.get("text", "")), values, code),
            query={str(key): str(value) for key, value in (demo_meta.get("query") or {}).items()},
        )
    return LessonDocument(path, tuple(blocks), takeaways, demo)


def read_source(file: Path) -> str:
    """A lesson file's text (the one place lessons are read from disk)."""
    return file.read_text(encoding="utf-8")


# One process serves many sessions, and the YAML and the placeholders cost 1-2 ms a lesson
# on every page run: a parsed document is kept per (file, its mtime, language, values), so
# an edited file is read again and the languages never share an entry. What it holds is
# immutable (frozen dataclasses, tuples, strings) except the demo link's query, which
# load() copies for each caller.
@lru_cache(maxsize=128)
def _parsed(file: Path, mtime_ns: int, path: str, code: str,
            values: tuple[tuple[str, str], ...]) -> LessonDocument:
    return parse(path, read_source(file), dict(values), code)


def load(path: str, values: Mapping[str, str], code: str = DEFAULT) -> LessonDocument:
    """The lesson at `path` (e.g. "why-memory") in language `code` (English where that
    language has no file), with `values` (worded for the same language) filled in."""
    file = content_file(path, code)
    document = _parsed(file, file.stat().st_mtime_ns, path, code, tuple(values.items()))
    if document.demo is None:
        return document
    return replace(document, demo=replace(document.demo, query=dict(document.demo.query)))
