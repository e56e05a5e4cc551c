"""The tests' own data folder (tests/conftest.py): no test touches the checkout's data/."""

from __future__ import annotations

import os

from storage.location import REPO_ROOT, data_dir


def test_tests_keep_out_of_the_checkouts_data_folder() -> None:
    assert data_dir().resolve() != (REPO_ROOT / "data").resolve()
    assert "DATABASE_URL" not in os.environ
