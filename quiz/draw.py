"""Drawing an attempt: about a dozen questions spread over the lessons, shuffled, frozen."""

from __future__ import annotations

import random
import secrets
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from quiz.bank import Question


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
        )
        return cls(question, tuple(data["order"]))


def draw(
    bank: Sequence[Question], count: int, rng: random.Random | None = None
) -> tuple[DrawnQuestion, ...]:
    """`count` questions: topics take turns (in a random order) so every lesson is asked about
    before any is asked twice; then the questions and each one's options are shuffled."""
    rng = rng or random.Random(secrets.randbits(64))
    by_topic: dict[str, list[Question]] = defaultdict(list)
    for question in bank:
        by_topic[question.topic].append(question)
    pools = list(by_topic.values())
    for pool in pools:
        rng.shuffle(pool)
    rng.shuffle(pools)
    chosen: list[Question] = []
    while len(chosen) < count and any(pools):
        for pool in pools:
            if pool and len(chosen) < count:
                chosen.append(pool.pop())
    rng.shuffle(chosen)
    drawn = []
    for question in chosen:
        order = list(range(len(question.options)))
        rng.shuffle(order)
        drawn.append(DrawnQuestion(question, tuple(order)))
    return tuple(drawn)
