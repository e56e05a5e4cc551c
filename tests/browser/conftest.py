"""The browser tests' second app server: started (niced) with the first browser test, on
the session server's data, as replicas share one database. While the other browser tests
run it measures the defaults of the home page and of the pages the first-move test opens,
and the slider steps next to them; that test, which runs last, then opens it warm."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.test_demo_waits_browser import FIRST_MOVES
from tests.helpers import ARTIFACTS, background_app

# The sliders whose steps next to the defaults it measures (DEMO_WARM_NEIGHBOURS): those
# the first-move test moves, on their pages only.
WARM_KEYS = ",".join(f"{page}:{label.lower()}" for page, label in FIRST_MOVES.items())


@pytest.fixture(scope="session", autouse=True)
def second_server(app_url: str, app_data_dir: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(its URL, its warm-up status file)."""
    status = tmp_path_factory.mktemp("second-server") / "warm-up.json"
    # It listens at once (DEMO_WARM_BEFORE_LISTEN 0): the first browser test waits for it.
    # It warms the pages the first-move test opens, and the home page most tests pass.
    env = {"DATA_DIR": str(app_data_dir), "DEMO_WARM_NEIGHBOURS": WARM_KEYS,
           "DEMO_WARM_PAGES": ",".join(["home", *FIRST_MOVES]),
           "DEMO_ASK_SECONDS": "300",
           "DEMO_WARM_STATUS": str(status), "DEMO_WARM_BEFORE_LISTEN": "0"}
    # Niced as a process only: its session keeps an equal share of the CPU (autogroup),
    # since the first server's pages wait for a run this one has claimed (the teaser of
    # home, a page's defaults); with its session niced too, they waited past 180 s.
    command = ["nice", "-n", "10", sys.executable, "-m", "ui.server", "--server.port",
               "{port}", "--server.address", "127.0.0.1", "--server.headless", "true"]
    # its log beside the screenshots: a warm-up run that failed says why there
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with (ARTIFACTS / "second-server.log").open("w") as log, \
            background_app(env, command=command, log=log) as url:
        yield url, status
