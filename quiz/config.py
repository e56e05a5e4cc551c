"""Settings read from the environment at call time (so tests can change them); the data
folder (`data_dir`) is the storage layer's."""

from __future__ import annotations

import math
import os
from pathlib import Path
from urllib.parse import quote, urlsplit

from lessons.catalog import LESSON_PATHS
from storage.location import REPO_ROOT as REPO_ROOT  # re-exported: the quiz's settings
from storage.location import data_dir as data_dir

COURSE_NAME = "Gradient Checkpointing Lab"
COURSE_VERSION = "1.0"
PASS_MARK = 0.8
# Every lesson is asked about this many times in each attempt (quiz.draw's turns), so an
# attempt holds this many questions per lesson of the outline: 20 for ten lessons.
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
    """Where the app is served, for the verify links printed on a certificate (not signed):
    `APP_BASE_URL` when set, else `reached` (the address the learner reached the app by,
    with its port), else localhost:8501. Never for what is signed: see public_base_url."""
    return (os.environ.get("APP_BASE_URL") or reached or DEFAULT_BASE_URL).rstrip("/")


class NoPublicAddress(ValueError):
    """No public address is configured (or the one given is not an http(s) address), so
    nothing that names the app's address may be signed. The message is one line."""


def checked_base_url(text: str, source: str = "APP_BASE_URL") -> str:
    """`text` as a public address (scheme and host, an optional path, no trailing slash);
    NoPublicAddress when it is not an http(s) address with a host."""
    value = text.strip().rstrip("/")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query \
            or parts.fragment:
        raise NoPublicAddress(f"{source} must be the app's public http(s) address, such "
                              f"as https://lab.example.org, not {text!r}")
    return value


def public_base_url(given: str | None = None) -> str:
    """The app's public address that signed credentials carry (their `id`, the issuer's
    `url`, the status list's address): `given` (a command's --base-url) or APP_BASE_URL,
    set by the operator. Never an address a browser reported: a learner could name a host
    of their own. NoPublicAddress when neither is set."""
    if given:
        return checked_base_url(given, "--base-url")
    configured = os.environ.get("APP_BASE_URL", "")
    if not configured.strip():
        raise NoPublicAddress(
            "APP_BASE_URL is not set: Open Badges are signed only with the app's public "
            "address, which the operator sets (APP_BASE_URL=https://your.host, or "
            "--base-url on the command line)")
    return checked_base_url(configured)


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
