"""Fixtures for the quiz package: a private DATA_DIR, a service on it, a finished attempt."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from quiz.attempts import Attempt
from quiz.service import QuizService, open_service


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "data"
    monkeypatch.setenv("DATA_DIR", str(folder))
    monkeypatch.setenv("QUIZ_COOLDOWN_SECONDS", "0")
    monkeypatch.setenv("APP_BASE_URL", "https://lab.example")
    monkeypatch.delenv("CERT_SIGNING_KEY", raising=False)
    return folder


@pytest.fixture
def service(data_dir: Path) -> QuizService:
    return open_service()


def answer_all(service: QuizService, attempt: Attempt, right: int) -> Attempt:
    """Answer every question: the first `right` correctly, the rest wrongly."""
    for position, drawn in enumerate(attempt.questions):
        if position < right:
            chosen = sorted(drawn.correct)
        else:
            chosen = [next(i for i in range(len(drawn.order)) if i not in drawn.correct)]
        service.answer(attempt.id, position, chosen)
    return service.attempt(attempt.id)


@pytest.fixture
def passed_attempt(service: QuizService) -> Attempt:
    attempt = service.start_attempt()
    return answer_all(service, attempt, right=len(attempt.questions))


@pytest.fixture
def finish() -> Callable[[QuizService, Attempt, int], Attempt]:
    return answer_all
