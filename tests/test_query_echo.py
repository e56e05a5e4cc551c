"""Nothing a link carries renders as Markdown: every query parameter of every page gets
hostile payloads (a link, a foreign image, coloured text, raw HTML, an icon and LaTeX), and
every text the page draws through Markdown must show them literally."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from quiz.markdown import escape_markdown
from ui.navigation import PAGES, ROOT

PAYLOADS = (
    "[Sign in again](https://evil.example)",
    "![](https://evil.example/p.png)",
    ":red[**ADMIN NOTICE**]",
    "<img src=x onerror=alert(1)>",
    ":material/warning: $x^2$ www.evil.example",
)
# What a payload becomes when it is rendered as Markdown rather than shown: a link or an
# image (the Markdown, HTML or bare-URL kind), Streamlit's colour, icon or LaTeX syntax.
LIVE = re.compile(r"(?<!\\)(\]\(|!\[|:red\[|:material/|<img|\$x)|evil\.example")
MARKERS = ("Sign in again", "ADMIN NOTICE", "onerror", "x^2", "evil.example")
# Parameters that no page writes back to its URL but that pages read.
READ_ONLY = ("id", "attempt", "lang")
MARKDOWN_KINDS = ("markdown", "caption", "warning", "error", "info", "success", "toast",
                  "title", "header", "subheader", "exception")
# One test process runs this module, so each page's default run (which lists the
# parameters it writes back to its URL) is made once and serves both sweeps below.
pytestmark = pytest.mark.xdist_group("query-echo")
_PARAMETERS: dict[str, frozenset[str]] = {}


def _texts(at: AppTest) -> Iterator[str]:
    for kind in MARKDOWN_KINDS:
        for element in at.get(kind):
            value = getattr(element, "value", None) or getattr(element, "message", "")
            if isinstance(value, str):
                yield value


def assert_literal(text: str) -> None:
    """`text`, rendered by a CommonMark renderer, holds no link or image, and none of the
    payloads' live syntax survives unescaped."""
    html = MarkdownIt("commonmark").render(text)
    assert "<a " not in html and "<img" not in html, text
    assert not LIVE.search(text), text


def test_the_checker_catches_what_the_payloads_do_unescaped() -> None:
    for payload in PAYLOADS:
        with pytest.raises(AssertionError):
            assert_literal(f"?layers={payload!r} is not a number")
        assert_literal(escape_markdown(f"?layers={payload!r} is not a number"))


@pytest.fixture
def page_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DEMO_RUNNER_COLLECT", "1")  # the demos' runs are not needed here

    def run(script: str, query: dict[str, str]) -> AppTest:
        at = AppTest.from_file(str(ROOT / script), default_timeout=60)
        for key, value in query.items():
            at.query_params[key] = value
        return at.run()

    return run


def _parameters(spec, page_run) -> frozenset[str]:  # noqa: ANN001
    """The query parameters the page writes back to its URL on its default run."""
    if spec.file not in _PARAMETERS:
        _PARAMETERS[spec.file] = frozenset(page_run(spec.file, {}).query_params)
    return _PARAMETERS[spec.file]


@pytest.mark.parametrize("spec", PAGES, ids=lambda spec: spec.url_path or "home")
def test_every_query_parameter_shows_payloads_literally(spec, page_run) -> None:  # noqa: ANN001
    names = sorted({*_parameters(spec, page_run), *READ_ONLY})
    shown = 0
    for turn in range(len(PAYLOADS)):  # every parameter gets every payload once
        query = {name: PAYLOADS[(index + turn) % len(PAYLOADS)]
                 for index, name in enumerate(names)}
        at = page_run(spec.file, query)
        assert not at.exception, [e.value for e in at.exception]
        for text in _texts(at):
            if any(word in text.replace("\\", "") for word in MARKERS):  # an echo
                assert_literal(text)
                shown += 1
    if len(names) > len(READ_ONLY):  # a page with settings echoes the bad ones it ignores
        assert shown, f"{spec.file}: no payload echoed; the test checked nothing"


def test_a_forged_radio_value_falls_back_to_an_option_without_a_traceback(
    page_run, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture  # noqa: ANN001
) -> None:
    from tests.quiz.test_pages_issuing import _forge

    at = page_run("pages/plan.py", {})
    model = next(radio for radio in at.radio if radio.key == "model")
    _forge(monkeypatch, model, "../../etc/passwd")
    with caplog.at_level(logging.INFO):
        at = at.run()
    assert not at.exception
    model = next(radio for radio in at.radio if radio.key == "model")
    assert model.index is not None  # one of the options the radio offers
    assert "passwd" not in str(at.query_params["model"])
    assert not any(r.exc_info or r.levelno >= logging.ERROR for r in caplog.records)


def test_a_query_over_streamlits_limits_is_reported(page_run,  # noqa: ANN001
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.runtime import app_session

    from ui.query import DROPPED, install_limit_notice

    monkeypatch.setattr(app_session, "sanitize_query_string",
                        app_session.sanitize_query_string)  # restored after the test
    install_limit_notice()
    install_limit_notice()  # once is enough; twice changes nothing
    assert app_session.sanitize_query_string("layers=4&seq=64") == "layers=4&seq=64"
    assert app_session.sanitize_query_string("") == ""
    assert app_session.sanitize_query_string("a=1&" * 1000 + "b=2") == f"{DROPPED}=1"
    assert app_session.sanitize_query_string("x=" + "9" * 600_000) == f"{DROPPED}=1"
    at = page_run("app.py", {DROPPED: "1"})
    assert any("settings were not used" in w.value for w in at.warning)
    assert DROPPED not in at.query_params
    at = page_run("app.py", {"layers": "4"})
    assert not any("settings were not used" in w.value for w in at.warning)


@pytest.mark.parametrize("spec", PAGES, ids=lambda spec: spec.url_path or "home")
def test_no_query_value_is_echoed_beyond_its_limit(spec, page_run) -> None:  # noqa: ANN001
    """A link's value is shown cut to a few dozen characters, never as pages of text an
    attacker wrote (each parameter gets 20,000 characters of its own letter)."""
    from ui.query import SHOWN_CHARACTERS

    names = sorted({*_parameters(spec, page_run), *READ_ONLY, "case"})
    letters = "BCDFGHJKMNPQRSTVWXYZ"
    query = {name: letters[index % len(letters)] * 20_000 for index, name in enumerate(names)}
    at = page_run(spec.file, query)
    assert not at.exception, [e.value for e in at.exception]
    for text in _texts(at):
        longest = max((len(run.group()) for run in re.finditer(r"([B-Z])\1*", text)),
                      default=0)
        assert longest <= SHOWN_CHARACTERS, text[:200]
