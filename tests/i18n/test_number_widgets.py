"""Slider and number-input values in the session's number format: the browser's own format
where it is the session's language, else the value in the widget's label (Streamlit
writes a slider's numbers only in the browser's format or by printf, which groups no
digits)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def widgets_app() -> None:
    from ui import query
    from ui.lesson_common import bounded_number

    query.int_slider("vocab", "Vocabulary", 256, 65_536, 256, 8192)
    query.int_slider("layers", "Layers", 1, 64, 1, 12)
    bounded_number("Tokens", "tokens", 1, 131_072)


def run(lang: str, locale: str, tokens: int = 4096) -> AppTest:
    at = AppTest.from_function(widgets_app, default_timeout=60)
    at.query_params["lang"] = lang
    at.context["locale"] = locale
    at.session_state["tokens"] = tokens
    return at.run()


def test_a_german_session_on_an_english_browser_reads_its_own_separators() -> None:
    at = run("de", "en-US")
    assert not at.exception
    vocab = at.slider(key="vocab")
    assert vocab.label == "Vocabulary · 8.192" and vocab.proto.format == "%d"
    assert at.slider(key="layers").label == "Layers"  # under 1,000: nothing to group
    assert at.number_input(key="tokens").label.endswith(" · 4.096")
    vocab.set_value(16_384).run()
    assert at.slider(key="vocab").label == "Vocabulary · 16.384"


def test_vietnamese_too_and_english_with_its_commas() -> None:
    assert run("vi", "en-US").slider(key="vocab").label.endswith(" · 8.192")
    at = run("en", "de-DE", tokens=100_000)
    assert at.slider(key="vocab").label == "Vocabulary · 8,192"
    assert at.number_input(key="tokens").label == "Tokens · 100,000"


def test_where_the_browser_speaks_the_sessions_language_it_formats_the_slider() -> None:
    at = run("de", "de-DE")
    vocab = at.slider(key="vocab")
    assert vocab.label == "Vocabulary" and vocab.proto.format == "localized"
