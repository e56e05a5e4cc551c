"""The lab of mistakes in a real browser: a linked case opens in English, German and
Vietnamese with its measured table and no English sentence of the catalog left; the
symptom picker leads to a case and the URL follows; on a phone the wrong and the fixed
run and the table stay on the screen. Screenshots are kept (mistakes-*.png)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from i18n import gettext
from tests.browser.layout import within_width
from tests.helpers import goto, screenshot, wait_for_app
from tools.translations import untranslated_on_page

CASE = "mistakes?case=reentrant-frozen-inputs"


@pytest.mark.parametrize("code", ["en", "de", "vi"])
def test_a_linked_case_opens_in_each_language(page: Page, app_url: str, code: str) -> None:
    goto(page, app_url, f"{CASE}&lang={code}", timeout_ms=180_000)
    expect(page.get_by_text("Page not found")).to_have_count(0)
    table = page.locator('[data-testid="stTable"]').first
    expect(table).to_contain_text(gettext(code, "Parameters without a gradient"))
    expect(table).to_contain_text("None of the inputs have requires_grad=True")
    expect(page.get_by_text(gettext(code, "Symptom shown"))).to_be_visible()
    if code != "en":
        text = page.locator('[data-testid="stMain"]').inner_text()
        assert untranslated_on_page(text, code) == []
    screenshot(page, f"mistakes-{code}")


def test_the_symptom_picker_leads_to_a_case(page: Page, app_url: str) -> None:
    goto(page, app_url, "mistakes?lang=en", timeout_ms=180_000)
    page.get_by_text("Some gradients are None").click()
    wait_for_app(page, 180_000)
    expect(page.get_by_text("Reentrant checkpoint with inputs that need no gradient").first
           ).to_be_visible()
    expect(page).to_have_url(re.compile(r"[?&]symptom=gradients-none\b"))
    expect(page).to_have_url(re.compile(r"[?&]case=reentrant-frozen-inputs\b"))


def test_a_case_fits_a_phone(phone: Page, app_url: str) -> None:
    goto(phone, app_url, "mistakes?case=dropout-without-rng&lang=de", timeout_ms=180_000)
    table = phone.locator('[data-testid="stTable"]').first
    table.scroll_into_view_if_needed()
    screenshot(phone, "mistakes-phone-de")
    headers = table.locator("th")
    assert headers.count() == 4
    for index in range(headers.count()):
        box = headers.nth(index).bounding_box()
        assert box is not None and within_width(box), (headers.nth(index).inner_text(), box)
    for metric in phone.locator('[data-testid="stMetric"]').all():
        box = metric.bounding_box()
        assert box is not None and within_width(box)


@pytest.mark.parametrize("code,case,row", [
    ("en", "peft-kbit-reentrant", "Reentrant checkpoints in the step's graph"),
    ("de", "fsdp-checkpoint-wrapper-rng", "Largest gradient difference to the plain run"),
    ("vi", "selective-under-save-on-cpu",
     "Saved for backward past the hooks (left on the device)"),
])
def test_the_library_traps_run_live_and_download_as_a_snapshot(page: Page, app_url: str,
                                                               code: str, case: str,
                                                               row: str) -> None:
    """A trap of today's libraries, measured live in the learner's language; the three runs
    download as a memory snapshot that torch's own viewer functions read."""
    import pickle
    from pathlib import Path

    from torch.cuda import _memory_viz

    goto(page, app_url, f"mistakes?case={case}&lang={code}", timeout_ms=180_000)
    table = page.locator('[data-testid="stTable"]').first
    expect(table).to_contain_text(gettext(code, row))
    expect(page.get_by_text(gettext(code, "Symptom shown"))).to_be_visible()
    if code != "en":
        text = page.locator('[data-testid="stMain"]').inner_text()
        assert untranslated_on_page(text, code) == []
    label = gettext(code, "Download the memory snapshot (PyTorch's format)")
    with page.expect_download() as download:
        page.get_by_role("button", name=label).click()
    assert download.value.suggested_filename == f"mistake-{case}-snapshot.pickle"
    data = pickle.loads(Path(download.value.path()).read_bytes())
    assert "total_allocated" in _memory_viz.segsum(data)
    assert "Active Memory Timeline" in _memory_viz.trace_plot(data)
    screenshot(page, f"mistakes-{case}-{code}")
