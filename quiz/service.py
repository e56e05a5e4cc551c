"""What the pages and the CLI call: the quiz and the certificates, wired to the configuration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quiz import config
from quiz.attempts import Attempt, AttemptStore
from quiz.bank import BANK_PATH, Question, default_bank
from quiz.certificates import Certificate, CertificateStore, Verification
from quiz.draw import draw
from quiz.grading import Feedback
from quiz.layout import certificate_layout
from quiz.names import normalise_name
from quiz.pdf import render_pdf
from quiz.preview import render_png
from quiz.signing import Signer, load_signer


class NotEligible(RuntimeError):
    """A certificate was asked for an attempt that is not finished and passed."""


@dataclass
class QuizService:
    data_dir: Path
    attempts: AttemptStore
    signer: Signer
    bank_path: Path = BANK_PATH
    questions_per_attempt: int = config.QUESTIONS_PER_ATTEMPT

    def bank(self) -> tuple[Question, ...]:
        """The question bank, read again after an edit (BankError names a broken entry)."""
        return default_bank(self.bank_path)

    @property
    def certificates(self) -> CertificateStore:
        return CertificateStore(self.data_dir, self.signer)

    # The quiz ----------------------------------------------------------------------------
    def start_attempt(self, previous_id: str | None = None) -> Attempt:
        """A fresh draw; raises CooldownActive right after a failed `previous_id`."""
        return self.attempts.start(draw(self.bank(), self.questions_per_attempt), previous_id)

    def attempt(self, attempt_id: str) -> Attempt:
        """Raises AttemptExpired when the attempt is unknown or too old."""
        return self.attempts.get(attempt_id)

    def answer(self, attempt_id: str, position: int, chosen: list[int]) -> Feedback:
        return self.attempts.answer(attempt_id, position, chosen)

    def cooldown_left(self, attempt: Attempt) -> int:
        return self.attempts.cooldown_left(attempt)

    # Certificates ------------------------------------------------------------------------
    def issue(self, attempt_id: str, raw_name: str, show_score: bool) -> Certificate:
        """The certificate of a passed attempt (the same one when asked again). Raises
        NameError_ for a name that cannot be printed, NotEligible before a pass."""
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
        )

    def certificate_for(self, attempt_id: str) -> Certificate | None:
        return self.certificates.for_attempt(attempt_id)

    def verify(self, text: str) -> Verification:
        return self.certificates.verify(text)

    def revoke(self, text: str, reason: str) -> Certificate:
        return self.certificates.revoke(text, reason)

    def all_certificates(self) -> list[Certificate]:
        return self.certificates.all()

    @property
    def public_key_pem(self) -> str:
        return self.signer.public_pem

    @property
    def key_id(self) -> str:
        return self.signer.key_id


def certificate_pdf(certificate: Certificate) -> bytes:
    return render_pdf(
        certificate_layout(certificate),
        title=f"{certificate.course}: certificate {certificate.id}",
    )


def certificate_png(certificate: Certificate) -> bytes:
    return render_png(certificate_layout(certificate))


def open_service() -> QuizService:
    """The service for the configured DATA_DIR, key and cooldown."""
    data_dir = config.data_dir()
    return QuizService(
        data_dir=data_dir,
        attempts=AttemptStore(data_dir, config.attempt_ttl_seconds(), config.cooldown_seconds()),
        signer=load_signer(data_dir, config.signing_key_env()),
        bank_path=config.bank_path(),
    )
