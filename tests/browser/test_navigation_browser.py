"""Browser: every page opens by its URL path in Chromium and shows real content."""

from __future__ import annotations

import shutil

import pytest

from tests.helpers import goto, screenshot
from ui.navigation import PAGES, ROOT

README_SCREENSHOT = ROOT / "docs" / "screenshot-home.png"


def test_home_page_shows_the_path_through_the_course(page, app_url: str) -> None:
    goto(page, app_url)
    assert page.get_by_role("heading", name="Gradient Checkpointing Lab").is_visible()
    for text in ("Lessons", "Live demos", "Quiz", "Certificate", "Demos run on"):
        assert page.get_by_text(text, exact=False).first.is_visible(), text
    assert "CPU (no GPU found)" in page.inner_text("[data-testid='stSidebar']") or (
        "GPU" in page.inner_text("[data-testid='stSidebar']")
    )
    shot = screenshot(page, "home")
    README_SCREENSHOT.parent.mkdir(exist_ok=True)
    shutil.copyfile(shot, README_SCREENSHOT)


@pytest.mark.parametrize("spec", [p for p in PAGES if p.url_path], ids=lambda s: s.url_path)
def test_deep_link_opens_the_page(spec, page, app_url: str) -> None:
    if not (ROOT / spec.file).exists():
        pytest.fail(f"{spec.file} is not written yet")
    query = "?layers=2&hidden=64&heads=2&seq=32&batch=2&vocab=256"
    goto(page, app_url, spec.url_path + (query if spec.section == "Live demos" else ""))
    assert page.url.split("?")[0].rstrip("/").endswith(spec.url_path)
    assert page.locator("[data-testid='stException']").count() == 0
    main = page.inner_text("[data-testid='stMain']")
    assert len(main.strip()) > 40, f"{spec.url_path} shows almost nothing: {main!r}"
    # The page's own title is the one selected in the navigation.
    title = spec.title.split(". ", 1)[-1]
    assert page.get_by_role("link", name=title).first.get_attribute("aria-current") == "page"
