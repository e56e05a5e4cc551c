"""One app server's quiz service in its own process, for the PostgreSQL test:
`python -m tests.quiz.pg_worker issue N` passes N attempts and prints each certificate ID as
soon as it is issued; `python -m tests.quiz.pg_worker verify ID...` prints each ID's status.
It reads DATABASE_URL, DATA_DIR and CERT_SIGNING_KEY like the app does."""

from __future__ import annotations

import sys

from quiz.service import open_service


def issue(count: int) -> None:
    service = open_service()
    for number in range(count):
        attempt = service.start_attempt(learner_id=f"pg-worker-learner-{number:06d}")
        for position, drawn in enumerate(attempt.questions):
            service.answer(attempt.id, position, sorted(drawn.correct))
        certificate = service.issue(attempt.id, f"Learner {number} Müller-Lüdenscheid", True)
        print(certificate.id, flush=True)


def verify(ids: list[str]) -> None:
    service = open_service(create_key=False)
    for certificate_id in ids:
        print(certificate_id, service.verify(certificate_id).status.value, flush=True)


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    issue(int(rest[0])) if command == "issue" else verify(rest)
