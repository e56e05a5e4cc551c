"""Attempts kept on the server: the frozen draw, the locked answers, the final score."""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)

from quiz.bank import localize
from quiz.draw import DrawnQuestion
from quiz.grading import Feedback, Score, check_choice, feedback
from storage.database import answers, attempts, ensure_learner, learners, reading, writing

_ATTEMPT_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")


class AttemptExpired(LookupError):
    """The attempt is unknown or older than its time to live."""


class CooldownActive(RuntimeError):
    def __init__(self, seconds_left: int) -> None:
        self.seconds_left = seconds_left
        super().__init__(f"a new attempt can start in {seconds_left} s")


class TooManyStarts(CooldownActive):
    """Too many unfinished attempts were started by this learner or from this address."""


START_WINDOW_SECONDS = 3600  # unfinished attempts from one address are counted over this
DEFAULT_OPEN_PER_LEARNER = 3
DEFAULT_OPEN_PER_ADDRESS = 100  # a class behind one address still starts at once


class AnswerOutOfTurn(ValueError):
    """Questions are answered one at a time, in order."""


@dataclass(frozen=True)
class Attempt:
    id: str
    created_at: float
    questions: tuple[DrawnQuestion, ...]
    answers: dict[int, frozenset[int]] = field(default_factory=dict)
    finished_at: float | None = None
    ordinal: int | None = None  # the learner's n-th attempt (None without a learner)

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

    def in_language(self, code: str) -> Attempt:
        """The same attempt with its questions' words in language `code`: the same ids,
        shuffled order, answers and score (grading reads only the key and the order)."""
        questions = tuple(DrawnQuestion(localize(drawn.question, code), drawn.order)
                          for drawn in self.questions)
        return dataclasses.replace(self, questions=questions)

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
        open_per_learner: int = DEFAULT_OPEN_PER_LEARNER,
        open_per_address: int = DEFAULT_OPEN_PER_ADDRESS,
    ) -> None:
        self.data_dir = data_dir
        self.ttl_seconds = ttl_seconds
        self.cooldown_seconds = cooldown_seconds
        self.clock = clock
        self.open_per_learner = open_per_learner
        self.open_per_address = open_per_address

    def _load(self, connection: Connection, attempt_id: str, lock: bool = False) -> Attempt:
        if not is_attempt_id(attempt_id):
            raise AttemptExpired(attempt_id)
        query = select(attempts).where(attempts.c.id == attempt_id)
        row = connection.execute(query.with_for_update() if lock else query).mappings().first()
        if row is None or row["created_at"] + self.ttl_seconds < self.clock():
            raise AttemptExpired(attempt_id)
        chosen = {
            answer.position: frozenset(json.loads(answer.chosen))
            for answer in connection.execute(
                select(answers.c.position, answers.c.chosen).where(
                    answers.c.attempt_id == attempt_id
                )
            )
        }
        questions = tuple(DrawnQuestion.from_json(q) for q in json.loads(row["questions"]))
        return Attempt(row["id"], row["created_at"], questions, chosen, row["finished_at"],
                       row["ordinal"])

    def get(self, attempt_id: str) -> Attempt:
        """The attempt; AttemptExpired when it is unknown or too old."""
        with reading(self.data_dir) as connection:
            return self._load(connection, attempt_id)

    def cooldown_left(self, attempt: Attempt) -> int:
        """Seconds before a new attempt may follow this one (0 after a pass or when over)."""
        if not attempt.finished or attempt.score.passed:
            return 0
        assert attempt.finished_at is not None
        left = attempt.finished_at + self.cooldown_seconds - self.clock()
        return max(0, int(left + 0.999))

    def _whose(self, learner_id: str | None,
               client: str | None) -> list[ColumnElement[bool]]:
        """The attempts that share a cooldown with this learner at this address: the
        learner's own and every one from the same client address (a new cookie, or another
        learner behind the same proxy, does not start a fresh count)."""
        whose = []
        if learner_id:
            whose.append(attempts.c.learner_id == learner_id)
        if client:
            whose.append(attempts.c.client == client)
        return whose

    def _wait_for(self, connection: Connection, learner_id: str | None,
                  client: str | None) -> int:
        """Seconds left of the cooldown after the last failed attempt of this learner or
        from this client address."""
        whose = self._whose(learner_id, client)
        if not self.cooldown_seconds or not whose:
            return 0
        since = self.clock() - self.cooldown_seconds
        last = connection.execute(
            select(func.max(attempts.c.finished_at)).where(
                attempts.c.passed.is_(False), attempts.c.finished_at > since, or_(*whose))
        ).scalar()
        return max(0, int(last + self.cooldown_seconds - self.clock() + 0.999)) if last else 0

    def _starts_left(self, connection: Connection, learner_id: str | None,
                     client: str | None) -> int:
        """Seconds before another attempt may start when this learner already has
        `open_per_learner` unfinished attempts, or this address `open_per_address` unfinished
        ones started within START_WINDOW_SECONDS (0: it may start now)."""
        now = self.clock()
        unfinished = and_(attempts.c.finished_at.is_(None),
                          attempts.c.created_at > now - self.ttl_seconds)
        limits = []
        if learner_id:
            limits.append((attempts.c.learner_id == learner_id, self.open_per_learner,
                           self.ttl_seconds))
        if client:
            limits.append((and_(attempts.c.client == client,
                                attempts.c.created_at > now - START_WINDOW_SECONDS),
                           self.open_per_address, START_WINDOW_SECONDS))
        for whose, limit, window in limits:
            started = connection.execute(
                select(attempts.c.created_at).where(unfinished, whose)
                .order_by(attempts.c.created_at.desc()).limit(limit)
            ).scalars().all()
            if len(started) >= limit:
                return max(1, int(min(started) + min(window, self.ttl_seconds) - now + 0.999))
        return 0

    def _answer_wait(self, connection: Connection, attempt_id: str, created_at: float) -> int:
        """Seconds before this attempt may be answered: an attempt of the same learner or
        from the same address that failed after this one was started starts the cooldown
        for it too, so attempts started in advance (under other cookies) cannot skip it."""
        if not self.cooldown_seconds:
            return 0
        owner = connection.execute(
            select(attempts.c.learner_id, attempts.c.client).where(attempts.c.id == attempt_id)
        ).first()
        whose = self._whose(owner.learner_id, owner.client) if owner is not None else []
        if not whose:
            return 0
        last = connection.execute(
            select(func.max(attempts.c.finished_at)).where(
                or_(*whose), attempts.c.id != attempt_id, attempts.c.passed.is_(False),
                attempts.c.finished_at >= created_at,
            )
        ).scalar()
        return max(0, int(last + self.cooldown_seconds - self.clock() + 0.999)) if last else 0

    def wait_left(self, learner_id: str | None, client: str | None = None) -> int:
        """Seconds before this learner, at this address, may start again."""
        with reading(self.data_dir) as connection:
            return self._wait_for(connection, learner_id, client)

    def start(
        self,
        questions: Sequence[DrawnQuestion],
        previous_id: str | None = None,
        learner_id: str | None = None,
        client: str | None = None,
    ) -> Attempt:
        """A new attempt with this frozen draw. After a failed attempt (`previous_id`) it waits
        out the cooldown (CooldownActive), as after any failed attempt of the learner or from
        the same address. The learner's attempts are counted."""
        if previous_id:
            try:
                left = self.cooldown_left(self.get(previous_id))
            except AttemptExpired:
                left = 0
            if left:
                raise CooldownActive(left)
        now = self.clock()
        payload = json.dumps([q.to_json() for q in questions], ensure_ascii=False)
        ordinal = None
        with writing(self.data_dir) as connection:
            if learner_id:  # lock the learner: two tabs starting at once queue here
                ensure_learner(connection, learner_id, now)
            left = self._wait_for(connection, learner_id, client)
            if left:
                raise CooldownActive(left)
            left = self._starts_left(connection, learner_id, client)
            if left:
                raise TooManyStarts(left)
            if learner_id:
                ordinal = connection.execute(
                    update(learners)
                    .where(learners.c.id == learner_id)
                    .values(attempts_started=learners.c.attempts_started + 1)
                    .returning(learners.c.attempts_started)
                ).scalar_one()
            attempt = Attempt(secrets.token_urlsafe(18), now, tuple(questions), ordinal=ordinal)
            connection.execute(insert(attempts).values(
                id=attempt.id, created_at=now, questions=payload, learner_id=learner_id,
                client=client, ordinal=ordinal))
            # Forget unfinished attempts and failed ones long past their time to live.
            connection.execute(
                delete(attempts).where(
                    attempts.c.created_at < now - 2 * self.ttl_seconds,
                    or_(attempts.c.passed.is_(None), attempts.c.passed.is_(False)),
                )
            )
        return attempt

    def answer(self, attempt_id: str, position: int, chosen: Iterable[int]) -> Feedback:
        """Lock an answer and return its feedback. A question answered before keeps its first
        answer: a changed answer is ignored and the locked feedback comes back."""
        with writing(self.data_dir) as connection:
            attempt = self._load(connection, attempt_id, lock=True)
            locked = attempt.feedback(position)
            if locked is not None:
                return locked
            if position != attempt.next_position:
                raise AnswerOutOfTurn(f"question {position + 1} is not the current one")
            wait = self._answer_wait(connection, attempt_id, attempt.created_at)
            if wait:
                raise CooldownActive(wait)
            picked = check_choice(attempt.questions[position], chosen)
            drawn = attempt.questions[position]
            now = self.clock()
            connection.execute(insert(answers).values(
                attempt_id=attempt_id, position=position, chosen=json.dumps(sorted(picked)),
                is_correct=picked == drawn.correct, answered_at=now))
            so_far = {**attempt.answers, position: picked}
            if len(so_far) == len(attempt.questions):
                score = Attempt(attempt.id, attempt.created_at, attempt.questions, so_far).score
                connection.execute(
                    update(attempts)
                    .where(attempts.c.id == attempt_id)
                    .values(finished_at=now, correct=score.correct, total=score.total,
                            passed=score.passed)
                )
            return feedback(drawn, picked)
