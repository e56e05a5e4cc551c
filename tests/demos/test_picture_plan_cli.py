"""`python -m planner` for image models (planner.picture_cli): the presets planned from
their shipped measurements (planner/presets/pictures/measured.json: nothing measured
here, and a file measured by other code or versions fails these tests until it is
written again), the recommendation and its table row agreeing in the JSON and in the
text, every bad flag one line and exit 2, and the printed code run on tiny models."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

from memory.hardware import GPUS, GiB
from model_classes.kinds import kind_for
from model_classes.tiny_pictures import tiny_config
from model_classes.variant import Variant
from planner import class_worker, picture_code
from planner.cli import main
from planner.picture_cli import picture_kind
from planner.picture_presets import PICTURE_PRESETS, preset_config

warnings.filterwarnings("ignore")


@pytest.fixture
def shipped_only(monkeypatch):
    """Plans from the shipped measurements only: a measurement here fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("measured: planner/presets/pictures/measured.json is stale "
                             "(python -m planner.picture_cache writes it again)")

    monkeypatch.setattr(class_worker, "measure", refuse)


def _plan(capsys, *flags: str) -> dict:
    assert main([*flags, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("preset,gpu", [("flux.1-dev", "l4"), ("sdxl-base-unet", "t4")])
def test_a_lora_plan_at_1024_pixels_recommends_its_table_row(preset: str, gpu: str, capsys,
                                                             shipped_only) -> None:
    flags = ["--model", preset, "--tuning", "lora", "--resolution", "1024", "--gpu", gpu]
    data = _plan(capsys, *flags)
    rec, rows = data["recommendation"], data["strategies"]
    row = rows[data["recommended_row"]]
    assert rec["key"] == data["recommended_row"]
    for field in ("strategy", "peak_bytes", "fits", "activations_kept_bytes", "n", "k"):
        assert rec[field] == row[field], field
    fitting = [r for r in rows.values() if r["fits"]]
    if fitting:  # the least recompute (counted FLOPs) among those that fit
        assert rec["fits"]
        assert rec["recompute_flops"] == min(r["recompute_flops"] for r in fitting)
    else:  # nothing fits: every block, and the alternatives
        assert rec["strategy"] == "every-layer" and rec["alternatives"]
    plain = sum(b["kept_bytes"] for b in data["blocks"])
    assert rows["none"]["activations_kept_bytes"] == plain + data["outside_bytes"]["plain"]
    assert rows["every-layer"]["activations_kept_bytes"] < plain / 5
    assert main(flags) == 0
    text = capsys.readouterr().out
    mark = "<- recommended" if rec["fits"] else "<- closest"
    marked = [line for line in text.splitlines() if line.endswith(mark)]
    assert len(marked) == 1 and marked[0].startswith(rec["strategy"])
    if rec["fits"]:  # its own code
        assert data["code_for"] == "asked" and rec["take"] is None
        assert "--gradient_checkpointing" in data["code"]["script"] or rec["strategy"] == "none"
        assert "--resolution=1024" in data["code"]["script"]
        assert data["code"]["script"].strip() in text and "Recommended:" in text


def test_flux_lora_on_an_l4_does_not_fit_and_takes_qlora(capsys, shipped_only) -> None:
    """FLUX.1 [dev] LoRA on a 24 GB L4 does not fit even with every block checkpointed: the
    alternatives, each planned whole (QLoRA from its own 4-bit measurement), best first;
    QLoRA fits and is the one to take, and the code printed is its plan's (as the language
    planner's recommendation takes the first task-changing choice that fits); no code of
    the plan that does not fit."""
    common = ["--model", "flux.1-dev", "--resolution", "1024", "--lora-rank", "16",
              "--precision", "mixed"]
    flags = [*common, "--tuning", "lora", "--gpu", "l4"]
    data = _plan(capsys, *flags)
    rec = data["recommendation"]
    assert not rec["fits"] and rec["strategy"] == "every-layer"
    alts = rec["alternatives"]
    assert [a["changes"] for a in alts] == [
        [{"change": "tuning", "value": "qlora"}], [{"change": "encoders", "value": "cached"}],
        [{"change": "optimizer", "value": "adamw-8bit"}]]
    assert [a["fits"] for a in alts] == [True, False, False]
    qlora = _plan(capsys, *common, "--tuning", "qlora", "--gpu", "l4")  # asked directly
    assert alts[0]["plan"]["peak_bytes"] == qlora["recommendation"]["peak_bytes"]
    assert alts[0]["every_layer_peak_bytes"] == qlora["strategies"]["every-layer"][
        "peak_bytes"]
    assert 19 * GiB < alts[0]["every_layer_peak_bytes"] < 19.5 * GiB
    assert rec["peak_bytes"] > alts[1]["every_layer_peak_bytes"] > alts[0][
        "every_layer_peak_bytes"]
    assert rec["take"] == alts[0] and data["code_for"] == "take"
    assert data["code"] == qlora["code"]  # QLoRA's code: no training script
    assert "BitsAndBytesConfig(" in data["code"]["model"] and data["code"]["script"] == ""
    assert main(flags) == 0
    text = capsys.readouterr().out
    assert "Does not fit: even every-layer (57 of 57 blocks checkpointed)" in text
    assert "Recommended:" not in text
    assert "   --tuning qlora [changes the task]: peak 19.18 GiB, fits" in text
    assert "Take --tuning qlora: peak 19.18 GiB, fits." in text
    assert "quantization_config=quantization" in text  # QLoRA's code only
    assert text.count("FluxTransformer2DModel.from_pretrained(") == 1
    # on a 16 GB card no single change fits: cached encoders and QLoRA together do
    t4 = _plan(capsys, *common, "--tuning", "lora", "--gpu", "t4")["recommendation"]
    assert not any(a["fits"] for a in t4["alternatives"] if len(a["changes"]) == 1)
    assert t4["take"]["changes"] == [{"change": "encoders", "value": "cached"},
                                     {"change": "tuning", "value": "qlora"}]
    tiny = _plan(capsys, *common, "--tuning", "lora", "--gpu-gb", "4")
    assert tiny["recommendation"]["take"] is None and tiny["code_for"] is None
    assert tiny["code"] == {"model": "", "pipeline": "", "script": ""}


def test_the_presets_are_the_published_models(shipped_only, capsys) -> None:
    """Parameters counted on the classes (their published counts: SDXL's UNet 2.567B,
    FLUX.1 [dev]'s transformer 11.90B, SD3.5 Medium's 2.24B, ViT-L/16 304M with its
    head, SigLIP so400m's vision tower 428M)."""
    shipped = json.loads(Path("planner/presets/pictures/measured.json").read_text())
    counts = {m["preset"]: m["params"] - m["trainable"] for m in shipped.values()}
    assert counts == {"sdxl-base-unet": 2_567_463_684, "flux.1-dev": 11_901_408_320,
                      "sd3.5-medium": 2_243_171_520, "vit-large-patch16-224": 304_326_632,
                      "siglip-so400m-patch14-384": 428_225_600}
    assert {picture_kind(preset_config(name)) for name in PICTURE_PRESETS} == {
        "unet", "diffusion-transformer", "vision-encoder"}


@pytest.mark.parametrize("flags,words", [
    (["--model", "flux.1-dev", "--seq", "512"], "--seq"),
    (["--model", "gpt2", "--resolution", "512"], "--resolution is an image model's flag"),
    (["--model", "sdxl-base-unet", "--resolution", "1000"], "multiples of 32"),
    (["--model", "vit-large-patch16-224", "--tuning", "qlora"], "diffusion transformers"),
    (["--model", "sdxl-base-unet", "--tuning", "qlora"], "diffusion transformers"),
    (["--model", "vit-large-patch16-224", "--encoders", "cached"], "no VAE"),
    (["--model", "flux.1-dev", "--gpus", "2"], "data parallelism"),
    (["--model", "sdxl-base-unet", "--placement", "sqrt"], "block by block"),
    (["--model", "gpt2", "--placement", "optimal"], "decoder layers are equal"),
])
def test_a_bad_flag_for_an_image_model_is_one_line(flags: list[str], words: str,
                                                   capsys) -> None:
    assert main(flags) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err


def test_the_kinds_are_read_without_torch_as_the_kinds_claim_them() -> None:
    from model_classes.tiny_pictures import TINY

    assert {f: picture_kind(cfg) for f, cfg in TINY.items()} == {
        f: kind_for(cfg).name for f, cfg in TINY.items()}
    assert picture_kind({"model_type": "llama"}) is None


def _step(model, kind, variant: Variant) -> None:
    loss = kind.training_forward(model, 1, 64, variant)(lambda: None)
    loss.backward()


@pytest.mark.parametrize("strategy", ["every-layer", "every-n", "first-k", "optimal", "none"])
def test_the_printed_diffusers_code_runs(strategy: str, tmp_path: Path) -> None:
    cfg = tiny_config("flux")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    settings = {"tuning": "lora", "lora_rank": 4, "precision": "mixed"}
    text = picture_code.diffusers_code(settings, cfg, strategy, 2, 3, None, str(path),
                                       ["to_q", "to_k", "to_v", "to_out.0"], picked=(1, 4))
    scope: dict = {}
    exec(compile(text, "plan", "exec"), scope)
    model = scope["transformer"]
    trained = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trained and all("lora_" in n for n in trained)
    assert all(p.dtype == torch.float32 for p in model.parameters() if p.requires_grad)
    assert model.is_gradient_checkpointing == (strategy != "none")
    kind = kind_for(cfg)
    ran: list[int] = []
    original = torch.utils.checkpoint.checkpoint
    index = {id(b): i for i, b in enumerate(kind.blocks(model))}

    def spy(function, *args, **kwargs):
        ran.append(index[id(function.__self__)])
        return original(function, *args, **kwargs)

    torch.utils.checkpoint.checkpoint = spy
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            _step(model, kind, Variant("mixed", lora_rank=4))
    finally:
        torch.utils.checkpoint.checkpoint = original
    want = {"every-layer": [0, 1, 2, 3, 4, 5], "every-n": [0, 2, 4], "first-k": [0, 1, 2],
            "optimal": [1, 4], "none": []}[strategy]
    assert ran == want


@pytest.mark.parametrize("family,strategy", [("siglip", "first-k"), ("vit", "every-n"),
                                             ("vit", "optimal")])
def test_the_printed_transformers_code_runs(family: str, strategy: str,
                                            tmp_path: Path) -> None:
    cfg = tiny_config(family)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    cls = "SiglipVisionModel" if family == "siglip" else "ViTForImageClassification"
    settings = {"tuning": "lora", "lora_rank": 4, "precision": "fp32"}
    text = picture_code.vision_code(settings, cfg, strategy, 2, 1, None, str(path),
                                    ["q_proj", "v_proj"] if family == "siglip"
                                    else "all-linear", cls, picked=(1, 2))
    scope: dict = {}
    exec(compile(text, "plan", "exec"), scope)
    model = scope["model"]
    kind = kind_for(cfg)
    flags = [layer.gradient_checkpointing for layer in kind.blocks(model)]
    assert flags == {"first-k": [True, False, False, False],
                     "every-n": [True, False, True, False],
                     "optimal": [False, True, True, False]}[strategy]
    _step(model, kind, Variant(lora_rank=4))
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_the_placement_flag_picks_the_recommended_blocks(capsys, shipped_only) -> None:
    """SDXL's UNet on a 12 GiB budget: its blocks differ, and the optimal placement
    recomputes less than the fewest first blocks that fit; the code wraps exactly the
    blocks the JSON lists."""
    flags = ["--model", "sdxl-base-unet", "--tuning", "lora", "--gpu-gb", "12",
             "--headroom", "0"]
    data = _plan(capsys, *flags, "--placement", "optimal")
    rec, placed = data["recommendation"], data["placement"]
    assert rec["strategy"] == "optimal" and rec["fits"]
    names = [b["name"] for b in data["blocks"]]
    picked = {names.index(name) for name in rec["checkpointed_blocks"]}
    assert f"lambda i: i in {sorted(picked)}".replace("[", "{").replace("]", "}") in (
        data["code"]["model"])
    assert placed["saved_vs_first_k"] > 0 and placed["saved_vs_every_layer"] > 0
    # no better than memory.placement's optimum over every bound on the largest rebuilt
    # block, each chain solved whole (no bound skipped): within 1% of a step's FLOPs
    from memory.placement import BudgetTooSmall, place
    from planner import picture_plan
    from planner.picture_placement import chain
    from planner.picture_report import measured_for

    p = picture_plan.PictureInputs(preset_config("sdxl-base-unet"), resolution=1024,
                                   tuning="lora", gpu_bytes=12 * GiB, headroom=0.0)
    measured = measured_for(p)
    b = picture_plan.blocks(measured, 1, 1024)
    budget = int(picture_plan.activation_budget(p, measured))
    best = None
    for bound in set(b.plain):
        c = chain(b.plain, b.checkpointed, b.outside_checkpointed, b.flops, bound)
        try:
            redo = c.recompute(place("optimal", c, budget, longest=1))
        except BudgetTooSmall:
            continue
        best = redo if best is None else min(best, redo)
    assert best is not None and rec["recompute_flops"] <= best + 0.01 * placed["step_flops"]
    first = _plan(capsys, *flags, "--placement", "first-k")["recommendation"]
    assert first["strategy"] == "first-k" and first["k"] == placed["first_k"]
    assert first["recompute_flops"] > rec["recompute_flops"]
    every = _plan(capsys, *flags, "--placement", "every")["recommendation"]
    assert every["strategy"] == "every-layer"


def test_cached_encoders_leave_the_vae_and_text_encoders_out(capsys, shipped_only) -> None:
    flags = ["--model", "flux.1-dev", "--tuning", "lora", "--gpu", "a100-40"]
    resident = _plan(capsys, *flags)
    cached = _plan(capsys, *flags, "--encoders", "cached", "--cached-images", "30")
    assert {p["id"] for p in resident["frozen"]} == {"vae", "text_encoder", "text_encoder_2"}
    assert cached["frozen"] == [] and "pixels" not in cached["around_model_bytes"]
    # 30 latent distributions: 5 x 16 channels x 128 x 128 bf16 numbers each
    assert cached["around_model_bytes"]["latent_cache"] == 30 * 5 * 16 * 128 * 128 * 2
    assert cached["code_for"] == "asked"  # on a 40 GB card it fits as asked: its script
    assert "--cache_latents" in cached["code"]["script"]
    drop = sum(p["bytes"] for p in resident["frozen"])
    assert drop > 9 * 2**30  # T5-XXL's 4.76B parameters in bf16 among them
    for key in ("none", "every-layer"):
        assert cached["strategies"][key]["peak_bytes"] < resident["strategies"][key][
            "peak_bytes"] - drop * 0.9


def test_a_vision_preset_plans_at_its_own_resolution(capsys, shipped_only) -> None:
    data = _plan(capsys, "--model", "vit-large-patch16-224", "--tuning", "lora")
    assert data["settings"]["resolution"] == 224 and data["model"]["blocks"] == 24
    assert data["frozen"] == [] and data["code"]["script"] == ""
    assert data["recommended_row"] == "none"  # an 80 GB GPU holds it without checkpointing
    assert "get_peft_model" in data["code"]["model"]


def test_flux_qlora_at_1024_pixels_fits_a_24_gb_card(capsys, shipped_only) -> None:
    """FLUX.1 [dev]'s QLoRA on an L4 (24 GB) at 1,024 pixels, its VAE and text encoders on
    the GPU: a plan that fits, from the shipped 4-bit measurement; its base counted as the
    language planner counts QLoRA's (memory.footprint.qlora_base_bytes: every linear weight
    in 4-bit NF4, the rest fp32), the adapters fp32 with AdamW's state or SGD's."""
    from memory.footprint import qlora_base_bytes

    flags = ["--model", "flux.1-dev", "--resolution", "1024", "--gpu", "l4"]
    data = _plan(capsys, *flags, "--tuning", "qlora")
    rec, m = data["recommendation"], data["model"]
    assert rec["fits"] and rec == {**data["strategies"][data["recommended_row"]],
                                   "key": rec["key"], "alternatives": [], "take": None}
    base, trained = m["params"] - m["trainable_params"], m["trainable_params"]
    assert 0.99 * base < m["quantized_params"] < base  # Flux's linear layers: nearly all
    weights = rec["breakdown"]["weights"]
    assert weights == qlora_base_bytes(m["quantized_params"], base) + 4 * trained
    assert rec["breakdown"]["optimizer"] == 8 * trained
    sgd = _plan(capsys, *flags, "--tuning", "qlora", "--optimizer", "sgd-momentum")
    assert sgd["recommendation"]["breakdown"]["optimizer"] == 4 * trained
    lora = _plan(capsys, *flags, "--tuning", "lora")
    assert not lora["recommendation"]["fits"]  # a bf16 base: 22 GiB of weights alone
    code = data["code"]["model"]
    assert "BitsAndBytesConfig(" in code and "prepare_model_for_kbit_training" in code
    assert data["code"]["script"] == ""  # the Flux.1 DreamBooth script loads no 4-bit base


def test_the_printed_qlora_code_runs(tmp_path: Path) -> None:
    """The printed QLoRA code on a tiny Flux saved as a pipeline's transformer folder:
    diffusers' BitsAndBytesConfig loads its linear layers in 4-bit NF4, the adapters train
    in fp32, every second block is checkpointed. On a machine without a GPU, diffusers'
    GPU check is lifted (model_classes.quantized.diffusers_on_cpu: bitsandbytes runs NF4
    on the CPU); with one, the code runs as printed."""
    import bitsandbytes as bnb

    from model_classes.quantized import diffusers_on_cpu

    cfg = tiny_config("flux")
    kind = kind_for(cfg)
    torch.manual_seed(0)
    kind.build(kind.config(cfg), Variant(), blocks=6).save_pretrained(
        tmp_path / "transformer")
    settings = {"tuning": "qlora", "lora_rank": 4, "precision": "mixed"}
    text = picture_code.diffusers_code(settings, cfg, "every-n", 2, 1, str(tmp_path),
                                       "config.json", ["to_q", "to_k", "to_v", "to_out.0"])
    scope: dict = {}
    with diffusers_on_cpu():
        exec(compile(text, "plan", "exec"), scope)
    model = scope["transformer"]
    assert any(isinstance(m, bnb.nn.Linear4bit) for m in model.modules())
    trained = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trained and all("lora_" in n for n in trained)
    assert all(p.dtype == torch.float32 for p in model.parameters() if p.requires_grad)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _step(model, kind, Variant("mixed", lora_rank=4, quantized=True))
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_an_alternative_whose_measurement_fails_is_not_offered(shipped_only) -> None:
    """QLoRA's variant failing to measure (a limit hit): the alternatives that keep the
    measured variant are still planned, none fits, and no code is given."""
    from model_classes.causal_lm_config import ClassConfigError
    from planner.picture_plan import PictureInputs
    from planner.picture_report import measured_for, report

    def fail(q):
        raise ClassConfigError("cannot-build", "a limit hit")

    p = PictureInputs(preset_config("flux.1-dev"), gpu_bytes=GPUS["l4"].bytes)
    data = report(p, measured_for(p), measure=fail)
    rec = data["recommendation"]
    assert [a["changes"][0]["change"] for a in rec["alternatives"]] == [
        "encoders", "optimizer"]
    assert not any(a["fits"] for a in rec["alternatives"]) and rec["take"] is None
    assert data["code_for"] is None and not any(data["code"].values())
