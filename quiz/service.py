"""What the pages and the CLI call: the quiz and the certificates, wired to the configuration."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path

from i18n.languages import DEFAULT
from quiz import config
from quiz.attempts import Attempt, AttemptExpired, AttemptStore
from quiz.bank import BANK_PATH, Question, default_bank
from quiz.certificate_records import Certificate, Verification
from quiz.certificates import ISSUED_MARKER, CertificateStore, StorageCheck, StorageError
from quiz.config import verify_url
from quiz.draw import draw
from quiz.grading import Feedback
from quiz.layout import certificate_layout, certificate_title
from quiz.names import normalise_name
from quiz.signing import KEY_FILE, Signer, SigningKeyError, create_key_file, read_signer
from storage.database import StorageUnavailable, database_url, db_path, open_existing

LOG = logging.getLogger(__name__)


class NotEligible(RuntimeError):
    """A certificate was asked for an attempt that is not finished and passed."""


@dataclass
class QuizService:
    data_dir: Path
    attempts: AttemptStore
    signer: Signer | None  # None only for the read-only service (verify, list)
    bank_path: Path = BANK_PATH
    questions_per_attempt: int = config.QUESTIONS_PER_ATTEMPT
    warnings: tuple[str, ...] = field(default=())  # say them loudly (a damaged key file)

    def bank(self) -> tuple[Question, ...]:
        """The question bank, read again after an edit (BankError names a broken entry)."""
        return default_bank(self.bank_path)

    @property
    def certificates(self) -> CertificateStore:
        return CertificateStore(self.data_dir, self.signer)

    # The quiz ----------------------------------------------------------------------------
    def start_attempt(
        self,
        previous_id: str | None = None,
        learner_id: str | None = None,
        client: str | None = None,
    ) -> Attempt:
        """A fresh draw, without the previous attempt's questions where the bank has
        others; raises CooldownActive after a failed attempt of this learner or from this
        address."""
        avoid: frozenset[str] = frozenset()
        if previous_id:
            with contextlib.suppress(AttemptExpired):
                previous = self.attempts.get(previous_id)
                avoid = frozenset(drawn.question.id for drawn in previous.questions)
        return self.attempts.start(
            draw(self.bank(), self.questions_per_attempt, avoid=avoid), previous_id,
            learner_id, client
        )

    def wait_left(self, learner_id: str | None, client: str | None = None) -> int:
        """Seconds before this learner may start a new attempt."""
        return self.attempts.wait_left(learner_id, client)

    def attempt(self, attempt_id: str, lang: str = DEFAULT) -> Attempt:
        """The attempt with its questions worded in `lang` (grading is the same in every
        language). Raises AttemptExpired when the attempt is unknown or too old."""
        attempt = self.attempts.get(attempt_id)
        return attempt if lang == DEFAULT else attempt.in_language(lang)

    def answer(self, attempt_id: str, position: int, chosen: list[int]) -> Feedback:
        return self.attempts.answer(attempt_id, position, chosen)

    def cooldown_left(self, attempt: Attempt) -> int:
        return self.attempts.cooldown_left(attempt)

    # Certificates ------------------------------------------------------------------------
    def issue(self, attempt_id: str, raw_name: str, show_score: bool,
              lang: str = DEFAULT) -> Certificate:
        """The certificate of a passed attempt (the same one when asked again), its PDF in
        `lang`. Raises NameError_ for a name that cannot be printed, NotEligible before a
        pass."""
        existing = self.certificates.for_attempt(attempt_id)
        if existing is not None:
            return existing
        attempt = self.attempts.get(attempt_id)
        if not attempt.finished or not attempt.score.passed:
            raise NotEligible("only a passed attempt earns a certificate")
        return self.certificates.issue(
            attempt_id,
            normalise_name(raw_name),
            config.COURSE_NAME,
            config.COURSE_VERSION,
            attempt.score.percent,
            show_score,
            attempts=attempt.ordinal,
            lang=lang,
        )

    def certificate_for(self, attempt_id: str) -> Certificate | None:
        return self.certificates.for_attempt(attempt_id)

    def verify(self, text: str) -> Verification:
        return self.certificates.verify(text)

    def revoke(self, text: str, reason: str) -> Certificate:
        return self.certificates.revoke(text, reason)

    def all_certificates(self) -> list[Certificate]:
        return self.certificates.all()

    def check(self) -> StorageCheck:
        return self.certificates.check()

    def public_keys(self) -> dict[str, str]:
        """Every key that signed certificates here (key id -> public PEM), current first."""
        keys = self.certificates.public_keys()
        if self.signer is None:
            return keys
        return {self.signer.key_id: keys[self.signer.key_id], **keys}

    @property
    def public_key_pem(self) -> str:
        return self.certificates._signer().public_pem

    @property
    def key_id(self) -> str | None:
        return self.signer.key_id if self.signer else None


def certificate_pdf(certificate: Certificate, reached: str | None = None) -> bytes:
    """The certificate's PDF, in the language the learner took the quiz in; its verify link
    on APP_BASE_URL, else on `reached` (the address the app was reached by)."""
    from quiz.pdf import render_pdf  # fpdf and numpy: imported by what draws, not by every command

    layout = certificate_layout(certificate, verify_url(certificate.id, reached))
    return render_pdf(layout, title=certificate_title(certificate))


def certificate_png(certificate: Certificate, reached: str | None = None) -> bytes:
    from quiz.preview import render_png  # Pillow's drawing: imported by what draws

    return render_png(certificate_layout(certificate, verify_url(certificate.id, reached)))


def _open(create_key: bool, strict: bool, existing: bool = False) -> QuizService:
    """open_service without the logging (shared_service logs once per configuration).
    Where this data folder issued certificates (its marker), or with `existing`, the
    database must exist: it is never created again in their place."""
    data_dir = config.data_dir()
    if existing or (data_dir / ISSUED_MARKER).exists():
        open_existing(data_dir)
    key_warnings: tuple[str, ...] = ()
    try:
        signer = read_signer(data_dir, config.signing_key_env())
    except SigningKeyError as problem:
        if create_key or strict:  # issuing needs the key: refuse, never make another
            raise StorageError(str(problem)) from problem
        # Verifying needs only the public keys stored in the database.
        signer, key_warnings = None, (f"{problem} Verifying uses the stored public keys.",)
    store = CertificateStore(data_dir, signer)
    refusal = store.database_refusal() if existing else None
    if refusal is not None:
        raise refusal
    if signer is None and create_key:
        fresh = store.check().certificates == 0 and not (data_dir / ISSUED_MARKER).exists()
        if fresh:
            signer = create_key_file(data_dir)
            store = CertificateStore(data_dir, signer)
    if signer is not None and signer.key_id not in store.stored_key_ids():
        store.register_key()
    check = store.check()
    if strict and check.problems:
        raise StorageError(" ".join(check.problems))
    return QuizService(
        data_dir=data_dir,
        attempts=AttemptStore(data_dir, config.attempt_ttl_seconds(), config.cooldown_seconds(),
                              open_per_learner=config.open_attempts_per_learner(),
                              open_per_address=config.open_attempts_per_address()),
        signer=signer,
        bank_path=config.bank_path(),
        warnings=key_warnings,
    )


def _log_warnings(service: QuizService) -> None:
    for warning in service.warnings:
        LOG.warning(warning)


def open_service(create_key: bool = True, strict: bool = True) -> QuizService:
    """The service for the configured DATA_DIR, database, key and cooldown, opened afresh
    (the CLI; the pages call shared_service).

    A signing key is created only for a database without certificates and a data folder
    that never issued any (`create_key`); the CLI's read-only commands pass False. With
    `strict`, StorageError is raised when certificates exist whose key is missing or the
    database is empty where certificates were issued; where they were issued, a missing
    database is StorageUnavailable (it is not created again)."""
    service = _open(create_key, strict)
    _log_warnings(service)
    return service


def open_existing_service() -> QuizService:
    """The service for the instructor's commands: the configured database must exist and,
    where this data folder issued certificates, be the one that holds them (else
    StorageUnavailable, one line naming the path and what to restore). Nothing is created;
    the signing key is not needed (verifying uses the stored public keys)."""
    service = _open(create_key=False, strict=False, existing=True)
    _log_warnings(service)
    return service


def _file_state(path: Path, content: bool = True) -> tuple[int, ...] | None:
    """Which file is at `path` (None: none), and with `content` its size and mtime."""
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    identity = (found.st_dev, found.st_ino)
    return (*identity, found.st_size, found.st_mtime_ns) if content else identity


def _configuration(create_key: bool, strict: bool) -> tuple[Hashable, ...]:
    """Everything _open reads that can change while the server runs: the environment, the
    key file (a rotated key is a new file), and which database file and issued-marker it
    finds (a deleted database is reported again). Not the database file's size or mtime:
    every write changes those."""
    data_dir = config.data_dir()
    env_key = config.signing_key_env()
    return (
        create_key,
        strict,
        str(data_dir),
        database_url(data_dir),
        _file_state(db_path(data_dir), content=False),  # the SQLite file, if any
        hashlib.sha256(env_key.encode()).hexdigest() if env_key else None,  # not the secret
        _file_state(data_dir / KEY_FILE),
        (data_dir / ISSUED_MARKER).exists(),
        config.attempt_ttl_seconds(),
        config.cooldown_seconds(),
        config.open_attempts_per_learner(),
        config.open_attempts_per_address(),
        str(config.bank_path()),
    )


# configuration -> (when it was opened, on time.monotonic, the service)
_SHARED: OrderedDict[tuple[Hashable, ...], tuple[float, QuizService]] = OrderedDict()
_SHARED_LOCK = threading.Lock()
_SHARED_MAX = 8  # configurations kept (the quiz's and the verify page's, and a few more)
_OPEN_TRIES = 3
# A kept service is opened (checked) again after this long: what no file shows (a
# PostgreSQL database emptied, a signing key row removed by hand) is found within a minute,
# not at the next restart, while a class clicking through the quiz opens it once a minute.
RECHECK_SECONDS = 60.0


def shared_service(create_key: bool = True, strict: bool = True) -> QuizService:
    """open_service's service, opened once per configuration in this process and shared by
    every session (a QuizService holds no learner's state; don't change its fields). It is
    opened again when the configuration changes (_configuration) and after RECHECK_SECONDS;
    its warnings are logged when they are new. A StorageError is raised again on every call
    while the problem lasts: only a service that opened is kept."""
    with _SHARED_LOCK:  # one opening at a time: sessions arriving together open it once
        configuration = _configuration(create_key, strict)
        kept = _SHARED.get(configuration)
        if kept is not None and time.monotonic() - kept[0] < RECHECK_SECONDS:
            _SHARED.move_to_end(configuration)
            return kept[1]
        _SHARED.pop(configuration, None)  # a StorageError below leaves nothing kept
        for _ in range(_OPEN_TRIES):
            service = _open(create_key, strict)
            opened, configuration = configuration, _configuration(create_key, strict)
            if configuration == opened:  # e.g. its first opening created the key file
                _SHARED[configuration] = (time.monotonic(), service)
                while len(_SHARED) > _SHARED_MAX:
                    _SHARED.popitem(last=False)
                break
        # After _OPEN_TRIES changes in a row: serve this one without keeping it.
        if kept is None or service.warnings != kept[1].warnings:  # a recheck: new ones only
            _log_warnings(service)
        return service


def startup_check() -> int:
    """Before the server starts: 0 when the certificates can be issued and verified;
    else print why to stderr and return 2 (the server then refuses to start)."""
    try:
        service = open_service()
    except (StorageError, StorageUnavailable) as problem:
        print(f"REFUSING TO START: {problem}", file=sys.stderr)
        return 2
    for warning in service.warnings:
        print(f"WARNING: {warning}", file=sys.stderr)
    try:
        config.public_base_url()
    except config.NoPublicAddress as problem:  # the course runs; its badges wait for it
        print(f"WARNING: {problem}. Until it is set, no Open Badge is offered (certificates, "
              "their PDF and the verify page work as before, with links on the address "
              "each learner's browser used).", file=sys.stderr)
    return 0
