"""`make run` serves the app: the health check answers 200, and the very first visitor
of the fresh server can open a deep link without a "Page not found" dialog."""

from __future__ import annotations

import urllib.request

from tests.helpers import background_app, goto


def test_make_run_serves_the_app_and_a_first_deep_link(tmp_path, browser) -> None:
    make_run = ["make", "run", "PORT={port}", "ADDRESS=127.0.0.1"]
    with background_app({"DATA_DIR": str(tmp_path)}, command=make_run) as url:
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.status == 200
            assert b"<html" in response.read().lower()
        # The first session of this server process opens a lesson in pages/lessons/.
        context = browser.new_context()
        page = context.new_page()
        goto(page, url, "how-many")
        assert page.get_by_role("dialog").filter(has_text="Page not found").count() == 0
        assert page.get_by_role("heading", name="Where to put checkpoints").first.is_visible()
        context.close()
