"""Names for the certificate: normalised, refused with a clear reason when unsafe or
undrawable."""

from __future__ import annotations

import unicodedata

import pytest

from quiz.names import MAX_NAME_LENGTH, NameError_, normalise_name


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
    ("raw", "reason"),
    [
        ("", "Please type the name"),
        ("     ", "Please type the name"),
        ("\u3000\u00a0 ", "Please type the name"),
        ("evil\u202etxt.exe", "text-direction control (U+202E)"),
        ("\u2066Bob\u2069", "text-direction control (U+2066)"),
        ("Bob\u200f", "text-direction control (U+200F)"),
        ("Bob\x00", "control or unassigned character (U+0000)"),
        ("Bob\nSmith", "control or unassigned character (U+000A)"),
        ("Bob\x1b[31m", "control or unassigned character (U+001B)"),
        ("x" * (MAX_NAME_LENGTH + 1), "at most 80 characters; this one has 81"),
        ("x" * 10_000, "at most 80 characters; this one has 10000"),
        ("Ann 🦄", "cannot draw 🦄 (U+1F984"),
    ],
)
def test_refused_names_say_why(raw: str, reason: str) -> None:
    with pytest.raises(NameError_) as error:
        normalise_name(raw)
    assert reason in str(error.value)


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
    with pytest.raises(NameError_, match="no visible letter"):
        normalise_name(raw)


def test_cjk_names_are_refused_clearly_without_a_cjk_font(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:  # noqa: ANN001
    monkeypatch.setenv("CERT_CJK_FONT", str(tmp_path / "absent.ttc"))
    for name, shown in [
        ("山田太郎", "cannot draw 山 (U+5C71"),
        ("김민준", "Chinese, Japanese or Korean"),
    ]:
        with pytest.raises(NameError_) as error:
            normalise_name(name)
        assert shown in str(error.value)
