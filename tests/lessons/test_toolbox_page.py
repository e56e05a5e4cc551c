"""Lesson 10's live measurements: the jobs the page asks the demo service for (one short
CPU step each, stored per setting), and the page itself in German, measuring on a click
and showing what this run measured, worded and formatted in the language."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from demos.mistake_records import CASE_CONFIG
from demos.toolbox_runs import hfu_over_mfu
from demos.toolbox_settings import PARTS, SETTINGS, options
from i18n.numbers import format_decimal, format_percent
from serving.jobs import Job, decode_result, encode_result
from tests.i18n.test_every_page_in_every_language import rendered_text
from tools.translations import untranslated_on_page

PAGE = "pages/lessons/toolbox.py"


def test_each_part_is_one_short_step_stored_per_setting():
    for part in PARTS:
        job = Job.make("toolbox", CASE_CONFIG, (), **options(part))
        assert job.step_count() == 1 and 0 < job.work() < 30, part
        assert Job.from_request(job.request()) == job
    assert options("flops", 8) == {"part": "flops", "layers": 8}
    assert options("lora") == {"part": "lora"}
    for part, value in (("flops", 3), ("autocast", "float64"), ("packing", "nope")):
        with pytest.raises(ValueError):
            options(part, value)
    with pytest.raises(ValueError):
        options("no-such-part")
    assert {name for name, _, _ in SETTINGS.values()} == {
        "lengths",
        "dtype",
        "layers",
        "microbatches",
        None,
    }


def test_a_measured_table_survives_the_store():
    job = Job.make("toolbox", CASE_CONFIG, (), **options("checkpoint-error"))
    frame = job.merge([job.run_step(0, "cpu", None)])
    back = decode_result(encode_result(frame))
    assert back.to_dict("records") == frame.to_dict("records")


def test_the_page_measures_on_a_click_and_shows_what_it_measured(app_test: Callable) -> None:
    from ui import demo_runner

    at = app_test(PAGE, query={"lang": "de"}, timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    wanted = ("toolbox-flops-4", "toolbox-checkpoint-error-None", "toolbox-autocast-bfloat16")
    buttons = {button.key: button for button in at.button}
    assert set(wanted) <= set(buttons)  # nothing measured before the learner asks
    for key in wanted:
        buttons[key].click()
    at.run(timeout=240)
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    # what the page shows is what this run stored: HFU/MFU from the two counted steps
    flops = demo_runner.cached(Job.make("toolbox", CASE_CONFIG, (), **options("flops", 4)))
    metrics = {metric.label: metric.value for metric in at.metric}
    assert metrics["HFU / MFU mit Checkpointing"] == (
        f"{format_decimal(hfu_over_mfu(flops.to_dict('records')), 'de', 3)}×"
    )
    tables = {tuple(table.value.columns): table.value for table in at.table}
    counted = next(t for cols, t in tables.items() if "Von torch gezählte FLOPs" in cols)
    assert counted["Von torch gezählte FLOPs"].str.endswith(" GFLOP").all()
    assert counted["Von torch gezählte FLOPs"].str.contains(",").all()  # 0,327 GFLOP
    ops = next(t for cols, t in tables.items() if "Operation" in cols)
    assert ops.set_index("Operation").loc["rms_norm", "In fp32 behaltene Byte"] != "0"
    code = "\n".join(block.value for block in at.code)
    assert "aten.cos" in code and "A different number of tensors was saved" in code
    assert "toolbox-flops-4" not in {button.key for button in at.button}  # stored now
    assert untranslated_on_page(rendered_text(at), "de") == []


@pytest.fixture(scope="module")
def bubble_rows() -> list[dict]:
    """One real launch: two gloo processes run every schedule over 4 micro-batches of a
    tiny stage (the page's own sizes take longer; the order and the arithmetic are the
    same)."""
    from demos.pipeline_bubble import measure

    return measure(4, rows=8, hidden=32)


def test_two_processes_run_each_schedule_in_its_own_order(bubble_rows: list[dict]) -> None:
    from demos.pipeline_bubble import bubbles
    from memory.toolbox import bubble_fraction

    def order(schedule: str, rank: int) -> str:
        mine = [
            r
            for r in bubble_rows
            if r["schedule"] == schedule
            and r["rank"] == rank
            and r["kind"] in ("F", "B")
            and not r["checkpointed"]
        ]
        return "".join(r["kind"] for r in sorted(mine, key=lambda r: r["start"]))

    assert order("gpipe", 0) == "FFFFBBBB"  # every forward before the first backward
    assert order("1f1b", 0) == "FFBFBFBB"  # at most p = 2 in flight
    assert order("1f1b", 1) == "FBFBFBFB"  # the last stage: one forward, one backward
    assert sorted(order("interleaved", 0)) == ["B"] * 8 + ["F"] * 8  # two chunks each
    found = bubbles(bubble_rows)
    assert set(found) == {(s, c) for s in ("gpipe", "1f1b", "interleaved") for c in (0, 1)}
    for (schedule, _), entry in found.items():
        chunks = 2 if schedule == "interleaved" else 1
        assert entry["predicted"] == bubble_fraction(2, 4, chunks)
        assert entry["span"] > entry["busy"] > 0 and entry["measured"] > 0


def test_the_pipeline_view_draws_what_was_measured(bubble_rows, monkeypatch) -> None:
    """The lesson's pipeline part in Vietnamese, handed the launch's rows as the store
    would: its table and its timeline, worded and formatted in the language."""
    from types import SimpleNamespace

    import pandas as pd
    import torch
    from streamlit.testing.v1 import AppTest

    from ui import demo_runner

    monkeypatch.setattr(demo_runner, "cached", lambda job: pd.DataFrame(bubble_rows))
    # no demo service for this view alone: only its caption asks for the torch version
    monkeypatch.setattr(
        demo_runner, "device", lambda: SimpleNamespace(torch_version=torch.__version__)
    )

    def script() -> None:
        from ui.lesson_toolbox import pipeline

        pipeline()

    at = AppTest.from_function(script, default_timeout=60)
    at.query_params["lang"] = "vi"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.table[0].value
    predicted = {format_percent(share, "vi", 1) for share in (1 / 4, 1 / 8)}  # (p-1)/m, /v·m
    assert len(table) == 6 and set(table.iloc[:, -2]) == predicted == {"25,0%", "12,5%"}
    assert at.get("plotly_chart")
    assert untranslated_on_page(rendered_text(at), "vi") == []
