"""The question bank: the shipped file is valid, and a broken entry is named."""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from lessons.catalog import LESSON_PATHS
from quiz.bank import BANK_PATH, TOPICS, BankError, load_bank, parse_bank

ENTRY: dict[str, Any] = {
    "id": "q",
    "topic": "why-memory",
    "prompt": "Why?",
    "options": ["a", "b", "c"],
    "correct": [1],
    "explanations": ["no", "yes", "no"],
}


def bank_of(*broken: dict[str, Any]) -> list[dict[str, Any]]:
    """A valid bank (5 per topic) with `broken` entries put first."""
    entries = [
        {**copy.deepcopy(ENTRY), "id": f"{topic}-{i}", "topic": topic}
        for topic in TOPICS
        for i in range(5)
    ]
    return [*broken, *entries]


def test_shipped_bank_is_valid_and_covers_every_lesson() -> None:
    questions = load_bank()
    assert len(questions) >= 30
    counts = Counter(q.topic for q in questions)
    assert set(counts) == set(TOPICS)
    assert min(counts.values()) >= 4  # enough to draw two per lesson and still vary
    assert any(q.multiple for q in questions)


def test_topics_are_the_lesson_paths() -> None:
    assert tuple(TOPICS) == tuple(LESSON_PATHS)


def test_a_valid_bank_parses() -> None:
    questions = parse_bank(bank_of())
    assert len(questions) == 35
    assert questions[0].correct == frozenset({1})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"topic": "nowhere"}, "topic 'nowhere' is not one of"),
        ({"correct": [3]}, "index out of range"),
        ({"correct": []}, "non-empty list"),
        ({"correct": ["1"]}, "non-empty list"),
        ({"correct": [True]}, "non-empty list"),
        ({"correct": [0, 0]}, "lists an index twice"),
        ({"correct": [0, 1, 2]}, "every option is marked correct"),
        ({"explanations": ["only one"]}, "1 explanations for 3 options"),
        ({"options": ["a"], "correct": [0], "explanations": ["x"]}, "at least 2 options"),
        ({"options": ["a", "a", "c"]}, "same text"),
        ({"prompt": "  "}, "`prompt` must be non-empty text"),
        ({"options": "a, b"}, "`options` must be a list"),
        ({"extra": 1}, "unknown field(s) extra"),
    ],
)
def test_a_broken_entry_is_named(change: dict[str, Any], message: str) -> None:
    broken = {**copy.deepcopy(ENTRY), "id": "broken-one", **change}
    with pytest.raises(BankError, match="entry 1 \\(id 'broken-one'\\)") as error:
        parse_bank(bank_of(broken))
    assert message in str(error.value)


def test_missing_fields_are_listed() -> None:
    broken = {"id": "lonely", "topic": "how-many"}
    with pytest.raises(BankError, match="missing prompt, options, correct, explanations"):
        parse_bank(bank_of(broken))


def test_duplicate_ids_name_both_entries() -> None:
    entries = bank_of()
    entries[3]["id"] = entries[0]["id"]
    with pytest.raises(BankError, match="entry 4 .*already used by entry 1"):
        parse_bank(entries)


def test_too_small_or_uncovering_banks_fail() -> None:
    with pytest.raises(BankError, match="needs 30"):
        parse_bank(bank_of()[:10])
    without_practice = [e for e in bank_of() if e["topic"] != "in-practice"]
    with pytest.raises(BankError, match="in-practice"):
        parse_bank(without_practice, min_questions=1)
    with pytest.raises(BankError, match="YAML list"):
        parse_bank({"id": "x"})


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bank.yaml"
    path.write_text("- id: a\n  prompt: [unclosed\n")
    with pytest.raises(BankError, match="bank.yaml: not valid YAML"):
        load_bank(path)
    entries = yaml.safe_load(BANK_PATH.read_text())
    entries[4]["correct"] = [9]
    path.write_text(yaml.safe_dump(entries, allow_unicode=True))
    with pytest.raises(BankError, match=f"bank.yaml: entry 5 \\(id '{entries[4]['id']}'\\)"):
        load_bank(path)
