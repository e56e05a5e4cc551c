"""What a page run does once instead of on every run, for a class of learners at once
(benchmarks/load.py measures the effect): the learner's progress is read from the server
at most once per READ_EVERY_S, not at all for an id the session has just made up; a
shared figure hands st.plotly_chart the same dict every time; a result's fingerprint is
worked out once per result object."""

from __future__ import annotations

import gc
import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from streamlit.testing.v1 import AppTest

from ui import demo_display, progress


def _two_reads_in_one_run() -> None:
    from ui.progress import visited_lessons

    visited_lessons()
    visited_lessons()  # the navigation and the sidebar both ask


class _CountingStore:
    reads = 0

    def items(self, learner_id: str, prefix: str = "") -> dict[str, str]:
        _CountingStore.reads += 1
        return {}


@pytest.fixture
def counting_store(monkeypatch: pytest.MonkeyPatch) -> type[_CountingStore]:
    _CountingStore.reads = 0
    monkeypatch.setattr(progress, "store", _CountingStore)
    return _CountingStore


def test_a_new_learner_costs_no_progress_read(counting_store) -> None:
    at = AppTest.from_function(_two_reads_in_one_run, default_timeout=30).run()
    assert not at.exception
    assert counting_store.reads == 0


def test_a_known_learner_is_read_once_per_interval(counting_store, monkeypatch) -> None:
    at = AppTest.from_function(_two_reads_in_one_run, default_timeout=30)
    at.session_state["learner_id"] = "a-known-learner-0123456789"  # came with the cookie
    at.run()
    assert not at.exception
    assert counting_store.reads == 1
    monkeypatch.setattr(progress, "READ_EVERY_S", 0.0)  # another tab may have read more
    at.run()
    assert counting_store.reads == 3


def test_a_shared_figure_makes_its_dict_once_and_draws_the_same_spec() -> None:
    figure = go.Figure(go.Scatter(x=np.arange(50), y=np.linspace(0, 1, 50), name="a"))
    figure.update_layout(title="t")
    shared = demo_display._SharedFigure(figure)
    first = shared.to_dict()
    assert shared.to_dict() is first
    assert json.loads(pio.to_json(first, validate=False)) == \
        json.loads(pio.to_json(figure.to_dict(), validate=False))


def test_a_fingerprint_is_remembered_while_its_result_lives() -> None:
    frame = pd.DataFrame({"strategy": ["none", "sqrt"], "peak": [2.0, 1.0]})
    found = demo_display.fingerprint(frame)
    assert id(frame) in demo_display._fingerprints
    assert demo_display.fingerprint(frame.copy()) == found  # the same numbers
    other = frame.assign(peak=[2.0, 1.5])
    assert demo_display.fingerprint(other) != found
    key = id(frame)
    del frame
    gc.collect()
    assert key not in demo_display._fingerprints or \
        demo_display._fingerprints[key][0]() is not None
