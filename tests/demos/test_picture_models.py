"""The lab's image models (demos.picture_models): checkpointing lowers what the blocks save
for backward, the full-resolution ones of a UNet included, the interval checkpoints
exactly every n-th block (and the code the page prints does what the lab runs), the costs
and the resolution sweep are measured, and the runs travel through the demo service's
jobs and store as tables (serving.picture_jobs)."""

from __future__ import annotations

import torch

from demos.mistake_records import CASE_CONFIG
from demos.picture_models import (
    build,
    from_frame,
    measure_memory,
    measure_time,
    saved_at,
    switch,
    to_frame,
    variant_of,
)
from demos.picture_settings import SWEEP_SIZES, PictureSetup, code, growing_units
from serving import picture_jobs
from serving.jobs import Job, decode_result, encode_result

UNET = PictureSetup(family="sd15-unet", size=64, batch=1, strategy="every-layer")


def test_checkpointing_lowers_what_the_full_resolution_blocks_save() -> None:
    plain, every = measure_memory(UNET, device="cpu")
    assert plain.strategy == "none" and every.strategy == "every-layer"
    assert every.checkpointed == list(range(len(every.blocks)))
    full = [i for i, level in enumerate(plain.levels) if level == 0]
    assert full and all(every.per_block[i] < plain.per_block[i] / 4 for i in full)
    assert every.blocks_total < plain.blocks_total / 4
    assert every.outside == plain.outside  # what no block holds is the same either way
    assert 0 < every.peak_bytes < plain.peak_bytes
    assert every.memory_events and plain.loss == every.loss


def test_the_interval_checkpoints_exactly_every_nth_block() -> None:
    plain, interval = measure_memory(UNET.with_(strategy="every-n", n=3), device="cpu")
    assert interval.checkpointed == list(range(0, len(interval.blocks), 3))
    for i, (kept, whole) in enumerate(zip(interval.per_block, plain.per_block, strict=True)):
        if i % 3 == 0:
            assert kept < whole
        else:
            assert kept == whole


def test_the_printed_interval_code_does_what_the_lab_runs() -> None:
    """The page's every_nth function, run as printed, checkpoints what the lab's does."""
    setup = PictureSetup(family="sd3", size=128, batch=1, strategy="every-n", n=2)
    model, kind = build(setup)
    switch(model, kind, "every-n", 2)
    ours = kind.measure_step(model, 1, 128, variant_of(setup))
    model, kind = build(setup)
    namespace = {"transformer": model}
    exec(code(setup), namespace)  # noqa: S102 - the page's own snippet
    printed = kind.measure_step(model, 1, 128, variant_of(setup))
    assert dict(printed.cpu) == dict(ours.cpu)


def test_costs_are_counted_and_timed() -> None:
    plain, every = measure_time(UNET, device="cpu", repeats=2)
    assert every.flops_counted > plain.flops_counted > 0  # the rerun forward
    assert len(plain.cpu_seconds_runs) == len(every.step_seconds_runs) == 2
    assert plain.threads == 1


def test_the_sweep_grows_with_the_pixels() -> None:
    setup = PictureSetup(family="vit", strategy="every-layer")
    small, large = saved_at(setup, 64, "cpu"), saved_at(setup, 256, "cpu")
    assert large[0].total > 4 * small[0].total / 2  # 16 tokens against 256 (+1 each)
    assert large[1].total < large[0].total / 4
    assert growing_units("vit", 256) == 257 and growing_units("sd3", 64) == 16 + 154
    assert growing_units("sdxl-unet", 128) == 16 * 16 * 16


def test_runs_travel_through_the_service_as_tables() -> None:
    setup = PictureSetup(family="sd3", size=64, batch=1, strategy="every-n", n=2)
    job = Job.make("pictures", CASE_CONFIG, (), **picture_jobs.options(setup, "memory"))
    assert Job.from_request(job.request()) == job
    assert job.step_count() == 1 and job.work() > 0 and job.memory_bytes() > 0
    runs = from_frame(decode_result(encode_result(job.merge([job.run_step(0, "cpu", None)]))))
    assert [r.strategy for r in runs] == ["none", "every-n"]
    assert runs[1].checkpointed == [0, 2] and isinstance(runs[1].outside["stem"], int)
    sweep = Job.make("pictures", CASE_CONFIG, (), **picture_jobs.options(setup, "sweep"))
    assert sweep.step_count() == len(SWEEP_SIZES) and "size" not in dict(sweep.options)
    assert sweep.step_work(len(SWEEP_SIZES) - 1) > sweep.step_work(0)
    frame = to_frame(runs)
    assert from_frame(frame)[0].per_block == runs[0].per_block


def test_setups_out_of_range_are_refused() -> None:
    import pytest

    from memory.config import ConfigError

    for bad in (dict(size=100), dict(batch=9), dict(family="x"), dict(n=5), dict(lora=8)):
        with pytest.raises(ConfigError):
            PictureSetup(**bad).validated()
    assert torch.get_num_threads() >= 1
