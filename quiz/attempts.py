"""Attempts kept on the server: the frozen draw, the locked answers, the final score."""

from __future__ import annotations

import json
import re
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from quiz.db import connect, transaction
from quiz.draw import DrawnQuestion
from quiz.grading import Feedback, Score, check_choice, feedback

_ATTEMPT_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")


class AttemptExpired(LookupError):
    """The attempt is unknown or older than its time to live."""


class CooldownActive(RuntimeError):
    def __init__(self, seconds_left: int) -> None:
        self.seconds_left = seconds_left
        super().__init__(f"a new attempt can start in {seconds_left} s")


class AnswerOutOfTurn(ValueError):
    """Questions are answered one at a time, in order."""


@dataclass(frozen=True)
class Attempt:
    id: str
    created_at: float
    questions: tuple[DrawnQuestion, ...]
    answers: dict[int, frozenset[int]] = field(default_factory=dict)
    finished_at: float | None = None

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    @property
    def next_position(self) -> int | None:
        """The first question not answered yet; None when all are."""
        for position in range(len(self.questions)):
            if position not in self.answers:
                return position
        return None

    @property
    def score(self) -> Score:
        right = sum(
            1
            for position, chosen in self.answers.items()
            if chosen == self.questions[position].correct
        )
        return Score(right, len(self.questions))

    def feedback(self, position: int) -> Feedback | None:
        """The feedback of an answered question (None before it is answered)."""
        if position not in self.answers:
            return None
        return feedback(self.questions[position], self.answers[position])


def is_attempt_id(text: str) -> bool:
    return bool(_ATTEMPT_ID.match(text or ""))


class AttemptStore:
    def __init__(
        self,
        data_dir: Path,
        ttl_seconds: int,
        cooldown_seconds: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.data_dir = data_dir
        self.ttl_seconds = ttl_seconds
        self.cooldown_seconds = cooldown_seconds
        self.clock = clock

    def _load(self, connection: sqlite3.Connection, attempt_id: str) -> Attempt:
        if not is_attempt_id(attempt_id):
            raise AttemptExpired(attempt_id)
        row = connection.execute("SELECT * FROM attempts WHERE id = ?", (attempt_id,)).fetchone()
        if row is None or row["created_at"] + self.ttl_seconds < self.clock():
            raise AttemptExpired(attempt_id)
        answers = {
            answer["position"]: frozenset(json.loads(answer["chosen"]))
            for answer in connection.execute(
                "SELECT position, chosen FROM answers WHERE attempt_id = ?", (attempt_id,)
            )
        }
        questions = tuple(DrawnQuestion.from_json(q) for q in json.loads(row["questions"]))
        return Attempt(row["id"], row["created_at"], questions, answers, row["finished_at"])

    def get(self, attempt_id: str) -> Attempt:
        """The attempt; AttemptExpired when it is unknown or too old."""
        with connect(self.data_dir) as connection:
            return self._load(connection, attempt_id)

    def cooldown_left(self, attempt: Attempt) -> int:
        """Seconds before a new attempt may follow this one (0 after a pass or when over)."""
        if not attempt.finished or attempt.score.passed:
            return 0
        assert attempt.finished_at is not None
        left = attempt.finished_at + self.cooldown_seconds - self.clock()
        return max(0, int(left + 0.999))

    def start(self, questions: Sequence[DrawnQuestion], previous_id: str | None = None) -> Attempt:
        """A new attempt with this frozen draw. After a failed `previous_id` it waits out the
        cooldown (CooldownActive)."""
        if previous_id:
            try:
                left = self.cooldown_left(self.get(previous_id))
            except AttemptExpired:
                left = 0
            if left:
                raise CooldownActive(left)
        now = self.clock()
        attempt = Attempt(secrets.token_urlsafe(18), now, tuple(questions))
        payload = json.dumps([q.to_json() for q in attempt.questions], ensure_ascii=False)
        with connect(self.data_dir) as connection, transaction(connection):
            connection.execute(
                "INSERT INTO attempts (id, created_at, questions) VALUES (?, ?, ?)",
                (attempt.id, now, payload),
            )
            # Forget unfinished attempts and failed ones long past their time to live.
            connection.execute(
                "DELETE FROM attempts WHERE created_at < ? AND (passed IS NULL OR passed = 0)",
                (now - 2 * self.ttl_seconds,),
            )
        return attempt

    def answer(self, attempt_id: str, position: int, chosen: Iterable[int]) -> Feedback:
        """Lock an answer and return its feedback. A question answered before keeps its first
        answer: a changed answer is ignored and the locked feedback comes back."""
        with connect(self.data_dir) as connection, transaction(connection):
            attempt = self._load(connection, attempt_id)
            locked = attempt.feedback(position)
            if locked is not None:
                return locked
            if position != attempt.next_position:
                raise AnswerOutOfTurn(f"question {position + 1} is not the current one")
            picked = check_choice(attempt.questions[position], chosen)
            drawn = attempt.questions[position]
            now = self.clock()
            connection.execute(
                "INSERT INTO answers (attempt_id, position, chosen, is_correct, answered_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (attempt_id, position, json.dumps(sorted(picked)), picked == drawn.correct, now),
            )
            answers = {**attempt.answers, position: picked}
            if len(answers) == len(attempt.questions):
                score = Attempt(attempt.id, attempt.created_at, attempt.questions, answers).score
                connection.execute(
                    "UPDATE attempts SET finished_at = ?, correct = ?, total = ?, passed = ? "
                    "WHERE id = ?",
                    (now, score.correct, score.total, score.passed, attempt_id),
                )
            return feedback(drawn, picked)
