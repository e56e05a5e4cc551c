"""The question bank: the shipped file is valid, and a broken entry is named."""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from lessons.catalog import LESSON_PATHS
from quiz.bank import (
    BANK_PATH,
    MAX_HEDGE_RULE_ABOVE_CHANCE,
    MAX_LONGEST_SHARE,
    MIN_APPLY_ITEMS,
    MIN_PER_TOPIC,
    TOPICS,
    BankError,
    cue_report,
    load_bank,
    parse_bank,
)

ENTRY: dict[str, Any] = {
    "id": "q",
    "topic": "why-memory",
    "prompt": "Why?",
    "options": ["a", "b", "c"],
    "correct": [1],
    "explanations": ["no", "yes", "no"],
}


def bank_of(*broken: dict[str, Any]) -> list[dict[str, Any]]:
    """A valid bank (9 per topic) with `broken` entries put first."""
    entries = [
        {**copy.deepcopy(ENTRY), "id": f"{topic}-{i}", "topic": topic}
        for topic in TOPICS
        for i in range(9)
    ]
    return [*broken, *entries]


def test_shipped_bank_is_valid_and_covers_every_lesson() -> None:
    questions = load_bank()
    assert len(questions) >= 60
    counts = Counter(q.topic for q in questions)
    assert set(counts) == set(TOPICS)
    assert min(counts.values()) >= MIN_PER_TOPIC
    assert any(q.multiple for q in questions)


def test_topics_are_the_lesson_paths() -> None:
    assert tuple(TOPICS) == tuple(LESSON_PATHS)


def test_a_valid_bank_parses() -> None:
    questions = parse_bank(bank_of())
    assert len(questions) == 9 * len(TOPICS)
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
        ({"tags": "apply"}, "`tags` must be a list of words"),
        ({"tags": ["aply"]}, "unknown tag(s) aply (known: apply)"),
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
    with pytest.raises(BankError, match="needs 60"):
        parse_bank(bank_of()[:10])
    five_each = [e for e in bank_of() if int(e["id"].rsplit("-", 1)[1]) < 5]
    with pytest.raises(BankError, match="each lesson needs 6 questions: why-memory \\(5\\)"):
        parse_bank(five_each, min_questions=1)
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


def test_values_are_filled_from_the_lessons_and_unknown_ones_named() -> None:
    from lessons.values import lesson_values

    entry = {**copy.deepcopy(ENTRY), "id": "numbers",
             "prompt": "Kept: {{value:seed_all_kept_gb}}?"}
    assert parse_bank(bank_of(entry))[0].prompt == (
        f"Kept: {lesson_values()['seed_all_kept_gb']}?")
    broken = {**copy.deepcopy(ENTRY), "id": "typo", "options": ["{{value:nope}}", "b", "c"]}
    with pytest.raises(BankError, match="entry 1 \\(id 'typo'\\): `options\\[0\\]`: unknown value"):
        parse_bank(bank_of(broken))


def test_shipped_bank_has_no_typed_figures_of_the_lessons() -> None:
    """Numbers the lessons compute appear in the bank only as placeholders."""
    source = BANK_PATH.read_text(encoding="utf-8")
    for typed in ("4.0 GB", "0.23 GB", "0.14 GB", "2.0 GB", "6.1 GB", "48 GB", "70%", "2.7%",
                  "33%", "226", "164", "22,667"):
        assert typed not in source, typed


def test_shipped_bank_keeps_the_right_option_from_being_the_longest() -> None:
    report = cue_report(load_bank())
    assert report.items >= 50
    assert report.longest <= MAX_LONGEST_SHARE
    assert report.only_number <= MAX_LONGEST_SHARE
    assert not report.problems


def test_cue_report_flags_a_bank_where_the_longest_option_wins() -> None:
    telling = [{**copy.deepcopy(ENTRY), "id": f"t{i}", "topic": topic,
                "options": ["no", "nope", "yes, the long and careful one"], "correct": [2]}
               for i, topic in enumerate(TOPICS * 9)]
    report = cue_report(parse_bank(telling))
    assert report.longest == 1.0 and report.problems


@pytest.mark.parametrize(("question_id", "topic"), [
    ("torch-checkpoint-wraps", "in-practice"), ("use-reentrant", "in-practice"),
    ("layer-boundaries", "language-models"),
])
def test_questions_are_tagged_to_the_lesson_that_answers_them(question_id, topic) -> None:
    assert {q.id: q.topic for q in load_bank()}[question_id] == topic


def test_selective_recompute_key_recomputes_the_scores() -> None:
    """The key once said selective recomputation keeps the attention matrices."""
    question = {q.id: q for q in load_bank()}["selective-recompute"]
    (right,) = question.correct
    assert "recomputes the attention scores" in question.options[right]
    wrong = [text for i, text in enumerate(question.options) if i != right]
    assert any("Keeps the attention matrices" in text for text in wrong)


def test_more_checkpoints_dial_agrees_with_the_lessons() -> None:
    """Recomputation is one extra forward whatever the spacing; keeping more activations
    (fewer checkpointed layers, selective policies) means less recomputation."""
    question = {q.id: q for q in load_bank()}["more-checkpoints-dial"]
    (right,) = question.correct
    assert "activations" in question.prompt
    assert question.options[right] == "Less recomputation and more memory."


def test_reasoning_items_with_numbers_are_at_least_half() -> None:
    questions = load_bank()
    with_numbers = [q for q in questions
                    if any(c.isdigit() for c in q.prompt + " ".join(q.options))]
    assert len(with_numbers) * 2 >= len(questions)


def test_the_hedge_rule_scores_near_chance_on_the_shipped_bank() -> None:
    """"Drop options with absolute words, prefer hedged ones" must not beat guessing: a review
    found it scoring 35% against 25% and keeping only the key in 7 items."""
    report = cue_report(load_bank())
    assert report.hedge_rule <= report.chance + MAX_HEDGE_RULE_ABOVE_CHANCE
    assert report.hedge_rule >= report.chance - MAX_HEDGE_RULE_ABOVE_CHANCE  # no reverse cue
    assert report.hedge_rule_outright <= 2
    assert "'drop absolutes, prefer hedges' scores" in report.describe()


def test_the_hedge_rule_report_catches_a_cued_bank() -> None:
    """Every key hedged and every distractor absolute: the rule scores 100% and check-bank
    names it."""
    cued = {**copy.deepcopy(ENTRY), "options": ["It never does", "It usually does",
                                                "It always does"]}
    entries = [{**copy.deepcopy(cued), "id": e["id"], "topic": e["topic"]} for e in bank_of()]
    report = cue_report(parse_bank(entries))
    assert report.hedge_rule == 1.0 and report.hedge_rule_outright == report.items
    assert any("dropping absolute words" in problem for problem in report.problems)
    fair = {**copy.deepcopy(ENTRY), "options": ["It never does", "It usually does",
                                                "It often does"]}
    entries = [{**copy.deepcopy(fair), "id": e["id"], "topic": e["topic"]} for e in bank_of()]
    assert cue_report(parse_bank(entries)).hedge_rule == 0.5


def test_apply_items_are_tagged_and_counted() -> None:
    questions = load_bank()
    applying = [q for q in questions if q.applies]
    assert len(applying) >= MIN_APPLY_ITEMS
    assert len({q.topic for q in applying}) >= 3
    assert cue_report(questions).apply_items == len(applying)
    untagged = parse_bank(bank_of())
    assert any("tagged `apply`" in problem for problem in cue_report(untagged).problems)
