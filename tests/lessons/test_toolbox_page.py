"""Lesson 10's live measurements: the jobs the page asks the demo service for (one short
CPU step each, stored per setting), and the page itself in German, measuring on a click
and showing what this run measured, worded and formatted in the language."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from demos.mistake_records import CASE_CONFIG
from demos.toolbox_runs import hfu_over_mfu
from demos.toolbox_settings import PARTS, SETTINGS, options
from i18n.numbers import format_decimal
from serving.jobs import Job, decode_result, encode_result
from tests.i18n.test_every_page_in_every_language import rendered_text
from tools.translations import untranslated_on_page

PAGE = "pages/lessons/toolbox.py"


def test_each_part_is_one_short_step_stored_per_setting():
    for part in PARTS:
        job = Job.make("toolbox", CASE_CONFIG, (), **options(part))
        assert job.step_count() == 1 and 0 < job.work() < 5, part
        assert Job.from_request(job.request()) == job
    assert options("flops", 8) == {"part": "flops", "layers": 8}
    assert options("lora") == {"part": "lora"}
    for part, value in (("flops", 3), ("autocast", "float64"), ("packing", "nope")):
        with pytest.raises(ValueError):
            options(part, value)
    with pytest.raises(ValueError):
        options("no-such-part")
    assert {name for name, _, _ in SETTINGS.values()} == {"lengths", "dtype", "layers", None}


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
