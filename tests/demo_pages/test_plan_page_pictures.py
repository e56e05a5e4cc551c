"""AppTest of /plan with image models: a preset planned from its shipped measurement
shows a recommendation whose table row agrees with it and with planner.picture_report
(in English, German and Vietnamese), a pasted tiny UNet config is measured and planned,
and settings the image planner cannot take are one line in the learner's language."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from i18n import language, units
from memory.hardware import GPUS, GiB
from model_classes.tiny_pictures import tiny_config
from planner import class_worker
from planner.picture_plan import PictureInputs
from planner.picture_presets import PICTURE_PRESETS, preset_config
from planner.picture_report import plan_report
from tests.lessons.test_lesson_pages_i18n import page_text
from tools.translations import untranslated_on_page

PAGE = "pages/plan.py"
RECOMMENDED = {"en": "· recommended", "de": "· empfohlen", "vi": "· đề xuất"}


@pytest.fixture
def shipped_only(monkeypatch):
    """Plans from the shipped measurements only: a measurement here fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("measured: planner/presets/pictures/measured.json is stale")

    monkeypatch.setattr(class_worker, "measure", refuse)


def _gib(size: float, code: str) -> str:
    return f"{units.number(size / GiB, 1, locale=language(code).babel_locale)} GiB"


def _no_errors(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.mark.parametrize("code", ["en", "de", "vi"])
@pytest.mark.parametrize("preset,gpu", [("sdxl-base-unet", "t4"), ("flux.1-dev", "a10")])
def test_a_lora_plan_at_1024_pixels_recommends_its_table_row(
        app_test: Callable, shipped_only, preset: str, gpu: str, code: str) -> None:
    """SDXL LoRA on a 16 GB card, Flux.1-dev LoRA on a 24 GB one: the headline names the
    report's recommendation and its peak, and the table marks that row, with that peak."""
    at = app_test(PAGE, query={"model": preset, "resolution": "1024", "gpu": gpu,
                               "tuning": "lora", "lang": code})
    _no_errors(at)
    data = plan_report(PictureInputs(preset_config(preset), resolution=1024,
                                     gpu_bytes=GPUS[gpu].bytes),
                       PICTURE_PRESETS[preset][0], language=code)
    rec = data["recommendation"]
    peak = _gib(rec["peak_bytes"], code)
    box = (at.success if rec["fits"] else at.warning)[0].value
    assert peak in box
    assert not rec["fits"] or f"{rec['blocks_checkpointed']}" in box
    if not rec["fits"]:  # Flux's T5 on the GPU: every block, and the alternatives
        assert rec["strategy"] == "every-layer" and rec["take"]
        assert any("\n- **" in m.value for m in at.markdown)
    assert at.metric[0].value == peak
    rows = at.dataframe[0].value.to_dict("records")
    assert len(rows) == len(data["strategies"])
    marked = [r for r in rows if RECOMMENDED[code] in next(iter(r.values()))]
    assert len(marked) == 1
    name = next(iter(marked[0].values())).removesuffix(" " + RECOMMENDED[code])
    assert f"**{name}**" in box  # the headline's plan is the marked row's
    assert peak in marked[0].values()
    position = list(data["strategies"]).index(data["recommended_row"])
    assert rows[position] is marked[0] or rows[position] == marked[0]
    codes = [c.value.strip() for c in at.code]
    shown = [part.strip() for part in data["code"].values() if part]
    assert shown and sorted(codes) == sorted(shown)  # the plan's code, or the one to take's
    assert "--resolution=1024" in data["code"]["script"] or not rec["fits"]
    text = "\n".join([page_text(at), *(f.value.to_csv() for f in at.dataframe)])
    assert code == "en" or not untranslated_on_page(text, code)
    if code == "de":  # the code's comments in the learner's language, numbers in hers
        assert ("# die Basis bleibt eingefroren" if rec["fits"] else  # QLoRA's, taken
                "# die Blöcke, die innerhalb des Budgets") in data["code"]["model"]
        assert "," in peak


def test_flux_lora_on_an_l4_names_qlora_to_take_and_shows_only_its_code(
        app_test: Callable, shipped_only) -> None:
    """FLUX.1 [dev] LoRA on a 24 GB L4 does not fit: the page lists the alternatives best
    first, each with its peak (QLoRA's from its own 4-bit measurement) and whether it fits,
    names QLoRA as the one to take and shows its plan's code only; on a 4 GiB card nothing
    fits and no code is shown."""
    at = app_test(PAGE, query={"model": "flux.1-dev", "resolution": "1024", "gpu": "l4",
                               "tuning": "lora", "lang": "en"})
    _no_errors(at)
    data = plan_report(PictureInputs(preset_config("flux.1-dev"), resolution=1024,
                                     gpu_bytes=GPUS["l4"].bytes),
                       PICTURE_PRESETS["flux.1-dev"][0])
    rec, take = data["recommendation"], data["recommendation"]["take"]
    assert at.warning and "still does not fit" in at.warning[0].value
    advice = next(m.value for m in at.markdown if "The alternatives, best first" in m.value)
    lines = [line for line in advice.splitlines() if line.startswith("- **")]
    assert [line.split("**")[1] for line in lines] == [
        "QLoRA (4-bit base)", "Cached latents and embeddings", "8-bit AdamW"]
    assert _gib(take["every_layer_peak_bytes"], "en") in lines[0] and "fits" in lines[0]
    assert all("short by" in line for line in lines[1:])
    assert "Take **QLoRA (4-bit base)**" in advice
    assert _gib(take["plan"]["peak_bytes"], "en") in advice
    assert any("Code for the plan to take: QLoRA (4-bit base)" in h.value
               for h in at.subheader)
    codes = [c.value for c in at.code]
    assert codes and any("BitsAndBytesConfig(" in c for c in codes)
    assert sorted(c.strip() for c in codes) == sorted(
        part.strip() for part in data["code"].values() if part)
    assert rec["fits"] is False and data["code_for"] == "take"
    tiny = app_test(PAGE, query={"model": "flux.1-dev", "resolution": "1024", "gpu": "custom",
                                 "gpu_gib": "4", "tuning": "lora", "lang": "en"})
    _no_errors(tiny)  # nothing fits on 4 GiB: said, and no code at all
    assert any("None of them fits, so no code is shown" in m.value for m in tiny.markdown)
    assert not tiny.code and not any("Code for" in h.value for h in tiny.subheader)


ONE_GPU = {"en": "The image planner plans one GPU", "de": "Der Bildplaner plant eine GPU",
           "vi": "Bộ lập kế hoạch ảnh lập kế hoạch cho một GPU"}


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_flux_qlora_with_sgd_fits_a_24_gb_card_and_more_gpus_are_one_line(
        app_test: Callable, shipped_only, code: str) -> None:
    """QLoRA and SGD are planned (a 4-bit base, the shipped 4-bit measurement); a link
    asking for two GPUs (from a language model's plan) is told, in one line, what one GPU's
    plan means under data parallelism: no GPU count is offered for an image model."""
    at = app_test(PAGE, query={"model": "flux.1-dev", "resolution": "1024", "gpu": "l4",
                               "tuning": "qlora", "optim": "sgd-momentum", "shards": "2",
                               "lang": code})
    _no_errors(at)
    assert len(at.info) == 1 and ONE_GPU[code] in at.info[0].value
    assert "\n" not in at.info[0].value
    assert not any(r.key == "shards" for r in at.radio)
    assert at.success  # the headline box: it fits
    data = plan_report(PictureInputs(preset_config("flux.1-dev"), resolution=1024,
                                     tuning="qlora", optimizer="sgd-momentum",
                                     gpu_bytes=GPUS["l4"].bytes),
                       PICTURE_PRESETS["flux.1-dev"][0], language=code)
    assert data["recommendation"]["fits"]
    assert at.metric[0].value == _gib(data["recommendation"]["peak_bytes"], code)
    assert data["code"]["model"].strip() in [c.value.strip() for c in at.code]
    assert code == "en" or not untranslated_on_page(page_text(at), code)


def test_a_vision_encoder_is_not_offered_qlora(app_test: Callable, shipped_only) -> None:
    """QLoRA is a diffusion model's (diffusers' 4-bit loading): a link asking it of ViT is
    said and planned with LoRA."""
    at = app_test(PAGE, query={"model": "vit-large-patch16-224", "tuning": "qlora"})
    assert not at.exception and not at.error
    assert "qlora" not in at.radio(key="tuning").options
    assert at.warning and "qlora" in at.warning[0].value
    assert at.query_params["tuning"] == "lora" and at.metric


@pytest.mark.parametrize("code", ["en", "de"])
def test_a_side_off_the_grid_or_out_of_range_is_said_and_planned_near_it(
        app_test: Callable, shipped_only, code: str) -> None:
    """?resolution=1000 on SDXL (multiples of 32): said, and planned at 992; 100,000
    pixels: said, and planned at the largest side offered."""
    at = app_test(PAGE, query={"model": "sdxl-base-unet", "resolution": "1000",
                               "lang": code})
    assert not at.exception and at.warning
    assert "1000" in at.warning[0].value and "992" in at.warning[0].value
    assert at.query_params["resolution"] == "992"
    far = app_test(PAGE, query={"model": "sdxl-base-unet", "resolution": "100000",
                                "lang": code})
    assert not far.exception and far.warning and "100000" in far.warning[0].value
    assert far.query_params["resolution"] == "4096"


def test_switching_to_a_model_of_another_grid_starts_at_its_own_side(
        app_test: Callable, shipped_only) -> None:
    """SDXL at 1,024 pixels, then SigLIP (14-pixel patches): its own 378-pixel side,
    never a side it cannot take."""
    at = app_test(PAGE, query={"model": "sdxl-base-unet", "resolution": "1024"})
    at.radio(key="model").set_value("siglip-so400m-patch14-384").run()
    _no_errors(at)
    assert at.query_params["resolution"] == "378"
    assert any("SiglipVisionModel" in c.value for c in at.code)


@pytest.mark.timeout(300)
def test_a_pasted_tiny_unet_config_is_measured_and_planned(app_test: Callable) -> None:
    """A diffusers UNet config.json pasted: its class measured at the settings (a few
    seconds in its own process), planned at 256 pixels, its code loading the config."""
    at = app_test(PAGE, query={"model": "config", "resolution": "256", "gpu": "t4"},
                  timeout=240)
    # SDXL's UNet in two levels: eleven blocks measured in a third of the three levels' time
    unet = {**tiny_config("sdxl-unet"), "block_out_channels": [16, 32], "layers_per_block": 1,
            "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D"],
            "up_block_types": ["CrossAttnUpBlock2D", "UpBlock2D"],
            "transformer_layers_per_block": [1, 1], "attention_head_dim": [1, 2]}
    at.text_area(key="plan_config_json").set_value(json.dumps(unet))
    at.run(timeout=240)
    _no_errors(at)
    assert at.query_params["resolution"] == "256"
    assert at.success and "**" in at.success[0].value
    assert any("UNet2DConditionModel.from_config" in c.value for c in at.code)
    rows = at.dataframe[0].value.to_dict("records")
    assert sum("· recommended" in next(iter(r.values())) for r in rows) == 1
