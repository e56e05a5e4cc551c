"""The planner's formulas: published anchors, the presets' parameter counts, monotonicity,
the fit search and the recommendation."""

from __future__ import annotations

import pytest

from lessons.catalog import LESSON_PATHS
from lessons.checkpoint_math import format_gb
from lessons.values import SEED, lesson_values
from memory import footprint as P
from memory import hardware, worked_examples
from memory import layer as layer_model
from memory.architectures import PRESETS, Architecture, custom
from planner import recommend as recommend_module

GB = 1e9


def gpt_layer(hidden: int, heads: int, layers: int = 1, vocab: int = 50_257) -> Architecture:
    """A GPT-2/3-style layer: LayerNorm, 4h GELU MLP, dropout."""
    return custom(layers, hidden, heads, heads, 4 * hidden, "gelu", "layernorm", vocab, False)


@pytest.mark.parametrize("key", list(PRESETS))
def test_presets_have_their_published_parameter_count(key: str) -> None:
    arch = PRESETS[key]
    assert arch.params() == arch.published_params
    assert arch.source.startswith("https://huggingface.co/")


@pytest.mark.parametrize("b, s, h, a", [(2, 1024, 2048, 16), (2, 2048, 12288, 96),
                                        (4, 512, 768, 12)])
def test_korthikanti_34_sbh_with_flash_and_5as_over_h_without(b, s, h, a) -> None:
    arch = gpt_layer(h, a)
    assert worked_examples.korthikanti_bytes(arch, b, s, fused=True) == 34 * s * b * h
    unfused = worked_examples.korthikanti_bytes(arch, b, s, fused=False)
    assert unfused == s * b * h * (34 + 5 * a * s / h)


def test_the_course_worked_example() -> None:
    """2B-class model, 28 layers, h 2,048, batch 2 × 1,024, vocabulary 248,000:
    all kept ~4.0 GB, checkpoints ~0.23 GB, one layer rebuilt ~0.14 GB, logits ~2.0 GB."""
    b, s, h, n, a, v = (SEED[k] for k in ("batch", "seq", "hidden", "layers", "heads", "vocab"))
    arch = gpt_layer(h, a, layers=n, vocab=v)
    # the lesson's 16-bit activations (under autocast over fp32 weights the residual
    # stream, and so each checkpoint, would be fp32)
    p = P.PlannerInputs(arch, seq=s, batch=b, precision="bf16")
    values = lesson_values()
    all_kept = n * worked_examples.korthikanti_bytes(arch, b, s, fused=True)
    assert format_gb(all_kept) == values["seed_all_kept_gb"] == "4.0 GB"
    every = P.activations(p, "every-layer")
    assert format_gb(every.kept) == values["seed_inputs_gb"] == "0.23 GB"
    one_layer = layer_model.layer_bytes(p.tensors())
    assert format_gb(one_layer) == values["seed_one_layer_gb"] == "0.14 GB"
    # rebuilt on top of the checkpoints: the layer less its input, which is a checkpoint
    assert every.rebuilt == one_layer - 2 * b * s * h
    one_fp32_logits = P.logits_peak_bytes(p.with_(precision="fp32")) / P.LOSS_FP32_TENSORS
    assert format_gb(one_fp32_logits) == values["seed_logits_gb"] == "2.0 GB"


def test_hugging_face_bytes_per_parameter() -> None:
    arch = PRESETS["llama-3.1-8b"]
    for precision, expected in (("mixed", 18), ("fp32", 16)):
        state = P.state_bytes(P.PlannerInputs(arch, precision=precision))
        per_param = (state["weights"] + state["gradients"] + state["optimizer"]) / arch.params()
        assert per_param == expected


def test_an_8b_model_in_bf16_weighs_about_16_gb() -> None:
    weights = P.state_bytes(P.PlannerInputs(PRESETS["llama-3.1-8b"], precision="bf16"))["weights"]
    assert round(weights / GB) == 16


def test_lora_trains_peft_s_count_for_llama_8b_rank_16() -> None:
    """PEFT reports 41,943,040 trainable parameters for r=16 on every linear layer."""
    p = P.PlannerInputs(PRESETS["llama-3.1-8b"], tuning="lora", lora_rank=16)
    assert P.adapter_params(p) == 41_943_040
    lora, qlora = P.state_bytes(p), P.state_bytes(p.with_(tuning="qlora"))
    assert qlora["weights"] < lora["weights"] / 2  # 4-bit linears, 16-bit embeddings
    assert lora["gradients"] == 41_943_040 * 4


def test_sharding_divides_the_state_and_gathers_two_layers_and_the_head() -> None:
    arch = PRESETS["llama-3.1-70b"]
    p = P.PlannerInputs(arch)
    one, eight = P.state_bytes(p), P.state_bytes(p.with_(shards=8))
    assert eight["optimizer"] == one["optimizer"] / 8
    assert eight["gradients"] == one["gradients"] / 8
    layer = arch.block_params() * 2
    head = (arch.vocab * arch.hidden + arch.hidden) * 2  # bf16, whole from loss to backward
    assert eight["weights"] == pytest.approx(one["weights"] / 8 + (2 * layer + head) * 7 / 8)


def test_peak_grows_with_batch_and_sequence_and_falls_with_shards() -> None:
    p = P.PlannerInputs(PRESETS["llama-3.2-1b"], seq=2048)
    for strategy in P.STRATEGIES:
        peaks = [P.peak_bytes(p, strategy, batch=b) for b in (1, 2, 4, 8)]
        assert peaks == sorted(peaks) and len(set(peaks)) == 4
        peaks = [P.peak_bytes(p, strategy, seq=s) for s in (512, 1024, 2048)]
        assert peaks == sorted(peaks) and len(set(peaks)) == 3
    shards = [P.peak_bytes(p.with_(shards=n)) for n in (1, 2, 4, 8)]
    assert shards == sorted(shards, reverse=True)


def test_strategies_order_in_memory_and_compute() -> None:
    p = P.PlannerInputs(PRESETS["llama-3.1-8b"], some_layers=10, fused=False)
    act = {s: P.activations(p, s) for s in P.STRATEGIES}
    held = {s: a.kept + a.rebuilt for s, a in act.items()}
    assert held["every-layer"] < held["some-layers"] < held["none"]
    assert held["selective"] < held["none"]
    assert act["none"].recompute_flops == 0
    assert act["some-layers"].recompute_flops == act["every-layer"].recompute_flops * 10 / 32
    assert act["selective"].recompute_flops < act["some-layers"].recompute_flops
    share = P.strategy_row(p, "every-layer").recompute_share
    # one more forward of the layers less their down projections (torch's early stop), not
    # of the LM head
    rerun = (layer_model.layer_flops(p.arch, 1, 4096)
             - layer_model.linear_flops(p.arch, 1, 4096, "down"))
    assert share == pytest.approx(32 * rerun / P.step_flops(p))
    assert 0.2 < share < 0.25 < 1 / 3


def test_two_layer_segments_win_only_in_deep_models() -> None:
    """A Llama layer keeps ~25 inputs' worth in 16-bit: two-layer segments keep less from
    ~50 layers. Under autocast over fp32 weights (mixed) the inputs are fp32, a layer keeps
    about half as many inputs' worth, and two-layer segments win at 32 layers already."""
    for key, deep in (("llama-3.1-70b", True), ("llama-3.1-8b", False)):
        for precision in ("bf16", "mixed"):
            p = P.PlannerInputs(PRESETS[key], precision=precision)
            two, every = P.activations(p, "two-layer"), P.activations(p, "every-layer")
            wins = two.kept + two.rebuilt < every.kept + every.rebuilt
            assert wins is (deep or precision == "mixed")


def test_selective_saves_nothing_with_a_fused_kernel() -> None:
    p = P.PlannerInputs(PRESETS["gpt2"], seq=1024, batch=8)
    assert not P.strategy_row(p, "selective").saves
    assert P.activations(p, "selective").recompute_flops == 0
    math = P.strategy_row(p.with_(fused=False), "selective")
    assert math.saves and 0 < math.recompute_share < 0.1


def test_compiler_budget_interpolates_between_inputs_only_and_the_default() -> None:
    """torch's partitioner: 0 saves only the graph's inputs (a layer compiled alone: its
    input), 1 its default choice (here the plain layer), between the two sizes linearly."""
    p = P.PlannerInputs(PRESETS["llama-3.1-8b"])
    fractions = (0.0, 0.25, 0.5, 0.75, 1.0)
    kept = [P.activations(p.with_(budget=f), "budget").kept for f in fractions]
    assert kept == sorted(kept)
    lo, hi = P.activations(p, "every-layer").kept, P.activations(p, "none").kept
    assert kept[0] == lo and kept[-1] == hi
    biggest = max(t.bytes for t in p.tensors()) * p.arch.layers
    for f, k in zip(fractions, kept, strict=True):  # within one tensor of the target
        assert lo + f * (hi - lo) - biggest <= k <= lo + f * (hi - lo)
    # not a share of the whole layer: half-way between input-only (100) and all (200)
    layer = (layer_model.Held("input", 100, "input"),
             *(layer_model.Held(f"t{i}", 10, "matmul", flops=float(i)) for i in range(10)))
    assert P._budget_kept(layer, 0.5, 100) == (150, sum(range(5)))
    assert P._budget_kept(layer, 0.0, 100)[0] == 100 and P._budget_kept(layer, 1.0, 100)[0] == 200


def test_gpu_presets_are_nvidia_smi_totals() -> None:
    assert hardware.GPUS["a10"].bytes / hardware.GiB == pytest.approx(22.49, abs=0.01)
    assert hardware.GPUS["l40s"].bytes / hardware.GiB == pytest.approx(44.99, abs=0.01)
    gpus, gib = hardware.GPUS, hardware.GiB
    assert gpus["t4"].bytes == 15 * gib and gpus["a100-80"].bytes == 80 * gib
    assert all(gpu.bytes / gib <= float(gpu.name.split()[-2]) for gpu in gpus.values())


def test_fit_search_finds_the_edge() -> None:
    p = P.PlannerInputs(PRESETS["llama-3.1-8b"], seq=1024, tuning="lora",
                        gpu_bytes=24 * hardware.GiB)
    for strategy in ("none", "every-layer"):
        b = P.largest_batch(p, strategy)
        assert P.fits(p, strategy, batch=b) and not P.fits(p, strategy, batch=b + 1)
        s = P.longest_seq(p, strategy)
        assert P.fits(p, strategy, seq=s) and not P.fits(p, strategy, seq=s + 1)
    assert P.largest_batch(p, "every-layer") > P.largest_batch(p, "none")


def test_plan_rows_and_breakdown_agree() -> None:
    p = P.PlannerInputs(PRESETS["llama-3.2-1b"], gpu_bytes=24 * hardware.GiB, strategy="two-layer")
    plan = recommend_module.plan(p)
    assert [r.strategy for r in plan.rows] == list(P.STRATEGIES)
    row = next(r for r in plan.rows if r.strategy == "two-layer")
    assert row.peak == plan.breakdown.total
    assert plan.spare == p.gpu_bytes - plan.breakdown.total
    assert plan.breakdown.workspace > hardware.WORKSPACE_BYTES
    ids = {a.id for a in plan.approximations}
    assert {"workspace", "fragmentation", "peaks-added"} <= ids


def _lessons_are_real(rec: recommend_module.Recommendation) -> None:
    for step in rec.steps:
        assert step.lesson in LESSON_PATHS


def test_recommends_no_checkpointing_when_memory_is_ample() -> None:
    rec = recommend_module.recommend(P.PlannerInputs(PRESETS["gpt2"], seq=1024, batch=2,
                                      gpu_bytes=80 * hardware.GiB))
    assert rec.strategy == "none" and rec.fits
    assert rec.steps[0].reason == "fits-without-checkpointing"
    _lessons_are_real(rec)


def test_recommends_the_cheapest_checkpointing_that_fits() -> None:
    base = P.PlannerInputs(PRESETS["llama-3.2-1b"], seq=4096, batch=8, chunked_loss=True,
                           gpu_bytes=80 * hardware.GiB)
    assert not P.fits(base, "none")
    rec = recommend_module.recommend(base)
    assert rec.fits and rec.strategy == "some-layers"
    k = rec.steps[0].value
    assert P.fits(base.with_(some_layers=k), "some-layers")
    assert not P.fits(base.with_(some_layers=k - 1), "some-layers")
    _lessons_are_real(rec)


def test_when_nothing_fits_the_other_tools_come_in_order() -> None:
    """Every layer first, then the tools that keep the task in the course's order, each
    lowering the peak; then a choice that changes the task (more GPUs first)."""
    p = P.PlannerInputs(PRESETS["llama-3.1-70b"], gpu_bytes=80 * hardware.GiB, batch=4)
    assert not P.fits(p, "every-layer")
    rec = recommend_module.recommend(p)
    actions = [s.action for s in rec.steps]
    assert rec.fits and actions[0] == "every-layer"
    order = ["every-layer", "fused-attention", "chunked-loss", "smaller-batch", "adamw-8bit",
             "lora", "qlora", "more-gpus"]
    kept = [a for a in actions if not rec.steps[actions.index(a)].choice]
    assert kept == sorted(kept, key=order.index)
    peaks = [s.peak for s in rec.steps]
    assert peaks == sorted(peaks, reverse=True)
    assert [s.action for s in rec.choices] == ["more-gpus"]
    assert P.fits(rec.inputs, rec.strategy)
    _lessons_are_real(rec)


def test_a_hopeless_plan_says_so() -> None:
    p = P.PlannerInputs(PRESETS["llama-3.1-70b"], gpu_bytes=1 * hardware.GiB, tuning="qlora",
                        optimizer="adamw-8bit", chunked_loss=True)
    rec = recommend_module.recommend(p, max_shards=1)
    assert not rec.fits and not rec.steps[-1].fits and not rec.alternatives


def test_the_lessons_llama_constant_is_the_planners() -> None:
    """Lesson 4's constant and its parts come from this tensor list: 49·s·b·h for Llama 3.1
    8B in bf16 with a fused kernel, the b·s-sized statistics (1/rms, log-sum-exp) aside."""
    arch = PRESETS["llama-3.1-8b"]
    values = lesson_values()
    parts = worked_examples.constant_parts(arch)
    assert values["llama_constant"] == format(sum(parts.values()), "g") == "49"
    assert (values["llama_norm_units"], values["llama_attention_units"],
            values["llama_mlp_units"]) == ("16", "5", "28")
    p = P.PlannerInputs(arch, seq=4096, batch=1, precision="bf16")
    sbh = p.seq * p.batch * arch.hidden
    assert layer_model.layer_bytes(p.tensors()) / sbh == pytest.approx(49.03, abs=0.005)
    assert worked_examples.korthikanti_bytes(arch, 1, 4096, fused=True) == 49 * sbh


def test_the_planning_quiz_items_premises_hold() -> None:
    """The quiz's planning items state what the planner finds: LoRA on an A100 40 GB does
    not fit without checkpointing, fits with every layer, and the recommendation is the
    fewest layers, which recompute less; full fine-tuning's state alone exceeds 80 GB."""
    ex = worked_examples.course_examples()
    assert not ex["lora_fits_none"] and ex["lora_fits_every"]
    lora = P.PlannerInputs(PRESETS["llama-3.1-8b"], seq=4096, batch=1, tuning="lora",
                           gpu_bytes=hardware.GPUS["a100-40"].bytes)
    rec = recommend_module.recommend(lora)
    assert [s.action for s in rec.steps] == ["some-layers"]
    assert rec.steps[0].value == ex["lora_some_layers"]
    assert 0 < ex["lora_some_layers"] < ex["layers"]
    assert ex["lora_some_extra"] < ex["lora_every_extra"]
    assert ex["state_bytes"] > hardware.GPUS["h100"].bytes > ex["none_bytes"]
    assert ex["state_bytes"] == 18 * PRESETS["llama-3.1-8b"].params()  # HF's 18 B/param
    values = lesson_values()
    assert values["plan_some_layers"] == str(ex["lora_some_layers"])
    assert values["plan_none_gb"] == format_gb(ex["none_bytes"])


def test_the_pytorch_code_says_what_of_the_plan_it_leaves_out() -> None:
    """The PyTorch tab of a plan with a chunked loss or adapters showed only the
    checkpointed loop and did not say so."""
    from planner.torch_code import left_out, torch_code

    arch = PRESETS["llama-3.1-8b"]
    plain = P.PlannerInputs(arch, tuning="full")
    assert left_out(plain) == [] and not torch_code(plain).startswith("# This code")
    plan = P.PlannerInputs(arch, tuning="qlora", chunked_loss=True, optimizer="adamw-8bit",
                           shards=2)
    assert left_out(plan) == ["qlora", "chunked-loss", "adamw-8bit", "fsdp"]
    text = torch_code(plan)
    assert text.startswith("# This code is the plan's checkpointing only. It leaves out:")
    for name in ("BitsAndBytesConfig", "use_liger_kernel", "AdamW8bit", "FSDP"):
        assert name in text.split("class ")[0]
    selective = torch_code(plan.with_(strategy="selective", tuning="lora"))
    assert selective.startswith("# This code") and "LoraConfig" in selective
    compiled = compile(torch_code(plan.with_(tuning="lora")), "<plan>", "exec")
    assert compiled is not None
    assert "Er lässt weg:" in torch_code(plan, "de")
