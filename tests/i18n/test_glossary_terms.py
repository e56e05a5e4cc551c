"""The glossary's one term per idea (docs/I18N.md): Vietnamese says "lớp" for a layer
everywhere a learner reads it, in the lessons, the quiz and the app's messages, as the
demos and the planner do; "layer" stays only in code, in placeholders and names, and in
the gloss "các lớp (layer)" that introduces the term."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

from i18n.catalog import LOCALE_DIR

ROOT = Path(__file__).resolve().parents[2]
# code, {{widgets}}, {placeholders}, link targets, HTML, the introducing gloss, a demo
# link's query keys in a lesson's front matter
NOT_TEXT = re.compile(r"```.*?```|`[^`\n]*`|\{\{.*?\}\}|\{[^{}\n]*\}|\]\([^)]*\)|<[^>\n]*>"
                      r"|\(layer\)|layer\(x\)|\w\(layers?\b|(?m:^\s+layers?:)", re.S)
# ("tầng" is a pipeline's stage in the lesson on many GPUs, not a layer)
ENGLISH_WORD = re.compile(r"(?<![\w\-_.])layers?(?![\w\-_])", re.I)


def _stray(text: str) -> list[str]:
    return ENGLISH_WORD.findall(NOT_TEXT.sub(" ", text))


@pytest.mark.parametrize("path", sorted((ROOT / "lessons" / "content" / "vi").glob("*.md"))
                         + [ROOT / "quiz" / "i18n" / "vi.yaml"], ids=lambda p: p.name)
def test_vietnamese_lessons_and_quiz_say_lop(path: Path) -> None:
    assert _stray(path.read_text(encoding="utf-8")) == []


def test_vietnamese_messages_say_lop() -> None:
    with open(LOCALE_DIR / "vi" / "LC_MESSAGES" / "messages.po", "rb") as f:
        catalog = read_po(f)
    stray = [m.string for m in catalog
             if m.id and isinstance(m.string, str) and _stray(m.string)]
    assert stray == []


def test_vietnamese_says_lop_mo_hinh_for_a_model_class() -> None:
    """Bare "lớp" is a layer: transformers' model class is "lớp mô hình", so "the class
    keeps 3.1 GiB per layer" never reads "the layer keeps 3.1 GiB per layer"."""
    with open(LOCALE_DIR / "vi" / "LC_MESSAGES" / "messages.po", "rb") as f:
        catalog = read_po(f)
    about_class = [m for m in catalog if m.id and isinstance(m.id, str)
                   and re.search(r"(?<!-)\bclass(es|'s)?\b", NOT_TEXT.sub(" ", m.id))]
    assert len(about_class) >= 10
    assert [m.id for m in about_class if "lớp mô hình" not in m.string.lower()] == []


def test_the_check_finds_a_stray_term() -> None:
    assert _stray("mỗi layer giữ input") == ["layer"]
    assert _stray("các lớp (layer), `every-layer`, {layers} lớp") == []
