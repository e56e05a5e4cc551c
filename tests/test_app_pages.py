"""AppTest: the router opens every registered page without an exception."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from lessons.catalog import LESSONS
from ui.navigation import PAGES, ROOT


def test_every_page_is_declared_once_with_the_fixed_url_paths() -> None:
    paths = [spec.url_path for spec in PAGES]
    assert len(paths) == len(set(paths))
    assert paths == [
        "",
        *(item.path for item in LESSONS),
        "compare", "timeline", "curves", "what-fits", "same-result", "mistakes",
        "compiler-budget", "placement", "real-model", "pictures", "plan", "quiz", "verify",
    ]


def test_every_declared_page_exists() -> None:
    missing = [spec.file for spec in PAGES if not (ROOT / spec.file).exists()]
    assert missing == []


def _router(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AppTest:
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    # Small demo settings keep the engine's work short; pages without sliders ignore them.
    # (/pictures: its smallest model and image)
    for key, value in {"layers": "2", "hidden": "64", "heads": "2", "seq": "32",
                       "batch": "2", "vocab": "256", "family": "sd3", "size": "64"}.items():
        at.query_params[key] = value
    return at.run()


def test_router_opens_home_with_the_shared_sidebar(monkeypatch, tmp_path) -> None:
    at = _router(monkeypatch, tmp_path)
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Gradient Checkpointing Lab"
    sidebar_text = " ".join(block.value for block in at.sidebar.markdown)
    assert "Demos run on" in sidebar_text
    assert "CPU (no GPU found)" in sidebar_text or "GPU" in sidebar_text
    assert f"Lessons visited: 0 / {len(LESSONS)}" in sidebar_text


@pytest.mark.heavy  # each demo page measures at its defaults
@pytest.mark.parametrize(
    "spec", [spec for spec in PAGES if spec.url_path], ids=lambda spec: spec.url_path
)
def test_page_renders_after_the_router(spec, monkeypatch, tmp_path) -> None:
    at = _router(monkeypatch, tmp_path)
    at.switch_page(spec.file).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title or at.header or at.subheader, f"{spec.file} drew no heading"
