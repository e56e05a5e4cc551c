"""AppTest of /plan: it renders from the URL, a changed GPU or strategy changes the bar,
the table and the recommendation, and the URL it writes reproduces the plan."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from i18n import units
from tests.lessons.test_lesson_pages_i18n import page_text
from tools.translations import untranslated_on_page

PAGE = "pages/plan.py"


def no_errors(at) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def chart(at) -> dict:
    return json.loads(at.get("plotly_chart")[0].proto.spec)


def table(at) -> list[dict]:
    return at.dataframe[0].value.to_dict("records")


def recommendation(at) -> str:
    return "\n".join(m.value for m in at.markdown if m.value[:2] in {"1.", "2.", "3.", "4."})


def snapshot(at) -> tuple:
    return (at.metric[0].value, at.metric[0].proto.delta, table(at), recommendation(at),
            [c.value for c in at.code])


def test_default_plan_renders_everything(app_test: Callable) -> None:
    at = app_test(PAGE)
    no_errors(at)
    assert at.metric[0].value.endswith("GiB")
    rows = table(at)
    assert [r["Checkpointing"].split(" (")[0].split(" ·")[0] for r in rows] == [
        "No checkpointing", "Selective", "Only some layers", "Two-layer segments",
        "Every layer", "Compiler memory budget"]
    spec = chart(at)
    assert {trace["name"] for trace in spec["data"]} >= {
        "Weights", "Gradients", "Optimizer state", "Activations: kept checkpoints",
        "Activations: layer being rebuilt", "Logits and loss peak",
        "Workspace and fragmentation (allowance)"}
    assert "GPU 22.5 GiB" in json.dumps(spec["layout"])  # an A10: nvidia-smi's total
    links = at.get("page_link")
    assert links and all(link.proto.label.startswith("Why: ") for link in links)
    codes = [c.value for c in at.code]
    assert any("TrainingArguments(" in c for c in codes)
    assert any("checkpoint(layer, x, use_reentrant=False)" in c for c in codes)
    text = "\n".join(m.value for m in at.markdown)
    assert "Workspace allowance" in text and "Fragmentation allowance, 5%" in text
    assert at.query_params["model"] == "llama-3.1-8b"


def test_changing_the_gpu_updates_bar_table_and_advice(app_test: Callable) -> None:
    at = app_test(PAGE)
    before = snapshot(at)
    at.radio(key="gpu").set_value("a100-80").run()
    no_errors(at)
    after = snapshot(at)
    assert at.query_params["gpu"] == "a100-80"
    assert "GPU 80.0 GiB" in json.dumps(chart(at)["layout"])
    assert after[2] != before[2]  # the table's spare/short and fit sizes
    assert after[3] != before[3]  # the recommendation
    assert after[1] != before[1]  # fits / short by


def test_gpt2_warns_beyond_its_positions(app_test: Callable) -> None:
    at = app_test(PAGE, query={"model": "gpt2", "seq": "4096"})
    assert "1,024 tokens only" in at.warning[0].value
    assert not app_test(PAGE, query={"model": "gpt2", "seq": "1024"}).warning


def lead(at) -> str:
    return "\n".join(str(e.value) for e in [*at.success, *at.warning])


def test_changing_the_strategy_updates_bar_table_and_advice(app_test: Callable) -> None:
    at = app_test(PAGE)
    peak, rows, said = at.metric[0].value, table(at), lead(at)
    assert rows[4]["Checkpointing"] == "Every layer · yours"
    at.radio(key="ckpt").set_value("none").run()
    no_errors(at)
    assert at.metric[0].value != peak
    assert table(at)[0]["Checkpointing"] == "No checkpointing · yours"
    assert table(at)[4]["Checkpointing"] == "Every layer"
    assert lead(at) != said and "Your setting (No checkpointing): short by" in lead(at)
    bars = chart(at)["data"][0]["y"]
    assert bars[0] == "Yours:<br>No checkpointing"
    at.radio(key="ckpt").set_value("some-layers").run()
    no_errors(at)
    assert at.slider(key="k").value == 16
    at.slider(key="k").set_value(4).run()
    assert at.query_params["k"] == "4"


def test_the_headroom_setting_moves_table_and_advice_alike(app_test: Callable) -> None:
    """A pasted-size plan once recommended 0.2 GiB to spare; a plan now keeps the share set
    under "Keep free" (5% by default), in its table and its recommendation alike, and the
    row marked recommended is the recommended plan."""
    at = app_test(PAGE, query={"model": "llama-3.1-8b", "tuning": "qlora"})
    no_errors(at)
    assert at.slider(key="free").value == 5
    rows = table(at)
    marked = [r for r in rows if "recommended" in r["Checkpointing"]]
    assert len(marked) == 1 and marked[0]["Fits"].startswith("✓ fits")
    assert marked[0]["Peak per GPU"] in lead(at)  # the headline's peak is the row's
    text = "\n".join(m.value for m in at.markdown)
    assert "Headroom: a plan fits only if it keeps 5% of the GPU free" in text
    assert "up to 0.0 GiB" not in text
    at.slider(key="free").set_value(30).run()
    no_errors(at)
    assert at.query_params["free"] == "30"
    tight = table(at)
    assert tight != rows
    assert any(r["Fits"].startswith("✗ only") and "less than the 30% kept free" in r["Fits"]
               for r in tight)
    assert "30% kept free" in json.dumps(chart(at)["layout"])
    marked = [r for r in tight if "recommended" in r["Checkpointing"]]
    assert all(r["Fits"].startswith("✓") for r in marked)


def test_a_shared_link_reproduces_the_plan(app_test: Callable) -> None:
    at = app_test(PAGE, query={"model": "qwen2.5-7b", "seq": "8192", "mb": "2",
                               "tuning": "qlora", "rank": "32", "gpu": "l40s", "ckpt": "two-layer",
                               "attn": "math", "loss": "chunked"})
    no_errors(at)
    first = snapshot(at)
    assert "Yours:<br>Two-layer segments" in chart(at)["data"][0]["y"][0]
    shared = {key: at.query_params[key] for key in at.query_params}
    again = app_test(PAGE, query=shared)
    no_errors(again)
    assert snapshot(again) == first


def test_custom_model_and_a_bad_one(app_test: Callable) -> None:
    at = app_test(PAGE, query={"model": "custom", "layers": "4", "hidden": "512", "heads": "8",
                               "kv": "8", "mlp": "2048", "act": "gelu", "norm": "layernorm",
                               "vocab": "1024", "gpu": "t4", "tuning": "full"})
    no_errors(at)
    assert table(at)[0]["Fits"].startswith("✓")
    bad = app_test(PAGE, query={"model": "custom", "heads": "8", "kv": "3"})
    assert bad.error and "key/value heads (3)" in bad.error[0].value


@pytest.mark.parametrize("code", ["en", "de"])
def test_a_pasted_config_json_plans_and_a_bad_one_names_the_field(app_test: Callable,
                                                                  code: str) -> None:
    from transformers import Qwen2Config

    at = app_test(PAGE, query={"model": "config", "gpu": "h100", "tuning": "full",
                               "lang": code})
    assert at.error and not at.exception  # nothing pasted yet: asks for it
    at.text_area(key="plan_config_json").set_value(Qwen2Config().to_json_string()).run()
    no_errors(at)
    assert len(table(at)) == 6 and recommendation(at)
    assert any("Qwen2DecoderLayer" in c.value or "AutoModelForCausalLM" in c.value
               for c in at.code)
    at.text_area(key="plan_config_json").set_value('{"model_type": "llama"}').run()
    assert at.error and "hidden_size" in at.error[0].value
    at.text_area(key="plan_config_json").set_value('{"model_type": "t5"}').run()
    assert at.error and "t5" in at.error[0].value


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_a_pasted_gemma2_config_is_planned_on_its_class_with_eager_attention(
        app_test: Callable, code: str) -> None:
    """The class's section: the family, the kernel it supports, the modules it keeps
    beyond the course's formula; the code loads it with eager attention, never SDPA."""
    from tests.demos.class_fixtures import load, tiny

    at = app_test(PAGE, query={"model": "config", "gpu": "h100", "tuning": "full",
                               "lang": code})
    # its keys at a small size (quick to measure), wide enough for 4-digit formula terms
    text = json.dumps({**tiny(load("gemma-2-9b")), "hidden_size": 512})
    at.text_area(key="plan_config_json").set_value(text).run()
    no_errors(at)
    shown = page_text(at)
    assert "gemma2" in shown and "attn_implementation=\"eager\"" in shown
    modules = {str(v) for frame in at.dataframe for v in frame.value.to_numpy().ravel()}
    assert {"post_feedforward_layernorm", "pre_feedforward_layernorm"} <= modules
    terms = next(f.value for f in at.dataframe
                 if "pre_feedforward_layernorm" in f.value.to_numpy().ravel())
    sizes = [str(v) for v in terms.iloc[:, 2:5].to_numpy().ravel()]  # class, course, diff.
    assert sizes and not any(re.fullmatch(r"[+−]?0[.,]0 GiB", s) for s in sizes), sizes
    formulas = " ".join(str(v) for v in terms.iloc[:, 5])  # "4,100·b·s" in en, "4.100" in de
    grouped = re.findall(r"\d[.,]\d{3}(?!\d)", formulas)
    mark = units.number(1000, locale=code)[1]
    assert grouped and all(g[1] == mark for g in grouped), formulas
    assert all("sdpa" not in c.value for c in at.code)
    assert code == "en" or not untranslated_on_page(shown, code)


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_a_pasted_deepseek_config_under_qlora_is_measured_by_layer_kind(
        app_test: Callable, code: str) -> None:
    """QLoRA on a pasted config is measured on its class with 4-bit layers (said on the
    page), and a model that mixes dense and MoE layers shows each kind as a layer type."""
    from tests.demos.class_fixtures import load, tiny

    at = app_test(PAGE, query={"model": "config", "gpu": "h100", "tuning": "qlora",
                               "lang": code})
    text = json.dumps(tiny(load("deepseek-v2-lite")))  # its keys at a tiny size
    at.text_area(key="plan_config_json").set_value(text).run()
    no_errors(at)
    shown = page_text(at)
    assert "deepseek_v2" in shown and "prepare_model_for_kbit_training" in shown
    assert "+dense_mlp" in shown
    kinds = {str(v) for frame in at.dataframe for v in frame.value.to_numpy().ravel()}
    assert {"full_attention+dense_mlp", "full_attention"} <= kinds
    if code == "en":  # what it keeps around the loss, named by its cause alone
        assert "16-bit copy of the fp32 output head" in shown and "soft-cap" not in shown
    assert code == "en" or not untranslated_on_page(shown, code)


PLANS = {  # every part of the page: a recommendation with remedies, adapters, sharding...
    "default": {},
    "remedies": {"model": "llama-3.1-70b", "tuning": "full", "gpu": "t4", "mb": "4"},
    "budget": {"model": "gpt2", "seq": "4096", "ckpt": "budget", "shards": "4",
               "tuning": "qlora", "loss": "chunked", "attn": "math"},
    "custom": {"model": "custom", "ckpt": "some-layers", "gpu": "custom"},
    "bad": {"model": "custom", "heads": "8", "kv": "3"},
}


@pytest.mark.parametrize("code", ["en", "de", "vi"])
@pytest.mark.parametrize("plan", list(PLANS))
def test_plan_page_speaks_the_language(app_test: Callable, plan: str, code: str) -> None:
    at = app_test(PAGE, query={**PLANS[plan], "lang": code})
    assert not at.exception, [e.value for e in at.exception]
    text = "\n".join([page_text(at), *(frame.value.to_csv() for frame in at.dataframe)])
    if code != "en":
        assert untranslated_on_page(text, code) == []
    if plan == "bad":
        return
    assert chart(at)["layout"]["separators"] == {"en": ".,"}.get(code, ",.")
    peak = at.metric[0].value
    assert peak.endswith(" GiB")
    assert peak.removesuffix(" GiB")[-2] == {"en": "."}.get(code, ",")  # 1,299.0 / 1.299,0
    if code == "de":
        assert "Spitzenspeicher pro GPU" in at.metric[0].label
        assert list(table(at)[0])[0] == "Checkpointing" and "Spitze pro GPU" in table(at)[0]


def test_home_and_lesson_7_point_to_the_planner(app_test: Callable) -> None:
    from lessons.document import load
    from lessons.values import lesson_values
    from ui.navigation import PAGES as APP_PAGES

    assert "plan" in {spec.url_path for spec in APP_PAGES}
    for code in ("en", "de", "vi"):
        text = "\n".join(b.text for b in load("in-practice", lesson_values(code), code).blocks)
        assert f"](/plan?lang={code})" in text
    at = app_test("pages/home.py", query={"lang": "de"}, timeout=120)
    links = [link.proto for link in at.get("page_link")
             if link.proto.label.startswith("Das eigene Training planen: die Checkpointing")]
    assert len(links) == 1 and links[0].page.rstrip("/").endswith("plan"), links


def test_the_choices_table_keeps_each_rows_name_in_view(app_test: Callable) -> None:
    """The German table is wider than the page: its names column is pinned (it stays
    while the rest scrolls sideways) and wide enough for "Only some layers (the first 29
    layers)"; the fits column keeps its verdict on a phone."""
    at = app_test(PAGE, query={"lang": "de"})
    no_errors(at)
    config = json.loads(at.dataframe[0].proto.columns)
    (name,) = [key for key in config if key.startswith("Checkpointing")]
    assert config[name]["pinned"] is True and config[name]["width"] == "large"
    (fits,) = [key for key in config if key.startswith("Passt")]
    assert config[fits]["width"] == "medium"


def test_many_gpus_one_plan_in_headline_layout_table_and_code(app_test: Callable) -> None:
    """Llama 3.1 70B, full fine-tune with AdamW: on 8 H100s no layout fits, and the page
    says so, with the layouts it tried (on 1 node, in the singular) and the fewest GPUs
    that fit as a choice, whose script is the code. With the learner's own layout
    (tensor 8, sequence parallelism, 2 stages) on 16, the headline, the layout's table
    (the recommended row marked) and the PyTorch code are that layout's plan."""
    from memory import parallel as M
    from memory.architectures import PRESETS
    from memory.footprint import PlannerInputs
    from memory.hardware import GPUS
    from planner import parallel_plan as PP
    from planner import recommend as R
    from ui.plan_words import gib

    query = {"model": "llama-3.1-70b", "seq": "4096", "gpu": "h100", "shards": "8",
             "tuning": "full", "ckpt": "every-layer", "free": "5"}
    at = app_test(PAGE, query=query)
    no_errors(at)
    shown = page_text(at)
    assert "Nothing fits on 8 GPUs as you set the task. What would:" in shown
    assert "No layout of 8 GPUs fits this task" in shown and "8 GPUs on 1 node." in shown
    p = PlannerInputs(PRESETS["llama-3.1-70b"], seq=4096, shards=8,
                      gpu_bytes=GPUS["h100"].bytes, headroom=0.05)
    rec = R.plan(p).recommendation
    assert rec.gpus > 8 and f"--num_processes {rec.gpus}" in at.code[0].value
    assert "adamw_8bit" not in at.code[0].value
    own = app_test(PAGE, query={**query, "shards": "16", "layout": "own", "tp": "8",
                                "sp": "on", "pp": "2"})
    no_errors(own)
    layout = PP.with_dp(M.Layout(tp=8, sp=True, pp=2, microbatches=8), 16)
    rec = R.plan(p.with_(shards=16), layout).recommendation
    assert rec.layout.tp == 8 and rec.layout.pp == 2 and rec.fits
    shown = page_text(own)
    assert f"Layout: Tensor 8 x context 1 x pipeline 2 x FSDP {rec.layout.dp}" in shown
    rows = PP.gpu_rows(rec.inputs, rec.layout)
    assert list(own.dataframe[-1].value.iloc[:, 2]) == [gib(r.peak) for r in rows.values()]
    assert sum("(recommended)" in name for name in own.dataframe[-1].value.iloc[:, 0]) == 1
    assert any("Schedule1F1B" in c.value for c in own.code)
    bad = app_test(PAGE, query={**query, "layout": "own", "tp": "8", "cp": "4", "pp": "4"})
    assert any("cannot be split" in e.value for e in bad.error)


@pytest.mark.parametrize("code", ["de", "vi"])
def test_many_gpus_section_speaks_the_language(app_test: Callable, code: str) -> None:
    at = app_test(PAGE, query={"model": "llama-3.1-70b", "seq": "8192", "shards": "16",
                               "layout": "own", "tp": "2", "pp": "2", "lang": code})
    no_errors(at)
    shown = page_text(at)
    assert ("Über 16 GPUs" if code == "de" else "Trên 16 GPU") in shown
    assert not untranslated_on_page(shown, code)


def test_a_mixture_of_experts_config_splits_its_experts_over_the_gpus(app_test: Callable
                                                                     ) -> None:
    """A pasted Mixtral config (its keys at a tiny size: 4 experts, top-2) on 4 GPUs with
    expert parallel 2: each GPU holds 2 of the 4 experts of a layer, sharded over the other
    2 GPUs (planner.parallel_plan.expert_split); a dense model offers no such control."""
    from tests.demos.class_fixtures import load, tiny

    at = app_test(PAGE, query={"model": "config", "gpu": "h100", "tuning": "full",
                               "shards": "4", "layout": "own", "ep": "2"})
    at.text_area(key="plan_config_json").set_value(json.dumps(tiny(load("mixtral-8x7b"))))
    at = at.run()
    no_errors(at)
    shown = page_text(at)
    assert "Experts: 2 of the 4 of each layer on every GPU (expert parallel 2)" in shown
    assert "sharded over 2 GPUs" in shown and "balanced routing" in shown
    # what the printed code does with the experts, and how that differs from the figures
    assert "stays whole on every tensor-parallel GPU" in shown
    assert "FSDP gathers all the experts of a layer at once" in shown and "1/2" in shown
    dense = app_test(PAGE, query={"model": "llama-3.1-8b", "shards": "4", "layout": "own"})
    assert not [box for box in dense.selectbox if box.label == "Expert parallel"]
    assert "stays whole on every tensor-parallel GPU" not in page_text(dense)


def test_each_widget_carries_its_current_value_as_its_default(app_test: Callable) -> None:
    """A widget seeded from the link (through Session State) and drawn again in a later run
    carries its value as the page's default too, not a slider's minimum or a radio's
    first option: a browser that draws it afresh shows the value it had."""
    at = app_test(PAGE, query={"model": "llama-3.1-70b", "seq": "8192", "gpu": "h100",
                               "tuning": "full", "accum": "16"})
    at.radio(key="shards").set_value("16").run()
    no_errors(at)
    for key, value in {"seq": 8192, "accum": 16, "mb": 1, "free": 5}.items():
        assert at.slider(key=key).value == value
        assert list(at.slider(key=key).proto.default) == [value], key
    for key, value in {"gpu": "h100", "tuning": "full", "shards": "16"}.items():
        radio = at.radio(key=key)
        assert radio.value == value
        assert radio.options[radio.proto.default] == radio.format_func(value), key


def test_a_multiselect_carries_its_current_value_as_its_default(app_test: Callable) -> None:
    at = app_test("pages/demos/compare.py",
                  query={"strategy": "every-layer", "layers": "2", "hidden": "64", "heads": "2",
                         "seq": "64", "batch": "1", "vocab": "256"})
    no_errors(at)
    picker = at.multiselect(key="strategy")
    assert picker.value == ["every-layer"]
    assert [picker.options[i] for i in picker.proto.default] == [
        picker.format_func("every-layer")]
