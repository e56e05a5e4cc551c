"""The lab of mistakes: each case's symptom really happens the wrong way and is gone the
fixed way, measured on this run; the records round-trip through the result store's JSON;
the CLI prints them."""

from __future__ import annotations

import json

import pytest

from demos.cli import main
from demos.mistakes import (
    CASE_CONFIG,
    CASES,
    PEAK_TOLERANCE,
    SYMPTOM_TITLES,
    CaseResult,
    Symptom,
    cases_for,
    run_case,
)
from serving.jobs import Job, decode_result, encode_result


@pytest.fixture(scope="module")
def results() -> dict[str, CaseResult]:
    return {case: run_case(case) for case in CASES}


def test_every_case_shows_its_symptom_wrong_and_not_fixed(results) -> None:
    for case, r in results.items():
        assert r.wrong_shows, case
        assert not r.fixed_shows, case


def test_whole_model_one_segment_keeps_the_peak_and_pays_a_forward(results) -> None:
    r = results["whole-model-one-segment"]
    plain, wrong, fixed = r.plain.peak_bytes, r.wrong.peak_bytes, r.fixed.peak_bytes
    assert abs(wrong - plain) <= PEAK_TOLERANCE * plain
    assert fixed < 0.7 * plain  # per-layer checkpoints do lower it
    # a whole extra forward: backward is about twice the forward, so about a third more
    extra = (r.wrong.flops - r.plain.flops) / r.plain.flops
    assert 0.25 < extra <= 0.34
    assert r.wrong.max_grad_diff == 0.0 and r.fixed.max_grad_diff == 0.0


def test_reentrant_frozen_inputs_leaves_block_weights_without_gradients(results) -> None:
    r = results["reentrant-frozen-inputs"]
    assert r.plain.none_grads == ()
    assert {n.split(".")[0] for n in r.wrong.none_grads} == {"blocks"}
    assert len(r.wrong.none_grads) == CASE_CONFIG.layers * 12  # every weight and bias
    assert r.wrong.warning == "None of the inputs have requires_grad=True. Gradients will be None"
    assert r.fixed.none_grads == () and r.fixed.warning is None
    assert r.fixed.max_grad_diff == 0.0


def test_dropout_without_rng_state_changes_gradients_default_is_bitwise(results) -> None:
    r = results["dropout-without-rng"]
    assert r.wrong.max_grad_diff > 1e-4
    assert r.fixed.max_grad_diff == 0.0
    assert r.wrong.loss == r.plain.loss  # the forward is the same; backward is not


def test_batchnorm_running_statistics_updated_twice(results) -> None:
    r = results["batchnorm-in-checkpoint"]
    layers = CASE_CONFIG.layers
    assert (r.plain.statistic, r.wrong.statistic, r.fixed.statistic) == (layers, 2 * layers,
                                                                         layers)
    assert r.wrong.statistic_diff > 0 and r.fixed.statistic_diff == 0.0


def test_side_effects_happen_twice(results) -> None:
    r = results["side-effects-twice"]
    assert r.wrong.statistic == 2 * r.plain.statistic
    assert r.fixed.statistic == r.plain.statistic


def test_activations_not_the_problem_peak_at_the_optimizer(results) -> None:
    r = results["activations-not-the-problem"]
    total = [(m.peak_bytes + m.parameter_bytes) for m in (r.plain, r.wrong, r.fixed)]
    # the peak above the weights holds their gradients and AdamW's two moments
    assert r.plain.peak_bytes > 3 * r.plain.parameter_bytes * 0.95
    assert abs(total[1] - total[0]) <= PEAK_TOLERANCE * total[0]
    assert total[2] < 0.5 * total[0]
    assert r.wrong.peak_phase == "optimizer"


def test_no_grad_checkpoint_saves_nothing_and_warns(results) -> None:
    r = results["no-grad-or-eval"]
    assert r.wrong.peak_bytes == r.plain.peak_bytes
    assert "requires_grad=True" in r.wrong.warning
    assert r.fixed.warning is None and r.fixed.error is None


def test_recompute_mismatch_raises_checkpoint_error(results) -> None:
    r = results["recompute-mismatch"]
    assert r.wrong.error_type == "CheckpointError"
    assert "different metadata" in r.wrong.error
    assert r.fixed.error is None and r.fixed.max_grad_diff == 0.0


def test_use_cache_with_checkpointing_is_switched_off_with_a_warning(results) -> None:
    r = results["use-cache-with-checkpointing"]
    assert r.plain.statistic == CASE_CONFIG.seq_len  # without checkpointing: a full cache
    assert r.plain.warning is None
    assert r.wrong.statistic == 0  # switched off by the library ...
    assert "incompatible with gradient checkpointing" in r.wrong.warning  # ... which says so
    assert r.fixed.statistic == 0 and r.fixed.warning is None


def test_peft_kbit_helper_turns_on_the_reentrant_mode(results) -> None:
    r = results["peft-kbit-reentrant"]
    layers = r.config["layers"]
    # counted in the step's autograd graph: one reentrant checkpoint per decoder layer
    assert (r.plain.statistic, r.wrong.statistic, r.fixed.statistic) == (0, layers, 0)
    assert "use_reentrant parameter should be passed explicitly" in r.wrong.warning
    # the fixed way says nothing: transformers' deprecation notes on the methods peft's
    # helper calls inside come whichever way the mode is passed, and the wrong way lists them
    assert r.fixed.warning is None
    assert any("deprecat" in line.lower() for line in r.wrong.warning.splitlines()[1:])
    assert r.wrong.max_grad_diff == r.fixed.max_grad_diff == 0.0  # LoRA still trains


def test_peft_passes_empty_kwargs_and_transformers_fills_only_none() -> None:
    """The two lines the case rests on, read in the installed libraries."""
    import inspect

    from peft.utils import other
    from transformers import modeling_utils

    peft_source = inspect.getsource(other.prepare_model_for_kbit_training)
    assert "gradient_checkpointing_kwargs = {}" in peft_source
    hf_source = inspect.getsource(modeling_utils.PreTrainedModel._activation_checkpointing_enable)
    assert "if activation_checkpointing_kwargs is None:" in hf_source


def test_fsdp_wrapper_without_rng_changes_gradients(results) -> None:
    r = results["fsdp-checkpoint-wrapper-rng"]
    assert r.config["dropout"] == 0.1
    assert r.config["accelerate_wraps_without_rng"] is True  # read in accelerate's source
    assert r.wrong.max_grad_diff > 1e-3
    assert r.fixed.max_grad_diff == 0.0
    assert r.wrong.loss == r.plain.loss == r.fixed.loss  # the forward is the same
    assert r.fixed.peak_bytes < 0.7 * r.plain.peak_bytes  # and it still checkpoints


def test_selective_policy_under_save_on_cpu_keeps_its_outputs_on_the_device(results) -> None:
    r = results["selective-under-save-on-cpu"]
    # what the memory model says the policy caches: its block tensors but the input, which
    # is the checkpoint's own and goes through the hooks
    from memory.theory import held_in_block

    cached = [t for t in held_in_block(CASE_CONFIG, "save-matmuls") if t.name != "input"]
    per_layer = sum(t.bytes for t in cached)
    assert per_layer == 9 * CASE_CONFIG.batch * CASE_CONFIG.seq_len * CASE_CONFIG.hidden * 4
    assert r.plain.kept_on_device_bytes == 0 and r.fixed.kept_on_device_bytes == 0
    assert r.wrong.kept_on_device_bytes == CASE_CONFIG.layers * per_layer
    # the checkpoints' inputs still went through the hooks, in both checkpointed runs
    assert r.wrong.offloaded_bytes == r.fixed.offloaded_bytes < r.plain.offloaded_bytes
    assert r.wrong.peak_bytes > r.fixed.peak_bytes


def test_symptoms_lead_to_cases() -> None:
    assert set(SYMPTOM_TITLES) == set(Symptom)
    for symptom in Symptom:
        assert cases_for(symptom), symptom
    assert {c.id for s in Symptom for c in cases_for(s)} == set(CASES)


def test_results_round_trip_through_the_store_json(results) -> None:
    items = [results["reentrant-frozen-inputs"], results["recompute-mismatch"]]
    assert decode_result(encode_result(items)) == items
    job = Job.make("mistakes", CASE_CONFIG, (), cases=("no-grad-or-eval",))
    assert job.step_count() == 1 and job.work() == CASES["no-grad-or-eval"].estimate_s > 0
    assert Job.from_request(job.request()) == job


def test_cli_json(capsys) -> None:
    assert main(["mistakes", "--json", "--case", "side-effects-twice",
                 "--case", "no-grad-or-eval"]) == 0
    rows = json.loads(capsys.readouterr().out)["cases"]
    assert [r["id"] for r in rows] == ["side-effects-twice", "no-grad-or-eval"]
    assert all(r["wrong_shows"] and not r["fixed_shows"] for r in rows)
    assert rows[1]["symptoms"] == ["peak-did-not-drop", "warning"]
    assert "requires_grad" in rows[1]["wrong"]["warning"]


def test_cli_unknown_case(capsys) -> None:
    assert main(["mistakes", "--case", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


@pytest.mark.parametrize("lang", ["", "de/", "vi/"])
def test_every_case_is_linked_from_its_lesson_and_from_common_mistakes(lang: str) -> None:
    from pathlib import Path

    content = Path(__file__).resolve().parents[2] / "lessons" / "content"
    practice = (content / f"{lang}in-practice.md").read_text()
    for case in CASES.values():
        link = f"({{{{page:mistakes}}}}&case={case.id})"
        assert link in (content / f"{lang}{case.lesson}.md").read_text(), (lang, case.id)
        assert link in practice, (lang, case.id)
