"""The home page's time for the quiz follows from the questions an attempt holds."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from quiz import config
from tests.helpers import ROOT
from ui.demo_runner import COLLECT_ENV


def test_an_attempts_minutes_follow_its_question_count() -> None:
    assert config.attempt_minutes() == config.attempt_minutes(config.QUESTIONS_PER_ATTEMPT)
    assert config.attempt_minutes(16) == 12  # 16 × 45 s
    assert config.attempt_minutes(1) == 1
    assert config.attempt_minutes(40) > config.attempt_minutes(16)


def _quiz_heading(monkeypatch: pytest.MonkeyPatch, questions: int) -> tuple[str, str]:
    monkeypatch.setattr(config, "QUESTIONS_PER_ATTEMPT", questions)
    monkeypatch.setenv(COLLECT_ENV, "1")  # the page's teaser lists its run, runs nothing
    at = AppTest.from_file(str(ROOT / "pages/home.py"), default_timeout=60).run()
    assert not at.exception
    heading = next(m.value for m in at.markdown if m.value.startswith("##### 3."))
    caption = next(c.value for c in at.caption if "questions" in c.value)
    return heading, caption


def test_the_home_page_announces_the_attempts_time(monkeypatch) -> None:
    heading, caption = _quiz_heading(monkeypatch, 16)
    assert heading == "##### 3. Quiz\n~12 min" and "16 questions" in caption
    heading, caption = _quiz_heading(monkeypatch, 40)
    assert heading == "##### 3. Quiz\n~30 min" and "40 questions" in caption
