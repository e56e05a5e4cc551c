"""Progress that survives a reload: the lesson widgets' settings (the stepper's
strategy and step, the calculators' inputs) are kept per learner on the server, bounded,
and a stored value the widget no longer takes is ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from quiz.progress import MAX_SETTING_CHARS, MAX_SETTINGS, SETTING, ProgressStore
from tests.conftest import ROOT
from ui import progress
from ui.progress import between, flag, one_of

LEARNER = "learner-with-settings-0123"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "data"
    monkeypatch.setenv("DATA_DIR", str(folder))
    return folder


def open_page(script: str, learner: str | None = LEARNER) -> AppTest:
    """A fresh session (a reload, a new tab) of the page, for a browser whose cookie holds
    `learner` (None: a browser without the cookie)."""
    at = AppTest.from_file(str(ROOT / script), default_timeout=60)
    if learner is not None:
        at.session_state["learner_id"] = learner
    return at.run()


# ---- the store ------------------------------------------------------------------------


def test_settings_round_trip_as_json(data_dir: Path) -> None:
    store = ProgressStore(data_dir)
    for name, value in {"a": 3, "b": 0.25, "c": "sqrt", "d": True, "e": None,
                        "f": [1, "x"]}.items():
        assert store.keep_setting(LEARNER, name, value)
    assert store.settings(LEARNER) == {"a": 3, "b": 0.25, "c": "sqrt", "d": True, "e": None,
                                       "f": [1, "x"]}
    assert store.settings("another-learner-0123456789") == {}


def test_settings_are_bounded_in_size_and_number(data_dir: Path) -> None:
    store = ProgressStore(data_dir)
    assert not store.keep_setting(LEARNER, "long", "x" * MAX_SETTING_CHARS)
    assert not store.keep_setting(LEARNER, "x" * 500, 1)
    for refused in [float("nan"), float("inf"), {"a": 1}, [[1]], list(range(100)), object()]:
        assert not store.keep_setting(LEARNER, "odd", refused)
    assert store.settings(LEARNER) == {}
    for number in range(MAX_SETTINGS + 10):
        store.keep_setting(LEARNER, f"s{number}", number)
    kept = store.settings(LEARNER)
    assert len(kept) == MAX_SETTINGS
    assert store.keep_setting(LEARNER, "s0", 99)  # a kept one still changes
    assert store.settings(LEARNER)["s0"] == 99
    store.record(LEARNER, "lesson:why-memory")  # lessons read are not held by the cap
    assert store.items(LEARNER, "lesson:") == {"why-memory": "1"}


def test_stored_junk_is_left_out(data_dir: Path) -> None:
    store = ProgressStore(data_dir)
    store.record(LEARNER, SETTING + "broken", "{not json")
    store.record(LEARNER, SETTING + "huge", json.dumps("x" * 10_000))
    store.keep_setting(LEARNER, "fine", 5)
    assert store.settings(LEARNER) == {"fine": 5}


def test_parsers_take_only_what_the_widget_takes() -> None:
    ratio = one_of([0, 1, 4, 16])
    assert ratio(4) == 4
    for bad in [5, "4", 4.0, True, None, [4]]:
        with pytest.raises(ValueError):
            ratio(bad)
    layers = between(2, 16)
    assert layers(2) == 2 and layers(16) == 16
    for bad in [1, 17, 8.0, True, "8", None]:
        with pytest.raises(ValueError):
            layers(bad)
    params = between(0.001, 2_000.0, integer=False)
    assert params(7) == 7.0 and isinstance(params(7), float)
    with pytest.raises(ValueError):
        params(2_001)
    assert flag(False) is False
    with pytest.raises(ValueError):
        flag(1)


# ---- the widgets ----------------------------------------------------------------------


def test_calculator_and_stepper_settings_survive_a_new_session(data_dir: Path) -> None:
    at = open_page("pages/lessons/why_memory.py")
    at.selectbox(key="mem_preset").set_value("gpt2-small").run()
    at.number_input(key="mem_batch").set_value(4).run()
    at.selectbox(key="mem_optimizer").set_value("sgd").run()
    again = open_page("pages/lessons/why_memory.py")
    assert not again.exception
    assert again.selectbox(key="mem_preset").value == "gpt2-small"
    assert again.number_input(key="mem_batch").value == 4
    assert again.number_input(key="mem_hidden").value == 768  # from the preset
    assert again.selectbox(key="mem_optimizer").value == "sgd"
    assert open_page("pages/lessons/why_memory.py", "another-learner-0123456789"
                     ).selectbox(key="mem_preset").value != "gpt2-small"

    at = open_page("pages/lessons/how_it_works.py")
    at.radio(key="step_strategy").set_value("sqrt").run()
    at.slider(key="step_layers").set_value(9).run()
    for _ in range(3):
        at.button(key="step_next").click().run()
    assert at.slider(key="step_index").value == 4
    again = open_page("pages/lessons/how_it_works.py")
    assert again.radio(key="step_strategy").value == "sqrt"
    assert again.slider(key="step_layers").value == 9
    assert again.slider(key="step_index").value == 4
    assert again.info[0].value.startswith("**Step 4 of")


@pytest.mark.parametrize("script, key, value", [
    ("pages/lessons/language_models.py", "layer_seq", 2_048),
    ("pages/lessons/language_models.py", "layer_efficient", False),
    ("pages/lessons/large_vocabularies.py", "logits_vocab", 50_257),
    ("pages/lessons/how_many.py", "kcurve_layers", 40),
    ("pages/lessons/in_practice.py", "decide_peak", "loss"),
])
def test_each_calculator_keeps_its_inputs(data_dir: Path, script: str, key: str,
                                          value: object) -> None:
    at = open_page(script)
    widget = next(w for w in at.main if getattr(w, "key", None) == key)
    assert widget.value != value
    widget.set_value(value).run()
    again = open_page(script)
    assert not again.exception
    assert next(w for w in again.main if getattr(w, "key", None) == key).value == value


def test_stored_values_the_widgets_no_longer_take_are_ignored(data_dir: Path) -> None:
    store = ProgressStore(data_dir)
    for name, value in {"step_strategy": "gone", "step_layers": 99, "step_index": 10_000,
                        "step_ratio": "4", "mem_preset": 7, "mem_batch": -3,
                        "mem_params_m": "big", "mem_precision": None}.items():
        store.keep_setting(LEARNER, name, value)
    store.record(LEARNER, SETTING + "mem_vocab", "{junk")
    at = open_page("pages/lessons/how_it_works.py")
    assert not at.exception
    assert at.radio(key="step_strategy").value == "keep-all"
    assert at.slider(key="step_layers").value == 8
    assert at.selectbox(key="step_ratio").value == 1
    assert at.slider(key="step_index").value == 1
    at = open_page("pages/lessons/why_memory.py")
    assert not at.exception
    assert at.number_input(key="mem_batch").value >= 1
    assert at.number_input(key="mem_vocab").value >= 2


def test_looking_costs_no_write_and_a_new_learner_no_read(
        data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    class Counting(ProgressStore):
        def settings(self, learner_id: str) -> dict[str, object]:
            calls.append("read")
            return super().settings(learner_id)

        def keep_setting(self, learner_id: str, name: str, value: object) -> bool:
            calls.append(f"write {name}")
            return super().keep_setting(learner_id, name, value)

    monkeypatch.setattr(progress, "store", lambda: Counting(data_dir))
    at = open_page("pages/lessons/how_it_works.py", learner=None)
    at.run()
    assert calls == []  # an id made up here has nothing stored, and nothing changed
    at.button(key="step_next").click().run()
    assert calls == ["write step_index"]
    open_page("pages/lessons/how_it_works.py").run()
    assert calls == ["write step_index", "read"]  # once per session
