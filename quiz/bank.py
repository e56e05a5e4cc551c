"""The question bank: `questions.yaml`, a list a teacher can edit, validated on load, and
its translations `i18n/<code>.yaml`.

Prompts, options and explanations may write ``{{value:name}}``: the same computed values the
lessons print (lessons/values.py), filled in on load, so no figure in the quiz can drift from
the lessons. The topics are the lessons of lessons/catalog.py.

The English bank holds the ids, the topics and the answer key. An overlay holds, per question
id, only the texts (prompt, options by index, explanations), so `localize` swaps the words
and keeps everything grading reads: a learner can switch language in the middle of an
attempt and keeps the same questions, the same options in the same shuffled order and the
same score.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from i18n.languages import DEFAULT, language
from lessons.catalog import LESSON_PATHS
from lessons.document import DocumentError, fill_values
from lessons.values import lesson_values

BANK_PATH = Path(__file__).with_name("questions.yaml")
OVERLAY_DIR = Path(__file__).with_name("i18n")  # <code>.yaml per language but English
LOG = logging.getLogger(__name__)
TOPICS: tuple[str, ...] = LESSON_PATHS
MIN_QUESTIONS = 60
MIN_PER_TOPIC = 6
# check-bank fails when the right option is the longest one in more than this share of the
# single-answer items (chance is 1 / number of options, 0.25 for four).
MAX_LONGEST_SHARE = 0.35
# The test-wise rule "drop the options with an absolute word, prefer the hedged ones" must not
# beat chance by more than this (its expected score, over the single-answer items).
MAX_HEDGE_RULE_ABOVE_CHANCE = 0.05
# Tags an entry may carry. "apply": the learner applies an idea to a shape the lesson did not
# work through (a new depth and layer size, a frozen base, a new vocabulary): every draw
# holds at least MIN_APPLY_PER_DRAW of them (quiz.draw), so the bank needs a few more.
TAGS = frozenset({"apply"})
APPLY = "apply"
MIN_APPLY_PER_DRAW = 2
MIN_APPLY_ITEMS = 6
_FIELDS = ("id", "topic", "prompt", "options", "correct", "explanations")
_OPTIONAL = ("tags",)
# Words a test-wise learner reads as a cue: absolutes ("never", "only") mark a wrong option
# for them, hedges ("usually", "about") a right one. Matched as whole lowercase words.
ABSOLUTE_WORDS = frozenset({
    "always", "never", "only", "all", "every", "everything", "none", "nothing", "cannot",
    "must", "exactly", "whatever", "entirely", "completely", "any", "whole"})
HEDGE_WORDS = frozenset({
    "about", "usually", "often", "may", "might", "can", "could", "typically", "roughly",
    "some", "sometimes", "most", "generally", "likely", "around", "mostly", "partly",
    "approximately", "tends", "slightly"})


class BankError(ValueError):
    """The bank is not valid; the message names the entry and what is wrong."""


@dataclass(frozen=True)
class Question:
    id: str
    topic: str
    prompt: str
    options: tuple[str, ...]
    correct: frozenset[int]
    explanations: tuple[str, ...]
    tags: frozenset[str] = frozenset()

    @property
    def applies(self) -> bool:
        """True for an "apply it to a new shape" item (tag `apply`)."""
        return APPLY in self.tags

    @property
    def multiple(self) -> bool:
        """True when more than one option is right (the page asks to pick all)."""
        return len(self.correct) > 1




def _text(value: Any, where: str, field: str, code: str = DEFAULT) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BankError(f"{where}: `{field}` must be non-empty text")
    try:
        return fill_values(value.strip(), lesson_values(code), code)
    except DocumentError as error:
        raise BankError(f"{where}: `{field}`: {error}") from error


def _texts(value: Any, where: str, field: str, code: str = DEFAULT) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise BankError(f"{where}: `{field}` must be a list")
    return tuple(_text(item, where, f"{field}[{i}]", code) for i, item in enumerate(value))


def parse_question(entry: Any, position: int) -> Question:
    """One entry of the bank, checked; `position` is its 1-based place in the file."""
    where = f"entry {position}"
    if not isinstance(entry, Mapping):
        raise BankError(f"{where}: must be a mapping with {', '.join(_FIELDS)}")
    if isinstance(entry.get("id"), str) and entry["id"].strip():
        where = f"entry {position} (id {entry['id'].strip()!r})"
    missing = [field for field in _FIELDS if field not in entry]
    unknown = sorted(set(map(str, entry)) - set(_FIELDS) - set(_OPTIONAL))
    if missing:
        raise BankError(f"{where}: missing {', '.join(missing)}")
    if unknown:
        raise BankError(f"{where}: unknown field(s) {', '.join(unknown)}")
    question_id = _text(entry["id"], where, "id")
    topic = _text(entry["topic"], where, "topic")
    if topic not in TOPICS:
        raise BankError(f"{where}: topic {topic!r} is not one of {', '.join(TOPICS)}")
    options = _texts(entry["options"], where, "options")
    if len(options) < 2:
        raise BankError(f"{where}: needs at least 2 options")
    if len(set(options)) != len(options):
        raise BankError(f"{where}: two options have the same text")
    correct = entry["correct"]
    if (
        not isinstance(correct, list)
        or not correct
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in correct)
    ):
        raise BankError(f"{where}: `correct` must be a non-empty list of option indices")
    if len(set(correct)) != len(correct):
        raise BankError(f"{where}: `correct` lists an index twice")
    if any(not 0 <= i < len(options) for i in correct):
        raise BankError(f"{where}: `correct` index out of range 0..{len(options) - 1}")
    if len(correct) == len(options):
        raise BankError(f"{where}: every option is marked correct")
    explanations = _texts(entry["explanations"], where, "explanations")
    if len(explanations) != len(options):
        raise BankError(
            f"{where}: {len(explanations)} explanations for {len(options)} options (one per option)"
        )
    tags = entry.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise BankError(f"{where}: `tags` must be a list of words")
    if unknown_tags := sorted(set(tags) - TAGS):
        raise BankError(f"{where}: unknown tag(s) {', '.join(unknown_tags)} "
                        f"(known: {', '.join(sorted(TAGS))})")
    return Question(
        question_id,
        topic,
        _text(entry["prompt"], where, "prompt"),
        options,
        frozenset(correct),
        explanations,
        frozenset(tags),
    )


def parse_bank(entries: Any, min_questions: int = MIN_QUESTIONS,
               min_per_topic: int = MIN_PER_TOPIC) -> tuple[Question, ...]:
    """A whole bank: unique ids, at least `min_per_topic` entries for every lesson and at
    least `min_questions` in all."""
    if not isinstance(entries, list):
        raise BankError("the bank must be a YAML list of questions")
    questions = tuple(parse_question(entry, i) for i, entry in enumerate(entries, start=1))
    seen: dict[str, int] = {}
    for position, question in enumerate(questions, start=1):
        if question.id in seen:
            raise BankError(
                f"entry {position} (id {question.id!r}): id already used by entry "
                f"{seen[question.id]}"
            )
        seen[question.id] = position
    if len(questions) < min_questions:
        raise BankError(f"the bank has {len(questions)} questions; it needs {min_questions}")
    uncovered = [topic for topic in TOPICS if all(q.topic != topic for q in questions)]
    if uncovered:
        raise BankError(f"no question covers the lesson(s) {', '.join(uncovered)}")
    thin = [f"{topic} ({count})" for topic in TOPICS
            if (count := sum(q.topic == topic for q in questions)) < min_per_topic]
    if thin:
        raise BankError(f"each lesson needs {min_per_topic} questions: {', '.join(thin)}")
    return questions


def cue_words(text: str) -> tuple[bool, bool]:
    """(has an absolute word, has a hedge) for one option's text."""
    words = set(re.findall(r"[a-z']+", text.lower().replace("can't", "cannot")))
    return bool(words & ABSOLUTE_WORDS), bool(words & HEDGE_WORDS)


def hedge_rule_picks(question: Question) -> frozenset[int]:
    """The options the test-wise rule keeps: those with the best score, a hedge +1 and an
    absolute -1 (it then guesses among them)."""
    scores = [hedge - absolute for absolute, hedge in map(cue_words, question.options)]
    best = max(scores)
    return frozenset(i for i, score in enumerate(scores) if score == best)


@dataclass(frozen=True)
class CueReport:
    """How often a surface cue points at the right option, over the single-answer items."""

    items: int
    longest: float  # share whose right option is strictly the longest
    only_number: float  # share whose right option is the only one with a digit
    chance: float  # 1 / the average number of options
    hedge_rule: float = 0.0  # expected score of "drop absolutes, prefer hedges"
    hedge_rule_outright: int = 0  # items where that rule keeps the right option alone
    apply_items: int = 0  # items tagged "apply" (all items, not only single-answer ones)

    @property
    def problems(self) -> list[str]:
        problems = []
        if self.longest > MAX_LONGEST_SHARE:
            problems.append(f"the right option is the longest in {self.longest:.0%} of the "
                            f"items (at most {MAX_LONGEST_SHARE:.0%}; chance is "
                            f"{self.chance:.0%})")
        if self.hedge_rule > self.chance + MAX_HEDGE_RULE_ABOVE_CHANCE:
            problems.append(
                f"dropping absolute words and preferring hedged options scores "
                f"{self.hedge_rule:.0%} (at most {MAX_HEDGE_RULE_ABOVE_CHANCE:.0%} above "
                f"chance, {self.chance:.0%}); it keeps only the right option in "
                f"{self.hedge_rule_outright} items")
        if self.apply_items < MIN_APPLY_ITEMS:
            problems.append(f"{self.apply_items} items are tagged `{APPLY}`; the draw needs "
                            f"at least {MIN_APPLY_ITEMS} to vary")
        return problems

    def describe(self) -> str:
        return (f"cues over {self.items} single-answer items: right option longest "
                f"{self.longest:.0%}, only one with a number {self.only_number:.0%}, "
                f"'drop absolutes, prefer hedges' scores {self.hedge_rule:.0%}, keeping "
                f"only the right option in {self.hedge_rule_outright} items "
                f"(chance {self.chance:.0%}; longest must stay at most "
                f"{MAX_LONGEST_SHARE:.0%}, the hedge rule within "
                f"{MAX_HEDGE_RULE_ABOVE_CHANCE:.0%} of chance); "
                f"{self.apply_items} '{APPLY}' items (at least {MIN_APPLY_ITEMS}, "
                f"{MIN_APPLY_PER_DRAW} per draw)")


def cue_report(questions: tuple[Question, ...]) -> CueReport:
    single = [q for q in questions if not q.multiple]
    apply_items = sum(q.applies for q in questions)
    if not single:
        return CueReport(0, 0.0, 0.0, 0.0, apply_items=apply_items)

    def longest(q: Question) -> bool:
        (right,) = q.correct
        return all(len(q.options[right]) > len(text)
                   for i, text in enumerate(q.options) if i != right)

    def only_number(q: Question) -> bool:
        with_digit = {i for i, text in enumerate(q.options) if any(c.isdigit() for c in text)}
        return with_digit == set(q.correct)

    def hedge_score(q: Question) -> float:
        picks = hedge_rule_picks(q)
        return len(picks & q.correct) / len(picks)

    return CueReport(
        len(single),
        sum(map(longest, single)) / len(single),
        sum(map(only_number, single)) / len(single),
        len(single) / sum(len(q.options) for q in single),
        sum(map(hedge_score, single)) / len(single),
        sum(hedge_rule_picks(q) == q.correct for q in single),
        apply_items,
    )


def load_bank(path: Path = BANK_PATH) -> tuple[Question, ...]:
    """Read and validate a bank file; BankError names the file and the entry at fault."""
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise BankError(f"{path.name}: not valid YAML: {error}") from error
    try:
        return parse_bank(entries)
    except BankError as error:
        raise BankError(f"{path.name}: {error}") from error


@functools.lru_cache(maxsize=4)
def _load_cached(path: Path, mtime_ns: int) -> tuple[Question, ...]:
    return load_bank(path)


def default_bank(path: Path = BANK_PATH) -> tuple[Question, ...]:
    """The shipped bank, read again only when the file changes (a teacher's edit shows up
    in the next attempt; attempts already drawn keep their frozen copy)."""
    return _load_cached(path, path.stat().st_mtime_ns)


# Translations -------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionText:
    """The words of one question in one language (no key, no topic)."""

    prompt: str
    options: tuple[str, ...]
    explanations: tuple[str, ...]


def overlay_path(code: str) -> Path:
    return OVERLAY_DIR / f"{code}.yaml"


def parse_overlay(entries: Any, code: str) -> dict[str, QuestionText]:
    """The usable entries of an overlay ({id: {prompt, options, explanations}}), their
    ``{{value:...}}`` filled for `code`. A broken entry is logged and left out (that
    question shows in English); tests/i18n fails on it."""
    if not isinstance(entries, Mapping):
        LOG.error("quiz overlay %s: not a mapping of question ids; showing English", code)
        return {}
    texts: dict[str, QuestionText] = {}
    for question_id, item in entries.items():
        where = f"{code}.yaml, id {question_id!r}"
        try:
            if not isinstance(item, Mapping):
                raise BankError(f"{where}: must map prompt, options, explanations")
            texts[str(question_id)] = QuestionText(
                _text(item.get("prompt"), where, "prompt", code),
                _texts(item.get("options"), where, "options", code),
                _texts(item.get("explanations"), where, "explanations", code),
            )
        except BankError as error:
            LOG.error("quiz overlay: %s; this question shows in English", error)
    return texts


@functools.lru_cache(maxsize=8)
def _overlay_cached(code: str, path: Path, mtime_ns: int) -> dict[str, QuestionText]:
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        LOG.error("quiz overlay %s is not valid YAML (%s); showing English", path, error)
        return {}
    return parse_overlay(entries, code)


def overlay(code: str) -> dict[str, QuestionText]:
    """Language `code`'s texts by question id (empty for English or a missing file); read
    again when the file changes."""
    language(code)
    path = overlay_path(code)
    if code == DEFAULT or not path.exists():
        return {}
    return _overlay_cached(code, path, path.stat().st_mtime_ns)


def localize(question: Question, code: str) -> Question:
    """`question` with its words in language `code`: the same id, topic and key, the options
    in the bank's order (index i is the same option in every language). Falls back to the
    question as it is when the overlay lacks it or does not match its options."""
    texts = overlay(code).get(question.id)
    if (texts is None or len(texts.options) != len(question.options)
            or len(texts.explanations) != len(question.explanations)):
        return question
    return dataclasses.replace(question, prompt=texts.prompt, options=texts.options,
                               explanations=texts.explanations)
