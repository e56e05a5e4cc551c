"""Open Badges across app replicas on one PostgreSQL (started as in test_postgres.py): a
credential issued on one replica is the same on another and verifies with the status list
that other replica serves; a revocation made through the first shows in the list the
second publishes, to Digital Bazaar's verifier."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.quiz.open_badge_check import independent_verify, published_lists
from tests.quiz.test_postgres import ROOT, postgres_url, servers  # noqa: F401 (fixtures)

pytestmark = pytest.mark.heavy  # a PostgreSQL server and several processes: run first

# What each server's publisher thread does (ui.server: quiz.status_list.publish_forever),
# one round.
PUBLISH = ("import threading; from quiz.status_list import publish_forever; "
           "from storage.location import data_dir; stop = threading.Event(); stop.set(); "
           "publish_forever(data_dir, stop)")


def _run(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_credential_issued_on_one_replica_verifies_and_is_revoked_on_another(
    servers: list[dict[str, str]], tmp_path: Path,  # noqa: F811 (the fixture)
) -> None:
    first, second = (
        {**env, "APP_BASE_URL": "https://lab.example",
         "OPEN_BADGE_STATUS_DIR": str(tmp_path / f"static-{number}")}
        for number, env in enumerate(servers)
    )
    certificate_id = _run(first, "-m", "tests.quiz.pg_worker", "issue", "1").split()[0]
    credential = json.loads(_run(first, "-m", "quiz", "credential", certificate_id))
    assert json.loads(_run(second, "-m", "quiz", "credential", certificate_id)) == credential

    served = tmp_path / "static-1"  # what the second replica serves
    _run(second, "-c", PUBLISH)
    result, = independent_verify([credential], published_lists(served, [credential]))
    assert result["verified"] and result["revoked"] is False and result["schemaValid"]

    _run(first, "-m", "quiz", "revoke", certificate_id, "--reason", "issued by mistake")
    _run(second, "-c", PUBLISH)
    result, = independent_verify([credential], published_lists(served, [credential]))
    assert result["verified"] and result["statusChecked"] and result["revoked"] is True
    # Every replica serves the same signed bytes.
    assert ({p.name: p.read_bytes() for p in served.iterdir()}
            == {p.name: p.read_bytes() for p in (tmp_path / "static-0").iterdir()})
