"""AppTest: every demo page that runs steps offers what it measured as torch's memory
snapshot (Curves, What fits, Same result, the compiler's budget, the real model; Compare,
Timeline and the mistakes in test_snapshot_download.py), says which runs it holds, and the
bytes its button serves are a pickle that `torch.cuda._memory_viz` reads and plots (no
GPU needed). The compiler page says why its compiled points and its stored example have
none."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest
from torch.cuda import _memory_viz

from i18n import gettext
from tests.compiler_budget_data import PAGE_QUERY, SWEEP_GROUP, tiny_job, tiny_result
from tests.demo_pages import test_snapshot_download
from tests.demo_pages.test_pages import TINY, go_ahead, no_errors, texts

LABEL = test_snapshot_download.LABEL
served = test_snapshot_download.served  # the fixture: the bytes each download serves


def downloaded(at, files: dict[str, bytes], code: str = "en") -> dict:
    """The snapshot the page's one snapshot button serves, read as torch reads it, after
    torch's own tools have summed and plotted it."""
    (button,) = [b for b in at.get("download_button")
                 if b.proto.label == gettext(code, LABEL)]
    data = pickle.loads(files[button.proto.url.rsplit("/", 1)[-1].split(".")[0]])
    assert "total_allocated" in _memory_viz.segsum(data)
    assert "Active Memory Timeline" in _memory_viz.trace_plot(data)
    assert "Allocator State History" in _memory_viz.segment_plot(data)
    assert "pytorch.org/memory_viz" in texts(at, "caption") or code != "en"
    return data


def runs(data: dict) -> list[str]:
    """The runs in the snapshot, in order (each event's outermost frame)."""
    return list(dict.fromkeys(e["frames"][-1]["name"] for e in data["device_traces"][0]))


def phases(data: dict, run: str) -> set[str]:
    return {e["frames"][1]["name"] for e in data["device_traces"][0]
            if e["frames"][-1]["name"] == run}


@pytest.mark.parametrize("code", ["en", "vi"])
def test_curves_offer_each_strategys_step_at_the_largest_value(app_test: Callable, served,
                                                                code: str) -> None:
    query = {k: v for k, v in TINY.items() if k != "batch"} | {"sweep": "batch",
                                                                "lang": code}
    at = go_ahead(app_test("pages/demos/curves.py", query=query, timeout=120))
    no_errors(at)
    data = downloaded(at, served, code)
    # the batch sweep runs 1, 2, 4, 8: each strategy's step at batch 8, no other point
    assert runs(data) == ["strategy none, batch 8", "strategy every-layer, batch 8",
                          "strategy selective:save-matmuls, batch 8"]
    assert "recompute" in phases(data, "strategy every-layer, batch 8")
    assert gettext(code, "The memory snapshot holds one tracked step per strategy, at the "
                         "largest value it ran in this sweep; the steps at the other values "
                         "are not kept, so that a stored sweep stays small.") in texts(
        at, "caption")


def test_what_fits_offers_each_confirmed_step(app_test: Callable, served) -> None:
    query = {**TINY, "vocab": "4096", "budget": "16"}
    at = go_ahead(app_test("pages/demos/what_fits.py", query=query, timeout=120))
    no_errors(at)
    table = at.table[0].value
    confirmed = list(table["Largest batch (confirmed)"])
    data = downloaded(at, served)
    assert runs(data) == [f"strategy {s}, batch {b}" for s, b in zip(
        ("none", "every-layer", "selective:save-matmuls"), confirmed, strict=True)]
    assert "each strategy's confirmed step" in texts(at, "caption")


def test_same_result_offers_each_strategys_first_step(app_test: Callable, served) -> None:
    query = {"layers": "2", "hidden": "64", "seq": "32", "batch": "2", "steps": "20",
             "lang": "de"}
    at = go_ahead(app_test("pages/demos/same_result.py", query=query, timeout=120))
    no_errors(at)
    data = downloaded(at, served, "de")
    assert runs(data) == ["strategy none, training step 1",
                          "strategy every-layer, training step 1",
                          "strategy selective:save-matmuls, training step 1"]
    assert gettext("de", "The memory snapshot holds each strategy's first training step "
                         "(forward, loss and backward; the optimizer's update after it is "
                         "not tracked); the later steps repeat it on other data and are not "
                         "kept.") in texts(at, "caption")


def test_the_real_model_offers_its_step(app_test: Callable, served) -> None:
    at = app_test("pages/demos/real_model.py",
                  query={"model": "gpt2", "ckpt": "every-layer", "dtype": "fp32"},
                  timeout=180)
    no_errors(at)
    data = downloaded(at, served)
    assert runs(data) == ["strategy every-layer"]
    assert phases(data, "strategy every-layer") == {"forward", "backward"}
    layers = {e["frames"][2]["name"] for e in data["device_traces"][0]
              if len(e["frames"]) == 4}
    assert layers == {f"layer {i}" for i in range(4)}  # the decoder layers, in forward
    assert "its recomputation shows as backward" in texts(at, "caption")


def test_the_stored_budget_example_says_why_it_has_no_snapshot(app_test: Callable) -> None:
    at = app_test("pages/demos/compiler_budget.py", query={"lang": "en"})
    no_errors(at)
    assert "Stored example" in texts(at, "warning")
    assert not [b for b in at.get("download_button") if b.proto.label == LABEL]
    assert "The stored example keeps no tracked steps" in texts(at, "caption")


@SWEEP_GROUP
@pytest.mark.compile
def test_a_measured_budget_sweep_offers_its_eager_points(app_test: Callable, served) -> None:
    from serving.jobs import store_key
    from serving.service import get_service
    from serving.store import ResultStore
    from serving.tickets import request_json

    job, frame = tiny_job(), tiny_result()  # measured once per test process, compiled
    at = app_test("pages/demos/compiler_budget.py", query={"lang": "en"}, timeout=30)
    service = get_service()  # this test's DATA_DIR: store the sweep as the service does
    ResultStore().put(store_key(job, service.device), "test", frame, 1.0, 1.0,
                      kind=job.kind, device=service.device_label, request=request_json(job))
    at = app_test("pages/demos/compiler_budget.py", query=PAGE_QUERY, timeout=30)
    no_errors(at)
    data = downloaded(at, served)
    eager = list(frame.loc[frame["kind"] == "eager", "strategy"])
    assert runs(data) == [f"strategy {s}, eager" for s in eager]  # no budget point
    assert "recompute" in phases(data, "strategy every-layer, eager")
    assert "A compiled step cannot be tracked" in texts(at, "caption")
