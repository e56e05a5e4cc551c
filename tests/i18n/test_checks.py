"""The translation checks: each is shown failing on a small broken fixture, then run on the
real catalogs, lesson translations and quiz overlays."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import pytest
import yaml
from babel.messages.pofile import read_po

from i18n.__main__ import extract
from i18n.catalog import TEMPLATE
from lessons.catalog import LESSON_PATHS
from lessons.document import CONTENT_DIR
from tools.translations import (
    catalog_files_problems,
    catalog_problems,
    catalog_sentences,
    english_sentences,
    leftover_english,
    lesson_files_problems,
    lesson_problems,
    missing_lessons,
    quiz_overlay_problems,
    read_catalog,
    untranslated_on_page,
)

ROOT = Path(__file__).resolve().parents[2]
QUIZ_BANK = ROOT / "quiz" / "questions.yaml"
QUIZ_OVERLAYS = sorted((ROOT / "quiz" / "i18n").glob("*.yaml"))
TRANSLATED = ("de", "vi")


def po(text: str, code: str | None = None):
    header = ('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=utf-8\\n"\n'
              + ('"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n' if code else "") + "\n")
    return read_po(io.BytesIO((header + textwrap.dedent(text)).encode()), locale=code)


TEMPLATE_FIXTURE = """
    msgid "Lessons"
    msgstr ""

    msgid "{size:.1f} GB of {total}"
    msgstr ""

    msgid "{count} layer"
    msgid_plural "{count} layers"
    msgstr[0] ""
    msgstr[1] ""
"""


def test_a_complete_catalog_passes() -> None:
    good = po("""
        msgid "Lessons"
        msgstr "Lektionen"

        msgid "{size:.1f} GB of {total}"
        msgstr "{size:.1f} GB von {total}"

        msgid "{count} layer"
        msgid_plural "{count} layers"
        msgstr[0] "eine Schicht"
        msgstr[1] "{count} Schichten"
    """, "de")
    assert catalog_problems(po(TEMPLATE_FIXTURE), good, "de") == []


@pytest.mark.parametrize(("translated", "problem"), [
    ("""
        msgid "{size:.1f} GB of {total}"
        msgstr "{size:.1f} GB von {total}"
     """, "'Lessons' is not in the catalog"),
    ("""
        msgid "Lessons"
        msgstr ""
     """, "'Lessons' has no translation"),
    ("""
        #, fuzzy
        msgid "Lessons"
        msgstr "Lektion"
     """, "(fuzzy)"),
    ("""
        msgid "{size:.1f} GB of {total}"
        msgstr "{size:.1f} GB von {gesamt}"
     """, "placeholders ['gesamt', 'size'] instead of ['size', 'total']"),
    ("""
        msgid "{size:.1f} GB of {total}"
        msgstr "{size:.1f} GB"
     """, "placeholders ['size'] instead of ['size', 'total']"),
    ("""
        msgid "{size:.1f} GB of {total}"
        msgstr "{size:.1f GB von {total}"
     """, "not a valid format string"),
    ("""
        msgid "{count} layer"
        msgid_plural "{count} layers"
        msgstr[0] "{count} Schicht"
        msgstr[1] "Schichten"
     """, "last form has placeholders [] instead of ['count']"),
    ("""
        msgid "{count} layer"
        msgid_plural "{count} layers"
        msgstr[0] "{n} Schicht"
        msgstr[1] "{count} Schichten"
     """, "form 0 has unknown placeholders ['n']"),
    ("""
        msgid "{count} layer"
        msgid_plural "{count} layers"
        msgstr[0] "{count} Schicht"
        msgstr[1] ""
     """, "'{count} layer' has no translation"),
])
def test_a_broken_catalog_is_caught(translated: str, problem: str) -> None:
    problems = catalog_problems(po(TEMPLATE_FIXTURE), po(translated, "de"), "de")
    assert any(problem in line for line in problems), problems


def test_every_message_is_translated_in_german_and_vietnamese() -> None:
    assert catalog_files_problems(TRANSLATED) == []


def test_the_template_holds_every_message_of_the_code(tmp_path: Path) -> None:
    """A message wrapped in t()/tn()/N_ but not extracted yet: run `make messages`."""
    fresh = tmp_path / "messages.pot"
    extract(fresh)
    wanted = {(message.id, message.context) for message in read_catalog(fresh) if message.id}
    have = {(message.id, message.context) for message in read_catalog(TEMPLATE) if message.id}
    assert sorted(map(str, wanted - have)) == [], "run `make messages` and translate"
    assert sorted(map(str, have - wanted)) == [], "run `make messages`: stale messages"


ENGLISH_LESSON = """---
takeaways:
  - "Activations take {{value:seed_all_kept_gb}}."
  - "Checkpointing trades time."
demo:
  path: compare
  query: {layers: 16}
  label: Compare strategies
---
Text with {{value:seed_all_kept_gb}} and {{lesson:how-many}}.

{{calculator:memory}}

More text.

{{stepper}}
"""

GERMAN_LESSON = """---
takeaways:
  - "Aktivierungen belegen {{value:seed_all_kept_gb}}."
  - "Checkpointing tauscht Zeit."
demo:
  path: compare
  query: {layers: 16}
  label: Strategien vergleichen
---
Siehe {{lesson:how-many}}; Text mit {{ value:seed_all_kept_gb }}.

{{calculator:memory}}

Mehr Text.

{{stepper}}
"""


def test_a_faithful_lesson_translation_passes() -> None:
    assert lesson_problems(ENGLISH_LESSON, GERMAN_LESSON, "de/x.md") == []


@pytest.mark.parametrize(("old", "new", "problem"), [
    ("{{calculator:memory}}", "{{calculator:logits}}", "widgets"),
    ("{{stepper}}\n", "", "widgets"),
    ("{{calculator:memory}}\n\nMehr Text.\n\n{{stepper}}",
     "{{stepper}}\n\nMehr Text.\n\n{{calculator:memory}}", "widgets"),
    ("{{lesson:how-many}}", "Lektion 3", "placeholders differ: missing ['lesson:how-many']"),
    ("{{ value:seed_all_kept_gb }}", "4,0 GB", "placeholders differ"),
    ("Text mit", "Text mit {{value:other}}", "extra ['value:other']"),
    ("query: {layers: 16}", "query: {layers: 8}", "demo query"),
    ("path: compare", "path: timeline", "demo path"),
    ('  - "Checkpointing tauscht Zeit."\n', "", "1 takeaways instead of 2"),
    ("---\nSiehe", "---\nSiehe", None),
])
def test_a_lesson_translation_that_drifts_is_caught(old: str, new: str, problem) -> None:
    assert old in GERMAN_LESSON
    problems = lesson_problems(ENGLISH_LESSON, GERMAN_LESSON.replace(old, new), "de/x.md")
    if problem is None:
        assert problems == []
    else:
        assert any(problem in line for line in problems), problems


def test_lesson_files_are_compared_with_their_english_originals(tmp_path: Path) -> None:
    (tmp_path / "de").mkdir()
    (tmp_path / "x.md").write_text(ENGLISH_LESSON, encoding="utf-8")
    (tmp_path / "de" / "x.md").write_text(GERMAN_LESSON.replace("{{stepper}}", ""),
                                          encoding="utf-8")
    (tmp_path / "de" / "y.md").write_text(GERMAN_LESSON, encoding="utf-8")
    problems = lesson_files_problems(tmp_path, ["de", "vi"])
    assert "widgets" in problems[0] and "no English lesson y.md" in problems[-1]
    assert all(line.startswith(("de/x.md", "de/y.md")) for line in problems)
    assert missing_lessons(tmp_path, ["x", "z"], "de") == ["z"]


def test_the_translated_lessons_match_the_english_ones() -> None:
    """Finds nothing to compare until lessons/content/<lang>/ exists; then every file."""
    assert lesson_files_problems(CONTENT_DIR, TRANSLATED) == []
    for code in TRANSLATED:
        if (CONTENT_DIR / code).is_dir():
            assert missing_lessons(CONTENT_DIR, LESSON_PATHS, code) == []


BANK = [
    {"id": "q1", "prompt": "P?", "options": ["a", "b", "c"], "correct": [0],
     "explanations": ["ea", "eb", "ec"]},
    {"id": "q2", "prompt": "Q?", "options": ["a", "b"], "correct": [1],
     "explanations": ["ea", "eb"]},
]
OVERLAY = {
    "q1": {"prompt": "P (de)?", "options": ["A", "B", "C"], "explanations": ["1", "2", "3"]},
    "q2": {"prompt": "Q (de)?", "options": ["A", "B"], "explanations": ["1", "2"]},
}


def test_a_complete_overlay_passes() -> None:
    assert quiz_overlay_problems(BANK, OVERLAY, "de") == []


@pytest.mark.parametrize(("change", "problem"), [
    (lambda o: o.pop("q2"), "question 'q2' is missing"),
    (lambda o: o["q1"]["options"].pop(), "2 options instead of 3"),
    (lambda o: o["q1"]["explanations"].append("4"), "4 explanations instead of 3"),
    (lambda o: o["q1"].__setitem__("options", ["A", "", "C"]), "options[1] is empty"),
    (lambda o: o["q1"].pop("prompt"), "q1: no prompt"),
    (lambda o: o["q2"].__setitem__("correct", [0]), "'correct' does not belong"),
    (lambda o: o.__setitem__("q9", dict(OVERLAY["q2"])), "'q9' is not a question"),
])
def test_an_incomplete_overlay_is_caught(change, problem: str) -> None:
    overlay = {qid: {key: list(value) if isinstance(value, list) else value
                     for key, value in item.items()} for qid, item in OVERLAY.items()}
    change(overlay)
    problems = quiz_overlay_problems(BANK, overlay, "de")
    assert any(problem in line for line in problems), problems


@pytest.mark.parametrize("overlay", QUIZ_OVERLAYS, ids=lambda path: path.name)
def test_each_quiz_overlay_covers_the_bank(overlay: Path) -> None:
    bank = yaml.safe_load(QUIZ_BANK.read_text(encoding="utf-8"))
    data = yaml.safe_load(overlay.read_text(encoding="utf-8"))
    assert quiz_overlay_problems(bank, data, overlay.stem) == []


def test_english_sentences_are_found_on_a_page() -> None:
    sentences = english_sentences([
        "**Demos run on** the server's GPU",  # 5 words once Markdown is dropped
        "Peak memory {size} measured on this run. Try it.",
        "Lessons visited: {visited} / {total}",  # too short to be telling
    ])
    assert sentences == {"demos run on the server's gpu", "measured on this run."}
    page = "Die Demos laufen auf\nSpeicherspitze 4,0 GB measured on   this run.\n"
    assert leftover_english(page, sentences) == ["measured on this run."]
    assert leftover_english("Die Demos laufen auf der GPU des Servers", sentences) == []


def test_the_catalogs_english_is_checked_on_pages() -> None:
    """A message translated as itself ("{number}. {title}") is not a leftover; the
    sidebar's English chrome would be one on a German page."""
    assert "{number}. {title}" not in catalog_sentences("de", min_words=1)
    german = "Die Demos laufen auf\nCPU (keine GPU gefunden), 2 Kerne\nBesuchte Lektionen: 0 / 7"
    assert untranslated_on_page(german, "de") == []
    assert untranslated_on_page("Lessons visited: 0 / 7", "de", min_words=2) == [
        "lessons visited:"]
