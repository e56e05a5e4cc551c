"""Grading: an answer is right when it picks exactly the right options; 80% passes."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from quiz.config import PASS_MARK
from quiz.draw import DrawnQuestion


@dataclass(frozen=True)
class Feedback:
    """What the learner sees once an answer is locked (displayed indices)."""

    chosen: frozenset[int]
    correct: frozenset[int]
    explanations: tuple[str, ...]
    topic: str

    @property
    def is_correct(self) -> bool:
        return self.chosen == self.correct


def check_choice(drawn: DrawnQuestion, chosen: Iterable[int]) -> frozenset[int]:
    """The chosen displayed indices, validated (ValueError for an impossible answer)."""
    picked = frozenset(chosen)
    if not picked:
        raise ValueError("pick at least one option")
    if any(not isinstance(i, int) or not 0 <= i < len(drawn.order) for i in picked):
        raise ValueError("an answer refers to an option that does not exist")
    if len(picked) > 1 and not drawn.question.multiple:
        raise ValueError("this question has one answer")
    return picked


def feedback(drawn: DrawnQuestion, chosen: Iterable[int]) -> Feedback:
    explanations = tuple(drawn.explanation(i) for i in range(len(drawn.order)))
    return Feedback(frozenset(chosen), drawn.correct, explanations, drawn.question.topic)


@dataclass(frozen=True)
class Score:
    correct: int
    total: int

    @property
    def percent(self) -> int:
        """Whole percent, rounded down (never rounds a fail up to a pass)."""
        return math.floor(100 * self.correct / self.total) if self.total else 0

    @property
    def passed(self) -> bool:
        return self.total > 0 and self.correct >= PASS_MARK * self.total - 1e-9
