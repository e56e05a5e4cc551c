"""The compiler page's stored example: served only for exactly what the benchmark
measured, and not at all when its file is missing or damaged."""

from __future__ import annotations

import json
from pathlib import Path

from demos.compiler_budget import BASE, BUDGETS, COMPILED_STRATEGIES, EAGER_STRATEGIES
from serving.budget_example import EXAMPLE_PATH, _examples, stored_example
from serving.jobs import Job


def _job(**changes) -> Job:
    options = {"budgets": BUDGETS, "eager": EAGER_STRATEGIES,
               "compiled": COMPILED_STRATEGIES, "repeats": 5, **changes}
    config = options.pop("config", BASE)
    return Job.make("budget", config, (), **options)


def test_the_page_defaults_have_the_benchmarks_sweep_for_both_architectures() -> None:
    report = json.loads(EXAMPLE_PATH.read_text(encoding="utf-8"))
    for arch, entry in report["results"].items():
        example = stored_example(_job(config=BASE.replace(arch=arch)))
        assert example is not None
        assert list(example.frame["saved_bytes"]) == [p["saved_bytes"] for p in entry["points"]]
        assert example.date == report["date"] and example.torch == report["torch"]


def test_any_other_request_has_no_example() -> None:
    assert stored_example(_job(budgets=(1.0, 0.5))) is None
    assert stored_example(_job(compiled=())) is None
    assert stored_example(_job(repeats=3)) is None
    assert stored_example(_job(config=BASE.replace(layers=2))) is None


def test_a_missing_or_damaged_file_gives_none(tmp_path: Path) -> None:
    broken = tmp_path / "compiler-budget.json"
    broken.write_text("{not json", encoding="utf-8")
    assert _examples(broken) == ()
    assert _examples(tmp_path / "absent.json") == ()
    assert stored_example(_job(), path=tmp_path / "absent.json") is None
