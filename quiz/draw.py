"""Drawing an attempt: questions spread evenly over the lessons (the service asks for
`quiz.config.QUESTIONS_PER_LESSON` per lesson, so each lesson gets exactly that many), at
least two of them "apply it to a new shape" items, shuffled, frozen. The draw is a function
of its random generator: one seed, one draw."""

from __future__ import annotations

import random
import secrets
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from quiz.bank import MIN_APPLY_PER_DRAW, Question


@dataclass(frozen=True)
class DrawnQuestion:
    """A question as one attempt shows it: `order[i]` is the bank index of displayed option i."""

    question: Question
    order: tuple[int, ...]

    @property
    def options(self) -> tuple[str, ...]:
        return tuple(self.question.options[i] for i in self.order)

    @property
    def correct(self) -> frozenset[int]:
        """Displayed indices of the right options (server side only)."""
        return frozenset(shown for shown, i in enumerate(self.order) if i in self.question.correct)

    def explanation(self, shown: int) -> str:
        return self.question.explanations[self.order[shown]]

    def to_json(self) -> dict[str, Any]:
        q = self.question
        return {
            "id": q.id,
            "topic": q.topic,
            "prompt": q.prompt,
            "options": list(q.options),
            "correct": sorted(q.correct),
            "explanations": list(q.explanations),
            "tags": sorted(q.tags),
            "order": list(self.order),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DrawnQuestion:
        question = Question(
            data["id"],
            data["topic"],
            data["prompt"],
            tuple(data["options"]),
            frozenset(data["correct"]),
            tuple(data["explanations"]),
            frozenset(data.get("tags", ())),  # attempts frozen before tags existed have none
        )
        return cls(question, tuple(data["order"]))


def draw(
    bank: Sequence[Question], count: int, rng: random.Random | None = None,
    min_apply: int = MIN_APPLY_PER_DRAW, avoid: frozenset[str] = frozenset(),
) -> tuple[DrawnQuestion, ...]:
    """`count` questions: first `min_apply` "apply it to a new shape" items (tag `apply`,
    from different lessons while it can), then the lessons take turns, the least asked
    first, so every lesson is asked about before any is asked twice; then the questions and
    each one's options are shuffled. A bank with fewer apply items gives what it has.
    Questions whose ids are in `avoid` (the learner's previous attempt) come only where
    a lesson has no other left."""
    rng = rng or random.Random(secrets.randbits(64))
    by_topic: dict[str, list[Question]] = defaultdict(list)
    for question in bank:
        by_topic[question.topic].append(question)
    topics = list(by_topic)
    rng.shuffle(topics)
    for topic in topics:
        rng.shuffle(by_topic[topic])
        # each lesson's turn takes from the end: the avoided ones wait at the front
        by_topic[topic].sort(key=lambda question: question.id not in avoid)
    asked: dict[str, int] = dict.fromkeys(topics, 0)
    chosen: list[Question] = []

    def take(question: Question) -> None:
        by_topic[question.topic].remove(question)
        asked[question.topic] += 1
        chosen.append(question)

    wanted = min(min_apply, count)
    appliers = [q for topic in topics for q in by_topic[topic] if q.applies]
    rng.shuffle(appliers)
    fresh = [question for question in appliers if question.id not in avoid]
    for pool in (fresh, appliers):  # the avoided ones only if the others are too few
        for question in pool:  # one lesson each first, so the turns below stay even
            if len(chosen) < wanted and not asked[question.topic] and question not in chosen:
                take(question)
        for question in pool:
            if len(chosen) < wanted and question not in chosen:
                take(question)
    while len(chosen) < count:
        open_topics = [topic for topic in topics if by_topic[topic]]
        if not open_topics:
            break
        take(by_topic[min(open_topics, key=lambda topic: asked[topic])][-1])
    rng.shuffle(chosen)
    drawn = []
    for question in chosen:
        order = list(range(len(question.options)))
        rng.shuffle(order)
        drawn.append(DrawnQuestion(question, tuple(order)))
    return tuple(drawn)
