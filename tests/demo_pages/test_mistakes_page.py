"""AppTest: the lab of mistakes opens a linked case, shows the wrong and the fixed run side
by side with what this run measured, and the symptom picker narrows the cases."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from i18n import gettext
from i18n.units import format_bytes
from tests.demo_pages.test_pages import no_errors, texts
from ui.mistakes_view import KEPT_ON_DEVICE

PAGE = "pages/demos/mistakes.py"


def test_a_linked_case_shows_wrong_and_fixed_measured(app_test: Callable) -> None:
    at = app_test(PAGE, query={"case": "reentrant-frozen-inputs"}, timeout=120)
    no_errors(at)
    assert at.radio[1].value == "reentrant-frozen-inputs"
    table = at.table[0].value
    assert list(table.columns) == ["Measured", "Plain run", "Wrong way", "Fixed way"]
    row = table[table["Measured"] == "Parameters without a gradient"].iloc[0]
    assert row["Plain run"] == "0" and row["Fixed way"] == "0"
    assert int(row["Wrong way"]) > 0  # measured: every weight of every block
    said = table[table["Measured"] == "What the library said"].iloc[0]
    assert "None of the inputs have requires_grad=True" in said["Wrong way"]
    assert said["Fixed way"] == "—"
    assert "Symptom shown" in texts(at, "markdown") and "Symptom gone" in texts(at, "markdown")
    assert "use_reentrant=False" in texts(at, "success")
    assert "Measured on this run on" in texts(at, "caption")


def test_the_symptom_picker_leads_to_the_cases(app_test: Callable) -> None:
    at = app_test(PAGE, query={"symptom": "gradients-none"}, timeout=120)
    no_errors(at)
    assert at.radio[1].options == ["Reentrant checkpoint with inputs that need no gradient"]
    at.radio[0].set_value("results-differ").run(timeout=120)
    no_errors(at)
    assert len(at.radio[1].options) == 4
    assert at.query_params["case"] == "dropout-without-rng"
    diff = at.table[0].value
    row = diff[diff["Measured"] == "Largest gradient difference to the plain run"].iloc[0]
    assert row["Fixed way"] == "0 (bitwise equal)" and row["Wrong way"] != row["Fixed way"]


def test_an_unknown_case_warns_and_shows_the_first(app_test: Callable) -> None:
    at = app_test(PAGE, query={"case": "nope"}, timeout=120)
    no_errors(at)
    assert "There is no case 'nope'" in texts(at, "warning")  # the link's text, quoted
    assert at.radio[1].value == "whole-model-one-segment"


def test_a_share_of_the_plain_run_has_no_arrow_and_the_code_wraps(app_test: Callable) -> None:
    """'41.1 % of the plain run' is a reduction: no rising arrow (Streamlit draws one for
    any positive delta); the wrong and the fixed code wrap inside their half column."""
    from streamlit.proto.Metric_pb2 import Metric

    at = app_test(PAGE, query={"case": "whole-model-one-segment"}, timeout=120)
    no_errors(at)
    shares = [m for m in at.metric if "of the plain run" in (m.proto.delta or "")]
    assert len(shares) == 2  # the wrong and the fixed way
    assert all(m.proto.direction == Metric.MetricDirection.NONE for m in shares)
    assert len(at.code) >= 2 and all(c.proto.wrap_lines for c in at.code[:2])


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_the_library_cases_run_live_in_each_language(app_test: Callable, code: str) -> None:
    """The three traps of today's libraries, each measured on this run and worded in the
    session's language; the library's own words stay as the library said them."""
    at = app_test(PAGE, query={"case": "selective-under-save-on-cpu", "lang": code},
                  timeout=180)
    no_errors(at)
    table = at.table[0].value
    kept = table[table.iloc[:, 0] == gettext(code, KEPT_ON_DEVICE)].iloc[0]
    assert kept.iloc[1] == kept.iloc[3] == format_bytes(0, locale=code)
    assert kept.iloc[2] != kept.iloc[3]  # measured: the policy's cache, on the device

    at = app_test(PAGE, query={"case": "peft-kbit-reentrant", "lang": code}, timeout=180)
    no_errors(at)
    table = at.table[0].value
    said = table[table.iloc[:, 0] == gettext(code, "What the library said")].iloc[0]
    assert "use_reentrant parameter should be passed explicitly" in said.iloc[2]
    assert "use_reentrant parameter" not in said.iloc[3]
    assert "deprecated" not in said.iloc[3]  # peft's own calls: no warning of the fix
    assert gettext(code, "Symptom shown") in texts(at, "markdown")
    assert '"use_reentrant": False' in texts(at, "success")

    at = app_test(PAGE, query={"case": "fsdp-checkpoint-wrapper-rng", "lang": code},
                  timeout=180)
    no_errors(at)
    table = at.table[0].value
    diff = table[table.iloc[:, 0] == gettext(
        code, "Largest gradient difference to the plain run")].iloc[0]
    assert diff.iloc[3] == gettext(code, "0 (bitwise equal)") and diff.iloc[2] != diff.iloc[3]


def test_a_row_of_sizes_reads_in_one_unit_across_the_runs() -> None:
    """The save_on_cpu case's table read "9.8 KiB" for one run beside "3.0 MiB" for the
    next in the same row: a row of sizes takes its largest value's unit."""
    from demos.mistake_records import CaseResult, Measured
    from demos.mistakes import CASES
    from ui.mistakes_view import KEPT_ON_DEVICE, _rows

    def run(kept: int) -> Measured:
        return Measured(peak_bytes=3 * 2**20, offloaded_bytes=kept,
                        kept_on_device_bytes=kept, saved_bytes=kept)

    result = CaseResult("selective-under-save-on-cpu", run(0), run(3 * 2**20),
                        run(716_800), True, False)
    rows = dict(_rows(CASES["selective-under-save-on-cpu"], result))
    kept = rows[KEPT_ON_DEVICE]
    assert [kept(m) for m in (result.plain, result.wrong, result.fixed)] == [
        "0 B", "3.0 MiB", "0.7 MiB"]  # the last was "700.0 KiB"
