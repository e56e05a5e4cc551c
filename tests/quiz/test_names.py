"""Names for the certificate: normalised, refused with a clear reason when unsafe or
undrawable."""

from __future__ import annotations

import unicodedata

import pytest

from quiz.names import MAX_NAME_LENGTH, NameError_, NameProblem, normalise_name


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Nguyễn Thị Minh Khai", "Nguyễn Thị Minh Khai"),
        (unicodedata.normalize("NFD", "Nguyễn Văn Ánh"), "Nguyễn Văn Ánh"),  # NFD -> NFC
        ("Jürgen Groß-Müßig", "Jürgen Groß-Müßig"),
        ("  Ada   Lovelace ", "Ada Lovelace"),
        ("<script>alert(1)</script>", "<script>alert(1)</script>"),  # text, shown as text
        ("Ann 😀 Lee", "Ann 😀 Lee"),  # an emoji the font can draw
        ("Ελένη Παπαδοπούλου", "Ελένη Παπαδοπούλου"),
        ("x" * MAX_NAME_LENGTH, "x" * MAX_NAME_LENGTH),
    ],
)
def test_accepted_names(raw: str, expected: str) -> None:
    name = normalise_name(raw)
    assert name == expected
    assert unicodedata.is_normalized("NFC", name)


@pytest.mark.parametrize(
    ("raw", "problem", "params"),
    [
        ("", NameProblem.EMPTY, {}),
        ("     ", NameProblem.EMPTY, {}),
        ("\u3000\u00a0 ", NameProblem.EMPTY, {}),
        ("evil\u202etxt.exe", NameProblem.BIDI_CONTROL, {"character": "U+202E"}),
        ("\u2066Bob\u2069", NameProblem.BIDI_CONTROL, {"character": "U+2066"}),
        ("Bob\u200f", NameProblem.BIDI_CONTROL, {"character": "U+200F"}),
        ("Bob\x00", NameProblem.CONTROL, {"character": "U+0000"}),
        ("Bob\nSmith", NameProblem.CONTROL, {"character": "U+000A"}),
        ("Bob\x1b[31m", NameProblem.CONTROL, {"character": "U+001B"}),
        ("x" * (MAX_NAME_LENGTH + 1), NameProblem.TOO_LONG, {"limit": 80, "length": 81}),
        ("x" * 10_000, NameProblem.TOO_LONG, {"limit": 80, "length": 10_000}),
    ],
)
def test_refused_names_say_why(raw: str, problem: NameProblem, params: dict) -> None:
    """The reason is an id with its details; the page words it in the learner's language."""
    with pytest.raises(NameError_) as error:
        normalise_name(raw)
    assert error.value.problem is problem
    assert error.value.params == params


def test_an_undrawable_character_is_named() -> None:
    with pytest.raises(NameError_) as error:
        normalise_name("Ann 🦄")
    assert error.value.problem in (NameProblem.UNDRAWABLE, NameProblem.UNDRAWABLE_NO_CJK)
    assert error.value.params == {"characters": "🦄 (U+1F984 Unicorn Face)", "more": 0}
    with pytest.raises(NameError_) as error:
        normalise_name("Ann 🦄🐉🦊🐙🦑")
    assert error.value.params["more"] == 2 and error.value.params["characters"].count("U+") == 3


@pytest.mark.parametrize(
    "raw",
    [
        "\u200b\u200b\u200b",  # zero-width spaces
        "\ufeff",  # byte-order mark
        "\u00ad\u00ad",  # soft hyphens
        "\u0301\u0308",  # combining marks alone
        "\u2800\u2800",  # Braille blank
        "\u3164",  # Hangul filler (a "letter" that draws nothing)
        "\u200b \u2060 \u00ad",
        "-- . --",
    ],
)
def test_names_without_a_visible_letter_are_refused(raw: str) -> None:
    with pytest.raises(NameError_) as error:
        normalise_name(raw)
    assert error.value.problem is NameProblem.NO_VISIBLE_LETTER


def test_cjk_names_are_refused_clearly_without_a_cjk_font(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:  # noqa: ANN001
    monkeypatch.setenv("CERT_CJK_FONT", str(tmp_path / "absent.ttc"))
    for name, shown in [("山田太郎", "山 (U+5C71"), ("김민준", "김 (U+AE40")]:
        with pytest.raises(NameError_) as error:
            normalise_name(name)
        assert error.value.problem is NameProblem.UNDRAWABLE_NO_CJK
        assert error.value.params["characters"].startswith(shown)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Ada\u200bLovelace", "AdaLovelace"),  # zero-width space
        ("Ada\u200dLovelace", "AdaLovelace"),  # a joiner Latin does not need
        ("Ada\u200c Lovelace", "Ada Lovelace"),
        ("\ufeffAda Lovelace", "Ada Lovelace"),  # byte-order mark
        ("Ada\u2060Lovelace", "AdaLovelace"),  # word joiner
        ("Ada\u00adLovelace", "AdaLovelace"),  # soft hyphen
        ("Ada\U000e0041Lovelace", "AdaLovelace"),  # a tag character
        ("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian: the ZWNJ stays
         "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"),
        ("\u0645\u06cc\u200c Ada", "\u0645\u06cc Ada"),  # not between two Arabic letters
    ],
)
def test_invisible_characters_are_removed_where_no_script_needs_them(raw: str,
                                                                     expected: str) -> None:
    assert normalise_name(raw) == expected


def test_names_that_look_the_same_are_the_same() -> None:
    looks_alike = {"Ada Lovelace", "Ada\u200b Lovelace", "\u2060Ada Lovelace\ufeff",
                   "Ada \u200dLovelace"}
    assert {normalise_name(name) for name in looks_alike} == {"Ada Lovelace"}


def test_indic_joiners_between_letters_and_signs_stay() -> None:
    from quiz.names import strip_invisible

    assert strip_invisible("\u0915\u094d\u200d\u0937") == "\u0915\u094d\u200d\u0937"
    assert strip_invisible("\u200d\u0915") == "\u0915"
