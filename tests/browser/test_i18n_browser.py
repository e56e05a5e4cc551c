"""Browser: the language comes from ?lang=, the sidebar picker switches it in place, and
it survives a page change through the navigation (which drops the query) and a reload."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from tests.helpers import SIDEBAR, goto, pick_language, screenshot, wait_for_app


def lang_of(url: str) -> str | None:
    return parse_qs(urlsplit(url).query).get("lang", [None])[0]


def test_german_then_vietnamese_across_a_page_change(page, app_url: str) -> None:
    goto(page, app_url, "?lang=de")
    nav = page.locator("[data-testid='stSidebarNav']")
    for text in ("Startseite", "Lektionen", "Live-Demos", "Strategien vergleichen",
                 "Quiz & Zertifikat", "Zertifikat prüfen"):
        assert nav.get_by_text(text, exact=True).first.is_visible(), text
    assert "Die Demos laufen auf" in page.inner_text(SIDEBAR)

    pick_language(page, "Tiếng Việt")
    page.wait_for_function("() => new URL(location.href).searchParams.get('lang') === 'vi'")
    assert nav.get_by_text("Bài học", exact=True).first.is_visible()
    assert "Demo chạy trên" in page.inner_text(SIDEBAR)

    nav.get_by_role("link", name="Xác minh chứng chỉ").click()
    wait_for_app(page)
    page.wait_for_function("() => new URL(location.href).searchParams.get('lang') === 'vi'")
    assert urlsplit(page.url).path.rstrip("/").endswith("/verify")
    assert nav.get_by_text("Demo trực tiếp", exact=True).first.is_visible()
    assert "Demo chạy trên" in page.inner_text(SIDEBAR)
    screenshot(page, "i18n-vi-verify")

    page.reload(wait_until="domcontentloaded")  # a new session: the URL alone carries it
    wait_for_app(page)
    assert lang_of(page.url) == "vi"
    assert nav.get_by_text("Trắc nghiệm & chứng chỉ", exact=True).first.is_visible()


# A metric's label, value or delta whose text is wider than its box (Streamlit ends it in
# "..."): ui.sidebar's CSS lets them wrap.
_CUT_METRICS = """() => [...document.querySelectorAll(
        '[data-testid="stMetricLabel"], [data-testid="stMetricValue"], '
        + '[data-testid="stMetricDelta"]')]
    .flatMap(el => [el, ...el.querySelectorAll('*')])
    .filter(el => el.scrollWidth > el.clientWidth + 1)
    .map(el => el.textContent.slice(0, 80))"""


def test_german_metrics_are_not_cut_on_a_laptop(page, app_url: str) -> None:
    """Four metrics side by side at 1,400 px, in German (the longest labels): every label,
    value and delta whole, and a strategy's title after a colon, not a preposition."""
    goto(page, app_url, "compare?lang=de")
    page.locator("[data-testid='stMetricDelta']").first.wait_for(timeout=120_000)
    page.wait_for_timeout(500)  # the fonts and the last delta settle
    screenshot(page, "i18n-de-compare-metrics")
    assert page.evaluate(_CUT_METRICS) == []
    labels = page.locator("[data-testid='stMetricLabel']").all_inner_texts()
    assert any(label.startswith("Spitzenspeicher: ") for label in labels), labels
    assert not any(" mit jede" in label for label in labels), labels
