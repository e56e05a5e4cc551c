"""/real-model in a real browser: the tiny transformers model runs on the server, the table
shows measured beside predicted, and a changed switch reruns it and updates the URL."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.helpers import goto, screenshot, wait_for_app


def test_real_model_runs_and_follows_the_switch(page: Page, app_url: str) -> None:
    goto(page, app_url, "real-model?model=gpt2&dtype=fp32")
    expect(page.get_by_text("Page not found")).to_have_count(0)
    expect(page.locator('[data-testid="stDataFrame"]').first).to_be_visible(timeout=120_000)
    code = page.locator('[data-testid="stCode"]').first
    expect(code).to_contain_text("checkpointing off")
    screenshot(page, "real-model-gpt2-off")

    page.get_by_text("every layer", exact=True).click()
    wait_for_app(page)
    expect(code).to_contain_text("model.activation_checkpointing_enable()")
    expect(page).to_have_url(re.compile(r"[?&]ckpt=every-layer\b"))
    expect(page.locator('[data-testid="stMetricValue"]').first).to_be_visible()
    screenshot(page, "real-model-gpt2-every-layer")
