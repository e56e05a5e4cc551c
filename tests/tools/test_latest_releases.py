"""make test-latest's report (tools.latest_releases): the versions on each side, why a
newer release did not install, and each failing test with the line that names its cause."""

from __future__ import annotations

from pathlib import Path

from tools.latest_releases import (
    LIBRARIES,
    LIBRARY_TESTS,
    NOT_HERE,
    UPGRADED,
    Failure,
    cause,
    changes,
    probe,
    report,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_cause_is_the_error_a_child_raised_not_the_log_noise_before_it() -> None:
    launch = ("AssertionError: Failed to load CPU gemm_4bit_forward from kernels-community\n"
              "  100%|███| 3/3\n"
              "[rank0]: AttributeError: 'FSDPParamGroup' object has no attribute 'mp_policy'\n"
              "[rank1]: AttributeError: 'FSDPParamGroup' object has no attribute 'mp_policy'")
    assert cause(launch) == ("[rank0]: AttributeError: 'FSDPParamGroup' object has no "
                             "attribute 'mp_policy'")
    assert cause("assert 214958080 == 196608000.0 ± 2.0e+06") == (
        "assert 214958080 == 196608000.0 ± 2.0e+06")
    assert cause("") == ""


def test_the_report_names_versions_reasons_and_failures() -> None:
    text = report({"torch": "2.15.0", "transformers": "5.24.0"},
                  {"torch": "2.13.0+cpu", "transformers": "5.24.0"},
                  {"transformers": ("5.25.0", "No matching distribution found for kernels")},
                  {"tests": 10, "failures": 1, "errors": 0, "skipped": 1},
                  [Failure("tests/demos/test_x.py::test_y", "failure", "assert 1 | 2")], 90)
    assert "| torch | 2.13.0+cpu | 2.15.0 |" in text
    assert "| peft | — | — |" in text
    assert "- transformers 5.25.0: No matching distribution found for kernels" in text
    assert "Tests: 8 passed, 1 failed, 1 skipped, of 10" in text
    assert "| `tests/demos/test_x.py::test_y` | assert 1 \\| 2 |" in text
    assert all(f"`{t}`" in text for t in NOT_HERE)
    clean = report({}, {}, {}, {"tests": 3, "failures": 0, "errors": 0, "skipped": 0}, [], 1)
    assert "Nothing differs." in clean


def test_the_listed_tests_exist() -> None:
    for path in LIBRARY_TESTS:
        assert (ROOT / path).exists(), path
    for test in NOT_HERE:
        file, name = test.split("::")
        assert f"def {name}(" in (ROOT / file).read_text()


def test_the_makefile_lifts_the_libraries_the_report_names() -> None:
    """make test-latest installs the newest of UPGRADED (diffusers among them, for the
    image models), the report names each, and the image models' tests are run."""
    line = next(row for row in (ROOT / "Makefile").read_text().splitlines()
                if row.startswith("LATEST_LIBRARIES :="))
    assert tuple(line.split(":=")[1].split()) == UPGRADED
    assert "diffusers" in UPGRADED and set(UPGRADED) <= set(LIBRARIES)
    assert {"tests/real_libraries", "tests/demos/test_picture_models.py",
            "tests/demos/test_picture_plan_cli.py"} <= set(LIBRARY_TESTS)


def test_changes_name_what_the_newest_releases_add_and_drop() -> None:
    pinned = {"formulas": ["mm", "bmm"], "keywords": ["use_reentrant"], "same": ["a"],
              "gone": ["x"]}
    latest = {"formulas": ["mm", "bmm", "sdpa_cpu"], "keywords": ["use_reentrant", "new"],
              "same": ["a"], "wraps": ["True"]}
    assert changes(pinned, latest) == [
        "formulas: adds `sdpa_cpu`",
        "gone: only in the pinned releases",
        "keywords: adds `new`",
        "wraps: only in the newest releases",
    ]
    assert changes({"default": ["False"], "split": ["mixtral", "qwen3_moe"]},
                   {"default": ["True"], "split": []}) == [
        "default: False → True",
        "split: drops `mixtral`, `qwen3_moe`",
    ]


def test_the_probe_reads_this_environment() -> None:
    import sys

    found = probe(sys.executable)
    assert "aten.mm" in found[
        "FLOP counter formulas (torch.utils.flop_counter.flop_registry)"]
    keywords = found["torch.utils.checkpoint.checkpoint keywords"]
    assert "use_reentrant" in keywords
    assert "preserve_rng_state" in keywords  # read out of **kwargs in torch 2.13
    assert "respect_saved_tensors_hooks" not in keywords  # not in torch 2.13
    assert found["MoE families (Mixtral, Qwen3-MoE) whose base_model_tp_plan splits the "
                 "experts"] == ["mixtral", "qwen3_moe"]  # transformers 5.24
    assert found["from_pretrained's use_kernels default"] == ["False"]
    assert found["accelerate's FSDP2 checkpointing wraps layers without the RNG state"] == [
        "True"]
