"""Where the app keeps its data: `DATA_DIR` (default data/ in the repository), read at call
time so tests and CLI runs can point it elsewhere."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """The folder that holds the database and the signing key (`DATA_DIR`, default data/)."""
    return Path(os.environ.get("DATA_DIR") or REPO_ROOT / "data")
