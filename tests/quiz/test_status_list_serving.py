"""How a server serves the status lists: with a Cache-Control that is a small part of their
validity, and with a publisher that says once, in one line, when it cannot publish (a full
disk) and once when it can again, never a traceback every few seconds."""

from __future__ import annotations

import asyncio
import errno
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from quiz import status_list
from quiz.status_list import publish_forever


def served(path: str, headers: list[tuple[bytes, bytes]] | None = None,
           status: int = 200) -> list[tuple[bytes, bytes]]:
    """The response headers of GET `path` through CacheStatusLists, in front of an app that
    answers with `headers`."""
    from ui.badge_download import CacheStatusLists

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": list(headers or [])})
        await send({"type": "http.response.body", "body": b"{}"})

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request"}

    asyncio.run(CacheStatusLists(app)({"type": "http", "path": path}, receive, send))
    return sent[0]["headers"]


def test_a_status_list_says_how_long_a_cache_may_keep_it() -> None:
    from quiz.status_list import CACHE_SECONDS, RESIGN_SECONDS, VALID_SECONDS

    assert 0 < CACHE_SECONDS <= RESIGN_SECONDS < VALID_SECONDS
    wanted = (b"cache-control", f"public, max-age={CACHE_SECONDS}".encode())
    assert wanted in served("/app/static/status/0123456789abcdef.json")
    assert wanted in served("/course/app/static/status/0123456789abcdef.json")  # a base path
    replaced = served("/app/static/status/k.json", [(b"Cache-Control", b"no-cache")])
    assert [h for h in replaced if h[0].lower() == b"cache-control"] == [wanted]
    assert served("/app/static/other.json") == []  # other files as Streamlit serves them
    assert served("/app/static/status/missing.json", status=404) == []


def test_the_server_adds_it_to_streamlits_middleware() -> None:
    from streamlit.web.server.starlette import starlette_app

    from ui.badge_download import CacheStatusLists, cache_status_lists

    before = starlette_app.create_streamlit_middleware
    try:
        cache_status_lists()
        cache_status_lists()  # twice: once in the stack
        classes = [m.cls for m in starlette_app.create_streamlit_middleware()]
        assert classes.count(CacheStatusLists) == 1
        assert len(classes) == len(before()) + 1
    finally:
        starlette_app.create_streamlit_middleware = before


def test_streamlits_own_static_route_serves_a_list_with_it(tmp_path: Path) -> None:
    """Streamlit's app-static route (what `server.enableStaticServing` mounts at
    /app/static/) behind the middleware stack Streamlit builds, as `python -m ui.server`
    installs it: the served file carries the header; other static files do not."""
    from starlette.applications import Starlette
    from streamlit.web.server.starlette import starlette_app
    from streamlit.web.server.starlette.starlette_routes import (
        create_app_static_serving_routes,
    )

    from quiz.status_list import CACHE_SECONDS
    from ui.badge_download import cache_status_lists

    (tmp_path / "static" / "status").mkdir(parents=True)
    (tmp_path / "static" / "status" / "0123456789abcdef.json").write_text('{"id": 1}')
    (tmp_path / "static" / "other.json").write_text("{}")
    (tmp_path / "app.py").write_text("")
    before = starlette_app.create_streamlit_middleware
    try:
        cache_status_lists()
        app = Starlette(routes=create_app_static_serving_routes(str(tmp_path / "app.py"), ""),
                        middleware=starlette_app.create_streamlit_middleware())
    finally:
        starlette_app.create_streamlit_middleware = before

    def get(path: str) -> tuple[int, dict[bytes, bytes], bytes]:
        sent: list[dict[str, Any]] = []
        asked = asyncio.Event()

        async def receive() -> dict[str, Any]:
            if not asked.is_set():
                asked.set()
                return {"type": "http.request", "body": b"", "more_body": False}
            await asyncio.sleep(60)  # the client stays connected until the file is sent
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(),
                 "query_string": b"", "headers": [(b"host", b"lab.example")],
                 "http_version": "1.1", "scheme": "https", "server": ("lab.example", 443),
                 "client": ("203.0.113.9", 50000), "root_path": ""}
        asyncio.run(asyncio.wait_for(app(scope, receive, send), 30))
        body = b"".join(m.get("body", b"") for m in sent[1:])
        return sent[0]["status"], dict(sent[0]["headers"]), body

    status, headers, body = get("/app/static/status/0123456789abcdef.json")
    assert (status, body) == (200, b'{"id": 1}')
    assert headers[b"cache-control"] == f"public, max-age={CACHE_SECONDS}".encode()
    status, headers, _ = get("/app/static/other.json")
    assert status == 200 and b"cache-control" not in headers


class Rounds(threading.Event):
    """A stop event that lets the publisher run `count` rounds."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.left = count

    def wait(self, timeout: float | None = None) -> bool:
        self.left -= 1
        return self.left <= 0


def test_a_full_disk_is_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    def publish(data_dir: Path, folder: Path | None = None) -> list[Path]:
        raise OSError(errno.ENOSPC, "No space left on device",
                      str(tmp_path / "status" / ".k.json.1.part"))

    monkeypatch.setattr(status_list, "publish", publish)
    monkeypatch.setattr(status_list, "due_lists", lambda *args, **kwargs: {},
                        raising=False)
    with caplog.at_level(logging.INFO, logger="quiz.status_list"):
        publish_forever(lambda: tmp_path, Rounds(5), interval=0)
    records = [r for r in caplog.records if r.name == "quiz.status_list"]
    assert len(records) == 1, [r.getMessage() for r in records]
    assert "No space left on device" in records[0].getMessage()
    assert records[0].exc_info is None and "\n" not in records[0].getMessage()


def test_room_again_is_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    full = {"on": True}
    rounds = {"n": 0}

    def publish(data_dir: Path, folder: Path | None = None) -> list[Path]:
        rounds["n"] += 1
        if rounds["n"] > 4:
            full["on"] = False
        if full["on"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return []

    monkeypatch.setattr(status_list, "publish", publish)
    monkeypatch.setattr(status_list, "due_lists", lambda *args, **kwargs: {},
                        raising=False)
    with caplog.at_level(logging.INFO, logger="quiz.status_list"):
        publish_forever(lambda: tmp_path, Rounds(10), interval=0)
    messages = [r.getMessage() for r in caplog.records if r.name == "quiz.status_list"]
    assert rounds["n"] == 10
    assert len(messages) == 2, messages
    assert "No space left on device" in messages[0] and "published again" in messages[1]
