"""`make run` serves the app: the health check answers 200, the very first visitor of the
fresh server can open a deep link without a "Page not found" dialog, and the terminal shows
what a person needs (the address) without Streamlit's bare-mode warnings from the pages the
server draws before it listens."""

from __future__ import annotations

import urllib.request

from tests.helpers import background_app, goto


def test_make_run_serves_the_app_and_a_first_deep_link(tmp_path, browser) -> None:
    make_run = ["make", "run", "PORT={port}", "ADDRESS=127.0.0.1"]
    # A page drawn before it listens (the warm-up's listing: the warnings this test reads
    # come from there), without waiting for its numbers. One page, whose run is a fraction
    # of a second: the warm-up of every view and every slider's neighbours would measure
    # in its own session for as long as the test runs, beside the other tests.
    env = {"DATA_DIR": str(tmp_path), "DEMO_WARM_BEFORE_LISTEN": "0",
           "DEMO_WARM_PAGES": "mistakes", "DEMO_WARM_NEIGHBOURS": "0"}
    terminal = tmp_path / "terminal.log"
    with terminal.open("w") as log, background_app(env, command=make_run, log=log) as url:
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.status == 200
            assert b"<html" in response.read().lower()
        # The first session of this server process opens a lesson in pages/lessons/.
        context = browser.new_context()
        page = context.new_page()
        goto(page, url, "how-many")
        assert page.get_by_role("dialog").filter(has_text="Page not found").count() == 0
        assert page.get_by_role("heading", name="Where to put checkpoints").first.is_visible()
        context.close()
    shown = terminal.read_text()
    assert "URL: http://127.0.0.1:" in shown
    assert "ScriptRunContext" not in shown and "No runtime found" not in shown, shown
    assert "please restart streamlit" not in shown, shown


LOCKED_APT = """#!/bin/sh
echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)" >&2
exit 100
"""


def _fake_bin(folder, name: str, text: str) -> None:
    path = folder / name
    path.write_text(text)
    path.chmod(0o755)


def test_make_run_starts_the_app_when_the_font_install_finds_apt_locked(tmp_path) -> None:
    """Installing the optional CJK font as root while another package manager holds the
    dpkg lock warns and carries on: the server command still runs."""
    import os
    import subprocess

    from tests.helpers import ROOT

    fake = tmp_path / "bin"
    fake.mkdir()
    _fake_bin(fake, "apt-get", LOCKED_APT)
    _fake_bin(fake, "id", "#!/bin/sh\necho 0\n")  # as root: the install is tried
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    started = tmp_path / "started"
    _fake_bin(venv / "bin", "python", f"#!/bin/sh\necho \"$@\" > {started}\n")
    (venv / ".runtime-installed").touch()  # newer than requirements.txt: nothing to install
    done = subprocess.run(
        ["make", "run", f"VENV={venv}", "MO_FILES=", "APT_LOCK_TIMEOUT=0",
         f"CJK_FONT={tmp_path / 'no-such-font.ttc'}", "PORT=8612"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    assert "Warning: the optional CJK font" in done.stderr
    assert started.read_text().split()[:2] == ["-m", "ui.server"]
    assert "8612" in started.read_text()
