"""Several app servers on one PostgreSQL: a real server is started here, in a
temporary folder, from Debian's `postgresql` package (`make test` installs it when missing).
Two service processes issue certificates at once, each verifies the other's, and one is
killed with SIGKILL in the middle of issuing without loss or corruption."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

pytestmark = pytest.mark.heavy  # its tests take seconds each: run first

ROOT = Path(__file__).resolve().parents[2]


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    bin_dir = _pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (Debian: apt-get install postgresql; "
                    "`make test` installs it when it can)")
    # Not under pytest's temporary root: that is private to root, and the server may run as
    # another user.
    folder = Path(tempfile.mkdtemp(prefix="quiz-postgres-"))
    data = folder / "data"
    as_user: list[str] = []
    if os.getuid() == 0:  # initdb refuses root: run the server as the package's user
        user = "postgres" if shutil.which("runuser") else None
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            user = None
        if user is None:
            pytest.skip("running as root without a 'postgres' user to run PostgreSQL as")
        shutil.chown(folder, user)
        os.chmod(folder, 0o700)
        as_user = ["runuser", "-u", user, "--"]
    port = _free_port()
    subprocess.run([*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                    "--auth=trust", "-E", "UTF8", "--no-sync"], check=True,
                   capture_output=True, timeout=120)
    subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-w", "-l",
                    str(folder / "log"), "-o",
                    f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off",
                    "start"], check=True, capture_output=True, timeout=120)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                        "stop"], capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def servers(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, str]]:
    """The environments of two app servers: one database, one key (from the environment),
    separate data folders (as on separate machines)."""
    key = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
        serialization.NoEncryption()).hex()
    return [
        {**os.environ, "DATABASE_URL": postgres_url, "CERT_SIGNING_KEY": key,
         "DATA_DIR": str(tmp_path_factory.mktemp(f"server-{number}")),
         "QUIZ_COOLDOWN_SECONDS": "0", "PYTHONPATH": str(ROOT)}
        for number in (1, 2)
    ]


def _worker(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.quiz.pg_worker", *args], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _verify_on(env: dict[str, str], ids: list[str]) -> dict[str, str]:
    process = _worker(env, "verify", *ids)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return dict(line.split(" ", 1) for line in out.splitlines())


def test_two_servers_issue_at_once_and_verify_each_other(
    servers: list[dict[str, str]],
) -> None:
    workers = [_worker(env, "issue", "12") for env in servers]
    issued: list[list[str]] = []
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
        issued.append(out.split())
    first, second = issued
    assert len(first) == len(second) == 12
    assert len(set(first) | set(second)) == 24  # unique across servers
    assert set(_verify_on(servers[1], first).values()) == {"VALID"}
    assert set(_verify_on(servers[0], second).values()) == {"VALID"}


def test_a_server_killed_while_issuing_loses_nothing(servers: list[dict[str, str]]) -> None:
    from sqlalchemy import create_engine, text

    victim = _worker(servers[0], "issue", "500")
    survivor = _worker(servers[1], "issue", "10")
    printed: list[str] = []
    assert victim.stdout is not None
    deadline = time.monotonic() + 240
    while len(printed) < 6 and time.monotonic() < deadline:
        line = victim.stdout.readline()
        if not line:
            break
        printed.append(line.strip())
    assert len(printed) == 6, victim.stderr.read() if victim.stderr else ""
    victim.send_signal(signal.SIGKILL)  # in the middle of its next issue
    victim.wait(timeout=30)
    out, err = survivor.communicate(timeout=300)
    assert survivor.returncode == 0, err
    # Every certificate the killed server handed out is there and intact, as is every row.
    engine = create_engine(servers[0]["DATABASE_URL"])
    with engine.connect() as connection:
        stored = list(connection.execute(text("SELECT id FROM certificates")).scalars())
        orphans = connection.execute(text(
            "SELECT count(*) FROM certificates c LEFT JOIN attempts a ON a.id = c.attempt_id "
            "WHERE a.passed IS NOT TRUE")).scalar_one()
    engine.dispose()
    assert set(printed) <= set(stored) and set(out.split()) <= set(stored)
    assert orphans == 0
    assert set(_verify_on(servers[1], stored).values()) == {"VALID"}
    # The database takes new work after the kill (no lock left behind).
    after = _worker(servers[0], "issue", "2")
    out, err = after.communicate(timeout=300)
    assert after.returncode == 0 and len(out.split()) == 2, err


def _fresh_database(postgres_url: str, name: str) -> str:
    """A new, empty database on the test server; its URL."""
    from sqlalchemy import create_engine, text

    engine = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return postgres_url.rsplit("/", 1)[0] + f"/{name}"


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "quiz", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_export_then_import_into_fresh_databases_keeps_every_status(
    servers: list[dict[str, str]], postgres_url: str, tmp_path: Path
) -> None:
    """PostgreSQL -> export -> a fresh PostgreSQL and a fresh SQLite database: every
    certificate verifies there, the revoked one stays revoked; the export alone, with the
    public key, checks a certificate offline."""
    source = {**servers[0], "DATABASE_URL": _fresh_database(postgres_url, "export_source"),
              "DATA_DIR": str(tmp_path / "source")}
    issuing = _worker(source, "issue", "3")
    out, err = issuing.communicate(timeout=300)
    assert issuing.returncode == 0, err
    ids = out.split()
    assert _cli(source, "revoke", ids[0], "--reason", "a test").returncode == 0
    backup = tmp_path / "backup.jsonl"
    assert _cli(source, "export", str(backup)).returncode == 0
    public = tmp_path / "public.pem"
    public.write_text(_cli(source, "public-key").stdout)
    targets = [
        {**source, "DATABASE_URL": _fresh_database(postgres_url, "restored"),
         "DATA_DIR": str(tmp_path / "restored-pg")},
        {**source, "DATA_DIR": str(tmp_path / "restored-sqlite")},
    ]
    targets[1].pop("DATABASE_URL")
    for target in targets:
        Path(target["DATA_DIR"]).mkdir()  # a restore makes a database, never a data folder
        restored = _cli(target, "import", str(backup), "--public-key", str(public))
        assert restored.returncode == 0, restored.stderr
        assert _verify_on(target, ids) == {ids[0]: "REVOKED", ids[1]: "VALID", ids[2]: "VALID"}
        again = _cli(target, "import", str(backup))
        assert again.returncode == 1 and "not empty" in again.stderr
    offline = {key: value for key, value in source.items() if key not in
               ("DATABASE_URL", "CERT_SIGNING_KEY")}
    offline["DATA_DIR"] = str(tmp_path / "nothing-here")
    checked = _cli(offline, "check-export", str(backup), "--public-key", str(public),
                   "--id", ids[1])
    assert checked.returncode == 0 and checked.stdout.startswith("VALID"), checked.stderr
    assert not (tmp_path / "nothing-here").exists()


def test_a_postgres_database_emptied_under_the_service_stops_issuing_until_restored(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy import create_engine, text

    from quiz.service import open_service, shared_service
    from storage.database import StorageUnavailable, dispose_all
    from tests.quiz.test_faults import pass_and_issue

    url = _fresh_database(postgres_url, "emptied")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("QUIZ_COOLDOWN_SECONDS", "0")
    monkeypatch.delenv("CERT_SIGNING_KEY", raising=False)
    service = open_service()
    shown = [pass_and_issue(service)]
    backup = tmp_path / "backup.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    assert _cli(env, "export", str(backup)).returncode == 0
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:  # a database wiped by hand while the app runs
        connection.execute(text("DROP SCHEMA public CASCADE"))
        connection.execute(text("CREATE SCHEMA public"))
    engine.dispose()
    with pytest.raises(StorageUnavailable):
        pass_and_issue(service)
    restored = _cli(env, "import", str(backup))
    assert restored.returncode == 0, restored.stderr
    shown.append(pass_and_issue(shared_service()))
    dispose_all()
    result = _cli(env, "verify", *(certificate.id for certificate in shown))
    assert result.returncode == 0 and result.stdout.count("VALID") == 2, result.stderr


@pytest.mark.timeout(300)  # without lock timeouts the first step never returns
def test_a_table_locked_by_hand_is_busy_within_15_s_on_the_page_and_in_the_cli(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`LOCK TABLE certificates IN ACCESS EXCLUSIVE MODE` held by an operator's session:
    issuing, the verify page and `python -m quiz verify` each say "try again in a moment"
    within 15 s (they waited 75 s and more, before), and all carry on once it is released."""
    from sqlalchemy import create_engine, text
    from streamlit.testing.v1 import AppTest

    from quiz.service import open_service, shared_service
    from storage.database import StorageBusy, dispose_all
    from tests.quiz.test_faults import pass_and_issue

    url = _fresh_database(postgres_url, "locked")
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("QUIZ_COOLDOWN_SECONDS", "0")
    monkeypatch.delenv("CERT_SIGNING_KEY", raising=False)
    service = open_service()
    shown = [pass_and_issue(service)]
    attempt = service.start_attempt(learner_id="waiting-behind-the-lock")
    for position, drawn in enumerate(attempt.questions):
        service.answer(attempt.id, position, sorted(drawn.correct))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def verify_page() -> AppTest:
        page = AppTest.from_file(str(ROOT / "pages/verify.py"), default_timeout=60)
        page.query_params["id"] = shown[0].id
        return page.run()

    # What the page and the command take with the table free: the 15 s are the database's
    # wait on top. The command's start (imports) took 22 s of the 15 at load 8-10 on two
    # cores; the page's first run in a process imports its modules, a server's did before.
    started = time.monotonic()
    assert _cli(env, "verify", shown[0].id).returncode == 0
    cli_free_s = time.monotonic() - started
    assert not any("try again" in w.value for w in verify_page().warning)
    started = time.monotonic()
    verify_page()
    page_free_s = time.monotonic() - started
    holder = create_engine(url).connect()
    holder.execute(text("LOCK TABLE certificates IN ACCESS EXCLUSIVE MODE"))
    try:
        started = time.monotonic()
        with pytest.raises(StorageBusy, match="try again in a moment"):
            service.issue(attempt.id, "Grace Hopper", True)
        assert time.monotonic() - started < 15
        dispose_all()  # the page, as a server that restarted meanwhile
        started = time.monotonic()
        page = verify_page()
        assert time.monotonic() - started - page_free_s < 15
        assert any("try again in a moment" in w.value for w in page.warning)
        assert not any("NOT FOUND" in w.value for w in page.warning)
        started = time.monotonic()
        result = _cli(env, "verify", shown[0].id)
        assert time.monotonic() - started - cli_free_s < 15, cli_free_s
        assert result.returncode == 2 and "try again in a moment" in result.stderr
        assert "Traceback" not in result.stderr
    finally:
        holder.rollback()
        holder.close()
    shown.append(service.issue(attempt.id, "Grace Hopper", True))  # the same attempt
    assert shared_service(create_key=False, strict=False).verify(shown[1].id).valid
    dispose_all()
    result = _cli(env, "verify", *(certificate.id for certificate in shown))
    assert result.returncode == 0 and result.stdout.count("VALID") == 2, result.stderr
