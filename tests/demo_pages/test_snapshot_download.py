"""AppTest: the Compare and Timeline pages offer this run as torch's memory snapshot, in
every language; the bytes the button serves are a pickle that torch's own
`torch.cuda._memory_viz` reads and plots (no GPU needed)."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable

import pytest
from streamlit.runtime import memory_media_file_storage as storage
from torch.cuda import _memory_viz

from i18n import gettext
from tests.demo_pages.test_pages import TINY, no_errors, texts
from ui import demo_runner

LABEL = "Download the memory snapshot (PyTorch's format)"


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """The bytes of every file a page hands to Streamlit, by the id its button links."""
    files: dict[str, bytes] = {}
    original = storage.MemoryMediaFileStorage.load_and_get_id

    def recording(self, path_or_data, mimetype, kind, filename=None) -> str:
        file_id = original(self, path_or_data, mimetype, kind, filename)
        files[file_id] = path_or_data
        return file_id

    monkeypatch.setattr(storage.MemoryMediaFileStorage, "load_and_get_id", recording)
    return files


@pytest.mark.parametrize("page,code", [("compare", "en"), ("compare", "de"),
                                       ("compare", "vi"), ("timeline", "en")])
def test_the_snapshot_download_renders_in_torchs_viewer(app_test: Callable, served,
                                                        page: str, code: str) -> None:
    at = app_test(f"pages/demos/{page}.py", query={**TINY, "lang": code}, timeout=180)
    no_errors(at)
    buttons = [b for b in at.get("download_button")
               if b.proto.label == gettext(code, LABEL)]
    assert len(buttons) == 1
    file_id = buttons[0].proto.url.rsplit("/", 1)[-1].split(".")[0]
    data = pickle.loads(served[file_id])
    strategies = {e["frames"][-1]["name"] for e in data["device_traces"][0]}
    assert "strategy none" in strategies and len(strategies) >= 2
    assert "total_allocated" in _memory_viz.segsum(data)
    assert "Active Memory Timeline" in _memory_viz.trace_plot(data)
    assert "Allocator State History" in _memory_viz.segment_plot(data)
    assert "pytorch.org/memory_viz" in texts(at, "caption")


@pytest.mark.parametrize("code", ["en", "vi"])
def test_a_mistake_case_downloads_its_three_runs(app_test: Callable, served,
                                                 code: str) -> None:
    at = app_test("pages/demos/mistakes.py",
                  query={"case": "selective-under-save-on-cpu", "lang": code}, timeout=180)
    no_errors(at)
    buttons = [b for b in at.get("download_button") if b.proto.label == gettext(code, LABEL)]
    assert len(buttons) == 1, (
        [b.proto.label for b in at.get("download_button")], demo_runner.view_phase(),
        os.environ.get(demo_runner.COLLECT_ENV),
        [(kind, texts(at, kind)) for kind in ("warning", "info", "success", "caption")])
    (button,) = buttons
    data = pickle.loads(served[button.proto.url.rsplit("/", 1)[-1].split(".")[0]])
    runs = list(dict.fromkeys(e["frames"][-1]["name"] for e in data["device_traces"][0]))
    assert runs == [gettext(code, "Plain run"), gettext(code, "Wrong way"),
                    gettext(code, "Fixed way")]
    assert "Active Memory Timeline" in _memory_viz.trace_plot(data)
