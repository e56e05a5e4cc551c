"""Start the app: `python -m ui.server [streamlit options]` is `streamlit run app.py`
with the st.navigation router alone in charge.

Until st.navigation has run once in a server process, Streamlit treats a folder named
`pages/` beside the entry point as a legacy multipage app, so the very first visitor of a
freshly started server who opens a deep link (/compare?layers=16, /verify?id=...) gets a
"Page not found" dialog over the right page (streamlit#8860, #9992). Every page here is
registered through st.navigation, so the legacy discovery is switched off before the
server starts. The demo engine is warmed up in the background meanwhile (its first
checkpoint() imports torch._dynamo, 1.5-2 s), so the first learner does not wait for it.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

# Idle OpenMP threads sleep instead of spinning: on a shared CPU, spinning threads of one
# demo slow every other process (and the next demo) down several times. Set before torch
# is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from streamlit.runtime.pages_manager import PagesManager  # noqa: E402
from streamlit.web import cli  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"


def _warm_up_engine() -> None:
    from demos.measure import warm_up

    warm_up()


def main(argv: list[str]) -> None:
    from quiz.service import startup_check

    if status := startup_check():  # a lost signing key or database: refuse, and say why
        sys.exit(status)
    PagesManager.uses_pages_directory = False
    threading.Thread(target=_warm_up_engine, name="warm-up-engine", daemon=True).start()
    sys.argv = ["streamlit", "run", str(APP), *argv]
    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main(sys.argv[1:])
