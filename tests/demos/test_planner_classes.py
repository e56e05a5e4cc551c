"""The planner's layers measured on the real transformers classes (planner.class_memory):
for every family, at tiny size, the fit made under fake tensors against one real CPU
training step of the same class (per decoder layer, outside the layers, and all
together), in fp32 and bf16, with each attention kernel the class supports, full
fine-tuning and LoRA (a pairwise cover: every dtype meets every kernel and every tuning).
Then the course's formula against the measured class for the families the lessons teach,
the GPU's terms against the formula's, and the CLI on the families' full-size
config.json files."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from demos import real_models as R
from memory import footprint as P
from memory.layer import layer_bytes
from model_classes import causal_lm as CL
from model_classes import causal_lm_config as CC
from model_classes import causal_lm_step as CS
from model_classes import tiny as T
from model_classes import variant as V
from planner import class_fit as CF
from tests.demos.class_fixtures import FAMILIES, load, path, tiny

torch.set_num_threads(1)
warnings.filterwarnings("ignore")

# (dtype, kernel, LoRA rank): every pair of dtype, kernel and tuning meets once for the
# families whose features differ most; the others meet each dtype, kernel and tuning once;
# a second config of a class another family already covers (Mistral v0.3 beside v0.1,
# Phi-4 beside Phi-3, Gemma 7B beside 2B) adds one variant that class has not met yet
COVER = (("fp32", "sdpa", 0), ("bf16", "sdpa", 8), ("fp32", "eager", 8), ("bf16", "eager", 0))
SHORT_COVER = (("fp32", "sdpa", 0), ("bf16", "eager", 8))
FULL_COVER = ("llama-3.1-8b", "gemma-2-9b", "qwen3-235b-a22b", "gpt2")
SAME_CLASS = {"mistral-7b-v0.3": (COVER[1],), "phi-4": (COVER[2],), "gemma-7b": (COVER[3],)}


def _cover(name: str) -> tuple[tuple[str, str, int], ...]:
    return COVER if name in FULL_COVER else SAME_CLASS.get(name, SHORT_COVER)
POINTS = ((2, 32), (1, 12))  # 32 tokens cross the tiny 16-token window; 12 do not


def _real_per_slot(model, conf, b: int, s: int, precision: str) -> dict[int, int]:
    torch.manual_seed(0)
    ids = torch.randint(0, conf.vocab_size, (b, s))
    step = CS.measure_step(model, b, s, precision == "mixed", input_ids=ids)
    per: dict[int, int] = {}
    for (slot, _module, _kind, _padded), n in step.cpu.items():
        per[slot] = per.get(slot, 0) + n
    return per


def _predicted(fit, types, b: int, s: int) -> dict[int, int]:
    out = {i: fit.slot_bytes("first" if i == 0 else types[i], b, s) for i in range(len(types))}
    out[-1] = fit.slot_bytes("outside", b, s)
    return {k: v for k, v in out.items() if v}


@pytest.mark.heavy
@pytest.mark.parametrize("name", FAMILIES)
def test_the_fit_equals_a_real_step_of_the_class(name: str) -> None:
    conf = CC.hf_config(tiny(load(name)))
    types = CC.layer_types(conf)
    for dtype, kernel, rank in _cover(name):
        if kernel not in CC.kernels(conf):
            kernel = CC.kernels(conf)[0]
        variant = V.Variant(dtype, kernel, rank)
        fit = CF.fit_variant(conf, variant)
        torch.manual_seed(0)
        model = CL.build(conf, variant, layers=conf.num_hidden_layers)
        for b, s in POINTS:
            real = _real_per_slot(model, conf, b, s, dtype)
            predicted = _predicted(fit, types, b, s)
            assert real == predicted, (variant, b, s)  # to the byte, layer by layer


def test_a_fit_is_checked_at_a_point_it_was_not_made_from() -> None:
    """check=True measures one more size per stretch (b = 4) and holds every term to it."""
    conf = CC.hf_config(tiny(load("mistral-7b-v0.1")))
    fit = CF.fit_variant(conf, V.Variant("bf16", "sdpa"), check=True)
    assert fit.breaks == (16,)  # the window splits s


@pytest.mark.parametrize("dtype,rank", [("bf16", 8), ("mixed", 0), ("mixed", 8)])
def test_the_class_measurement_agrees_with_the_labs_own(dtype: str, rank: int) -> None:
    """demos.real_models measures the course's presets with its own hooks (one
    real step, per layer; mixed: under bf16 autocast, its weight copies apart): the
    class's fit finds the same bytes per layer."""
    arch = T.tiny_architecture("llama-3.2-1b")
    setup = R.Setup(arch, batch=2, seq=32, dtype=dtype, lora_rank=rank)
    lab = R.measure(setup)
    cfg = {**T.config_of(arch).to_dict(), "model_type": "llama"}
    conf = CC.hf_config(cfg)
    fit = CF.fit_variant(conf, V.Variant(dtype, "sdpa", rank, "all-linear"))
    types = CC.layer_types(conf)
    assert lab.per_layer == tuple(
        fit.slot_bytes("first" if i == 0 else types[i], 2, 32) for i in range(arch.layers))


@pytest.mark.parametrize("preset", ["llama-3.2-1b", "qwen2.5-7b", "gpt2"])
def test_the_course_formula_is_the_measured_class_for_the_taught_families(preset) -> None:
    """The lessons' hand-written layer (memory.layer) holds against the class, on the CPU
    (as measured) and on the GPU (the class's CPU terms converted)."""
    arch = T.tiny_architecture(preset)
    cfg = {**T.config_of(arch).to_dict(),
           "model_type": T.family(arch)}
    conf = CC.hf_config(cfg)
    for device in ("cpu", "cuda"):
        p = P.PlannerInputs(arch, seq=32, batch=2, precision="fp32", device=device,
                            fused=R.sdpa_fused(arch, device), attention="sdpa")
        fit = CF.fit_variant(conf, V.Variant("fp32", "sdpa", device=device))
        assert fit.slot_bytes("full_attention", 2, 32) == layer_bytes(p.tensors()), device


def test_gpt2_lora_in_mixed_precision_keeps_fp32_probabilities_on_a_gpu_only() -> None:
    """GPT-2's eager attention softmaxes in its input's dtype. Under autocast over a bf16
    base (LoRA) a real CPU step keeps bf16 probabilities, as the class's CPU fit and the
    course's formula for the CPU say: the CPU's autocast leaves softmax alone. CUDA's
    autocast runs softmax in fp32 (its fp32 list), and the class's GPU fit keeps them in
    fp32, as the course's formula for the GPU does (GPT-2 small at 4,096 tokens: 1.59 GB
    a layer, not the CPU's 1.19)."""
    arch = T.tiny_architecture("gpt2")
    conf = CC.hf_config({**T.config_of(arch).to_dict(), "model_type": "gpt2"})
    b, s = 2, 32
    fits = {d: CF.fit_variant(conf, V.Variant("mixed", "eager", 8, "all-linear", d))
            for d in ("cpu", "cuda")}
    for device, fit in fits.items():
        p = P.PlannerInputs(arch, seq=s, batch=b, precision="mixed", tuning="lora",
                            lora_rank=8, device=device, fused=False, attention="eager")
        assert fit.slot_bytes("full_attention", b, s) == layer_bytes(p.tensors()), device
    torch.manual_seed(0)
    model = CL.build(conf, V.Variant("mixed", "eager", 8), layers=conf.num_hidden_layers)
    real = _real_per_slot(model, conf, b, s, "mixed")
    assert real[1] == fits["cpu"].slot_bytes("full_attention", b, s)


def test_gpu_terms_differ_from_the_cpus_as_documented() -> None:
    """GPT-2 eager in fp32: CUDA keeps 1-byte dropout masks where the CPU keeps fp32
    ones; its LayerNorm statistics are fp32 on both."""
    arch = T.tiny_architecture("gpt2")
    conf = CC.hf_config({**T.config_of(arch).to_dict(), "model_type": "gpt2"})
    b, s = 2, 32
    cpu = CF.fit_variant(conf, V.Variant("fp32", "eager")).slot_bytes("full_attention", b, s)
    gpu = CF.fit_variant(conf, V.Variant("fp32", "eager", device="cuda")).slot_bytes(
        "full_attention", b, s)
    masks = arch.heads * s * s * b + 2 * b * s * arch.hidden  # attention + two residual
    assert cpu - gpu == 3 * masks


def test_a_non_decoder_model_is_refused_in_one_line() -> None:
    with pytest.raises(CC.ClassConfigError) as error:
        CC.hf_config(load("t5-small"))
    assert "\n" not in str(error.value) and "t5" in str(error.value)
    with pytest.raises(CC.ClassConfigError, match="no such model"):
        CC.hf_config({"model_type": "not-a-model"})


# ---------------------------------------------------------------- the CLI at full size

# The CLI tests here and in test_planner_class_kinds run in one test process: a full-size
# config measured there (its class and each variant's fit, seconds of CPU in a measuring
# process) is kept in that process and in its DATA_DIR for the next test that plans the
# same config (Gemma 2 twice, Qwen3-MoE twice, Qwen3 three times).
CLI_GROUP = pytest.mark.xdist_group("planner-cli")


def _plan(capsys, name: str, *extra: str) -> dict:
    from planner.cli import main

    assert main(["--config", str(path(name)), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DATA_DIR", str(tmp_path_factory.getbasetemp() / "classes"))


@CLI_GROUP
def test_mistral_v01_prices_its_window_at_4096_tokens(capsys) -> None:
    """Below its window Mistral v0.1's layer is the course's Llama layer; from 4,096 tokens
    transformers builds the window's mask, SDPA repeats k and v to every head and keeps
    the mask's additive copy in each layer: the course's padding-mask terms, to the byte."""
    from memory.hf_config import architecture

    arch = architecture(load("mistral-7b-v0.1"))
    for seq, masked in ((4095, False), (4096, True)):
        data = _plan(capsys, "mistral-7b-v0.1", "--seq", str(seq))
        assert data["class"]["window"] == 4096
        course = P.PlannerInputs(arch, seq=seq, precision="mixed", tuning="full",
                                 padding=masked)
        assert data["class"]["layer_type_bytes"]["full_attention"] == layer_bytes(
            course.tensors()), seq


@CLI_GROUP
def test_gemma2_is_planned_with_eager_attention_and_prints_no_sdpa(capsys) -> None:
    data = _plan(capsys, "gemma-2-9b", "--attention", "sdpa")
    assert data["class"]["kernel"] == "eager"
    assert data["class"]["kernels_supported"] == ["eager"]
    assert data["class"]["logit_extra_bytes"] == 4096 * 256000 * 2  # the soft-cap's tanh
    assert data["class"]["logit_extra_causes"] == ["softcap"]  # and so the CLI words it
    codes = [data["recommendation"]["code"]["huggingface"]] + [
        a["code"]["huggingface"] for a in data["recommendation"]["alternatives"]]
    assert all('attn_implementation="eager"' in c and "sdpa" not in c for c in codes)
    modules = {t["module"] for t in data["class"]["beyond_course"]}
    assert {"pre_feedforward_layernorm", "post_feedforward_layernorm"} <= modules


@CLI_GROUP
def test_the_cli_words_each_term_beyond_the_course_in_a_size_that_is_not_zero(
    capsys,
) -> None:
    """Gemma 2's input norm keeps 14,336 bytes more than the course's (1 + its
    weight, in fp32: 3,584 × 4 bytes): printed as "+14.0 KiB", never "+0.0 GiB"; a
    module the course has not reads as such, not as "0 B"."""
    from planner.cli import main

    assert main(["--config", str(path("gemma-2-9b")), "--seq", "4096"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines()
             if "than the course's formula:" in line]
    assert lines and not any("+0.0 GiB" in line or " 0 B" in line for line in lines)
    norm = next(line for line in lines if "input_layernorm (sliding_attention)" in line)
    assert "+14.0 KiB: the class keeps 112.0 MiB (28,676·b·s + 14,336 bytes)" in norm
    added = next(line for line in lines if "pre_feedforward_layernorm" in line)
    assert "+112.0 MiB" in added and "none in the course's formula" in added


@CLI_GROUP
def test_the_cli_says_when_the_class_keeps_none_of_a_course_module(capsys) -> None:
    """Qwen3-MoE's MLP is its experts: the course's dense MLP is kept by none."""
    from planner.cli import main

    assert main(["--config", str(path("qwen3-235b-a22b")), "--seq", "2048"]) == 0
    mlp = next(line for line in capsys.readouterr().out.splitlines()
               if "less than the course's formula: mlp (full_attention)" in line)
    assert "the class keeps none, the course's formula" in mlp and " 0 B" not in mlp


@CLI_GROUP
@pytest.mark.parametrize("name", ["qwen3-8b", "qwen3-235b-a22b", "gemma-3-1b",
                                  "phi-3-mini-4k", "mixtral-8x7b"])
def test_the_headline_families_are_planned(capsys, name: str) -> None:
    data = _plan(capsys, name, "--seq", "2048")
    cls = data["class"]
    assert cls["family"] == load(name)["model_type"]
    assert data["layer_activation_bytes"] > 0
    assert sum(cls["layer_types"].values()) == load(name)["num_hidden_layers"]
    if name == "gemma-3-1b":  # 5 local layers to each global one
        assert cls["layer_types"] == {"sliding_attention": 22, "full_attention": 4}
        # past its 512-token window a local layer keeps the window's mask and k and v
        # repeated to every head; a global layer runs SDPA's causal kernel without a mask
        assert (cls["layer_type_bytes"]["sliding_attention"]
                > cls["layer_type_bytes"]["full_attention"])
    if name == "qwen3-8b":
        assert "self_attn.q_norm" in {t["module"] for t in cls["beyond_course"]}
    if name in ("qwen3-235b-a22b", "mixtral-8x7b"):
        assert any(t["module"].startswith("mlp.experts") for t in cls["beyond_course"])
        assert cls["experts"]["top_k"] == load(name)["num_experts_per_tok"]
    else:
        assert cls["experts"] is None


def test_what_an_moe_layer_keeps_does_not_depend_on_the_routing() -> None:
    """Qwen3-MoE's experts (grouped_mm, transformers' default) keep b·s·top_k rows however
    the tokens are routed: a real step with the tokens spread evenly over the experts
    keeps what one with every token sent to the same two experts keeps, layer by layer;
    and the plan's fit (made under fake tensors, with random routing) is that figure."""
    conf = CC.hf_config(tiny(load("qwen3-235b-a22b")))
    variant = V.Variant("fp32", "sdpa")
    fit = CF.fit_variant(conf, variant)
    b, s = 2, 24
    experts, top_k = conf.num_experts, conf.num_experts_per_tok
    spread = (torch.arange(b * s * top_k) % experts).view(b * s, top_k)
    routes = {"balanced": spread, "worst": torch.arange(top_k).repeat(b * s, 1)}
    kept = {}
    for label, indices in routes.items():
        torch.manual_seed(0)
        model = CL.build(conf, variant, layers=conf.num_hidden_layers)
        for layer in CS.decoder_layers(model):
            gate = layer.mlp.gate
            original = gate.forward

            def forced(hidden, original=original, indices=indices):
                logits, weights, _ = original(hidden)
                return logits, weights, indices

            gate.forward = forced
        kept[label] = _real_per_slot(model, conf, b, s, "fp32")
    assert kept["balanced"] == kept["worst"]
    assert kept["worst"][2] == fit.slot_bytes("full_attention", b, s)


def test_load_libraries_imports_what_every_measurement_uses() -> None:
    """The once-per-process imports the benchmark times apart: after them, a family's first
    measurement imports only its own modeling module."""
    import sys

    CL.load_libraries()
    for name in ("peft", "transformers.masking_utils", "transformers.modeling_layers",
                 "torch._subclasses.fake_tensor"):
        assert name in sys.modules, name


def test_the_layer_input_term_is_the_layer_input_at_every_size() -> None:
    """A storage is known by its address: a freed one hands its address on, so the layers'
    inputs are held for the whole measured step. Without that, GPT-2 under LoRA counted a
    later attention tensor as the layer's input at some sizes, its fit put −359 MB under
    "input" at 4,096 tokens and a checkpointed layer's rebuild came out twice its size."""
    cfg = load("gpt2")
    hidden = cfg["n_embd"]
    fit = CF.fit_variant(CC.hf_config(cfg), V.Variant("fp32", "sdpa", 16, "all-linear", "cuda"),
                        check=True)
    for b in (1, 2, 5):
        for s in (64, 1000, 4096):
            kept = [h for h in fit.held("full_attention", b, s) if h.kind == "input"]
            assert sum(h.bytes for h in kept) == b * s * hidden * 4, (b, s, kept)
            assert all(h.bytes > 0 for h in fit.held("full_attention", b, s)), (b, s)


@pytest.mark.parametrize("name,dtype,rank", [("mistral-7b-v0.1", "bf16", 8),
                                             ("qwen3-235b-a22b", "mixed", 0)])
def test_a_first_fit_at_one_sequence_completes_to_the_whole_fit(name, dtype, rank,
                                                                monkeypatch) -> None:
    """A config's first fit is measured at b = 1 only (a third of the steps: a first plan
    that fits nowhere evaluates no other batch); it answers b = 1 as the whole fit does,
    refuses b ≥ 2, and two more batch sizes measured then make it the whole fit, term by
    term (Mistral: two stretches of s around the window; Qwen3-MoE: experts)."""
    conf = CC.hf_config(tiny(load(name)))
    variant = V.Variant(dtype, "sdpa", rank)
    whole = CF.fit_variant(conf, variant)
    steps = []
    measure = CS.measure_step
    monkeypatch.setattr(CL, "measure_step", lambda *a, **k: steps.append(a[1:3]) or
                        measure(*a, **k))
    one = CF.fit_variant(conf, variant, one_only=True)
    stretches = len(whole.breaks) + 1
    assert one.one_only and len(steps) == 3 * stretches and {b for b, _ in steps} == {1}
    slots = {t.slot for t in whole.terms}
    for s in (5, 12, 16, 31, 64):
        assert {x: one.slot_bytes(x, 1, s) for x in slots} == {
            x: whole.slot_bytes(x, 1, s) for x in slots}, s
    with pytest.raises(ValueError, match="one sequence"):
        one.slot_bytes("outside", 2, 12)
    steps.clear()
    assert CF.fit_variant(conf, variant, one=one) == whole
    assert len(steps) == 6 * stretches and {b for b, _ in steps} == {2, 3}


def test_a_configs_first_plan_measures_one_sequence_and_more_when_asked(monkeypatch) -> None:
    """The kept class (planner.class_cache): the first fit of a variant is at b = 1 and
    is written so; a plan at b = 2 measures the whole fit, which replaces it in the
    process and on disk, and equals the fit measured whole at once."""
    from planner import class_cache

    text = json.dumps(tiny(load("llama-3.1-8b")))
    arch, source = class_cache.from_config_json(text)
    p = P.PlannerInputs(arch, source=source, precision="bf16", tuning="full", seq=24)
    key = p.variant
    fit = source.fit(key)
    assert fit.one_only
    saved = json.loads(source.path.read_text(encoding="utf-8"))["fits"]
    assert saved[class_cache._variant_text(key)]["one_only"] is True
    assert P.fits(p, batch=1) and P.peak_bytes(p, batch=1) > 0
    assert source.fit(key).one_only  # b = 1 asked nothing more
    assert P.peak_bytes(p, batch=2) > P.peak_bytes(p, batch=1)  # measures the whole fit
    whole = source.fit(key)
    assert not whole.one_only and whole == CF.fit_variant(source._class().config,
                                                         source._class().variant(key))
    saved = json.loads(source.path.read_text(encoding="utf-8"))["fits"]
    assert "one_only" not in saved[class_cache._variant_text(key)]
    assert fit.slot_bytes("outside", 2, 24) == whole.slot_bytes("outside", 2, 24)
