"""Settings read from the environment at call time (so tests can change them); the data
folder (`data_dir`) is the storage layer's."""

from __future__ import annotations

import math
import os
from pathlib import Path
from urllib.parse import quote

from lessons.catalog import LESSON_PATHS
from storage.location import REPO_ROOT as REPO_ROOT  # re-exported: the quiz's settings
from storage.location import data_dir as data_dir

COURSE_NAME = "Gradient Checkpointing Lab"
COURSE_VERSION = "1.0"
PASS_MARK = 0.8
# Every lesson is asked about this many times in each attempt (quiz.draw's turns), so an
# attempt holds this many questions per lesson of the outline: 16 for eight lessons.
QUESTIONS_PER_LESSON = 2
QUESTIONS_PER_ATTEMPT = QUESTIONS_PER_LESSON * len(LESSON_PATHS)
# A question's time: the bank's questions hold 128 words on average (prompt, options and
# the explanations shown after answering; 69-247), about 40 s at 200 words a minute, and
# the choice itself: 45 s, an estimate the home page's figure follows from.
SECONDS_PER_QUESTION = 45
DEFAULT_COOLDOWN_SECONDS = 60
DEFAULT_ATTEMPT_TTL_SECONDS = 6 * 3600
DEFAULT_BASE_URL = "http://localhost:8501"


def attempt_minutes(questions: int | None = None) -> int:
    """Minutes an attempt of `questions` (default: QUESTIONS_PER_ATTEMPT) takes, rounded
    up: what the home page announces."""
    count = QUESTIONS_PER_ATTEMPT if questions is None else questions
    return max(1, math.ceil(count * SECONDS_PER_QUESTION / 60))


def bank_path() -> Path:
    """The question bank file (`QUIZ_BANK_PATH`, default quiz/questions.yaml)."""
    return Path(os.environ.get("QUIZ_BANK_PATH") or Path(__file__).with_name("questions.yaml"))


def base_url(reached: str | None = None) -> str:
    """Where the app is served, for verify links: `APP_BASE_URL` when set, else `reached`
    (the address the learner reached the app by, with its port), else localhost:8501."""
    return (os.environ.get("APP_BASE_URL") or reached or DEFAULT_BASE_URL).rstrip("/")


def base_url_configured() -> bool:
    """Whether the public address is set (`APP_BASE_URL`), not taken from a learner's
    browser."""
    return bool(os.environ.get("APP_BASE_URL"))


def _seconds(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(float(raw))
    except ValueError as error:
        raise ValueError(f"{name} must be a number of seconds, not {raw!r}") from error
    return max(0, value)


def cooldown_seconds() -> int:
    """Wait after a failed attempt before a new draw (`QUIZ_COOLDOWN_SECONDS`)."""
    return _seconds("QUIZ_COOLDOWN_SECONDS", DEFAULT_COOLDOWN_SECONDS)


def attempt_ttl_seconds() -> int:
    """How long an attempt stays open on the server (`QUIZ_ATTEMPT_TTL_SECONDS`)."""
    return _seconds("QUIZ_ATTEMPT_TTL_SECONDS", DEFAULT_ATTEMPT_TTL_SECONDS)


def open_attempts_per_learner() -> int:
    """Unfinished attempts a learner may hold at once (`QUIZ_OPEN_ATTEMPTS_PER_LEARNER`)."""
    return max(1, _seconds("QUIZ_OPEN_ATTEMPTS_PER_LEARNER", 3))


def open_attempts_per_address() -> int:
    """Unfinished attempts started from one address within an hour
    (`QUIZ_OPEN_ATTEMPTS_PER_ADDRESS`; a class behind one address shares it)."""
    return max(1, _seconds("QUIZ_OPEN_ATTEMPTS_PER_ADDRESS", 100))


def signing_key_env() -> str | None:
    """A signing key given in the environment (`CERT_SIGNING_KEY`), if any."""
    return os.environ.get("CERT_SIGNING_KEY") or None


def verify_url(certificate_id: str, reached: str | None = None) -> str:
    """The public link that checks a certificate; `reached`: see base_url. The check
    symbols `*`, `$` and `~` are legal in a query and stay as printed on the certificate
    (a reader typing the link saw "%2A"); `=`, the query's own separator, is
    percent-encoded."""
    return f"{base_url(reached)}/verify?id={quote(certificate_id, safe='-*$')}"
