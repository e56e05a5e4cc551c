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
    if spec.url_path == "pictures":  # its own smallest model: the link, not the run, is tested
        query = "?family=sd3&size=64&batch=1"
    goto(page, app_url, spec.url_path + (query if spec.section == "Live demos" else ""),
         timeout_ms=120_000)
    assert page.url.split("?")[0].rstrip("/").endswith(spec.url_path)
    assert page.locator("[data-testid='stException']").count() == 0
    main = page.inner_text("[data-testid='stMain']")
    assert len(main.strip()) > 40, f"{spec.url_path} shows almost nothing: {main!r}"
    # The page's own title is the one selected in the navigation.
    title = spec.title.split(". ", 1)[-1]
    assert page.get_by_role("link", name=title).first.get_attribute("aria-current") == "page"


# Each sidebar link, in the browser: its title, and whether any box in it is cut (its
# content wider than the box: an ellipsis, or text running past the link, where the
# sidebar's edge clips it).
_CUT_NAV_LINKS = """() => [...document.querySelectorAll('[data-testid="stSidebarNavLink"]')]
    .map(link => ({
        text: (link.querySelector('span[label]') || link).innerText.trim(),
        cut: [link, ...link.querySelectorAll('*')].some(node =>
            node.clientWidth > 0 && node.scrollWidth > node.clientWidth + 1),
    }))"""


@pytest.mark.parametrize("code", ("en", "de", "vi"))
def test_no_sidebar_title_is_cut_on_a_laptop(page, app_url: str, code: str) -> None:
    """Lesson 6's Vietnamese title ended in "..." on a 1400 x 900 laptop."""
    from ui.navigation import page_title_in

    page.set_viewport_size({"width": 1400, "height": 900})
    goto(page, app_url, f"?lang={code}")
    # the sidebar's own content (the language picker) and its style come after the page;
    # then a cut title stays cut
    page.locator('[data-testid="stSidebarUserContent"] [data-testid="stSelectbox"]').wait_for()
    page.wait_for_timeout(1000)
    links = page.evaluate(_CUT_NAV_LINKS)
    expected = [page_title_in(spec, code) for spec in PAGES]
    assert [link["text"] for link in links] == expected
    assert [link["text"] for link in links if link["cut"]] == []
    screenshot(page, f"sidebar-titles-{code}")
