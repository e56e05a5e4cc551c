"""The session's language under AppTest: the URL, the browser's locale, the session's
memory when a page change drops ?lang=, the picker, and sessions that never share one."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from lessons.catalog import LESSONS


def sidebar_app() -> None:
    """The real navigation titles and sidebar, plus a stand-in for a quiz attempt."""
    import streamlit as st

    from ui.i18n import current_language
    from ui.navigation import build_navigation
    from ui.sidebar import render_sidebar

    st.session_state.setdefault("attempt", [])
    if st.button("answer", key="answer"):
        st.session_state["attempt"].append(current_language())
    for section, pages in build_navigation().items():
        st.markdown(section + ": " + " | ".join(page.title for page in pages))
    st.text(current_language())
    render_sidebar(st.sidebar.container())


def run(query: dict[str, str] | None = None, locale: str | None = None) -> AppTest:
    at = AppTest.from_function(sidebar_app, default_timeout=60)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    if locale is not None:
        at.context["locale"] = locale
    return at.run()


def shown(at: AppTest) -> str:
    return "\n".join([m.value for m in at.markdown] + [m.value for m in at.sidebar.markdown])


def test_lang_in_the_url_decides() -> None:
    at = run({"lang": "de"}, locale="vi-VN")
    assert not at.exception
    assert at.text[0].value == "de"
    assert "Live-Demos: Strategien vergleichen" in shown(at)
    assert "Die Demos laufen auf" in shown(at)
    assert at.sidebar.selectbox(key="i18n_picker").value == "de"


def test_without_lang_the_browser_locale_decides_and_stays_out_of_the_url() -> None:
    at = run(locale="vi-VN")
    assert at.text[0].value == "vi"
    assert "Trắc nghiệm & chứng chỉ: Trắc nghiệm | Xác minh chứng chỉ" in shown(at)
    assert "lang" not in at.query_params


def test_an_unsupported_language_is_english() -> None:
    at = run({"lang": "fr", "layers": "4"}, locale="fr-FR")
    assert at.text[0].value == "en"
    assert "Live demos: Compare strategies" in shown(at)
    assert dict(at.query_params) == {"layers": "4"}  # the bad ?lang= is dropped


def test_a_page_change_that_drops_lang_keeps_the_language() -> None:
    at = run({"lang": "vi"})
    del at.query_params["lang"]  # as st.navigation's page switch leaves the URL
    at.run()
    assert at.text[0].value == "vi"
    assert at.query_params["lang"] == "vi"  # written back for reloads and copied URLs


def test_the_picker_switches_without_losing_the_page_state() -> None:
    at = run({"lang": "de", "layers": "4", "seq": "128"})
    at.button(key="answer").click().run()
    at.sidebar.selectbox(key="i18n_picker").set_value("vi").run()
    assert at.text[0].value == "vi"
    assert "Demo chạy trên" in shown(at) and "Die Demos" not in shown(at)
    assert dict(at.query_params) == {"lang": "vi", "layers": "4", "seq": "128"}
    at.button(key="answer").click().run()
    assert at.session_state["attempt"] == ["de", "vi"]  # the attempt went on
    at.sidebar.selectbox(key="i18n_picker").set_value("en").run()
    assert "Demos run on" in shown(at) and at.query_params["lang"] == "en"


def test_two_sessions_in_one_process_keep_their_own_language() -> None:
    german, vietnamese = run({"lang": "de"}), run({"lang": "vi"})
    for _ in range(2):  # interleaved reruns
        german.run()
        vietnamese.run()
        assert "Lektionen" in shown(german) and "Bài học" not in shown(german)
        assert "Bài học" in shown(vietnamese) and "Lektionen" not in shown(vietnamese)
    english = run()
    assert f"Lessons visited: 0 / {len(LESSONS)}" in shown(english)
