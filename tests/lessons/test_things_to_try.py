"""Lesson 1 says what to try in its calculator before the calculator, in every language:
after it, a learner who scrolled through the calculator met the suggestions too late."""

from __future__ import annotations

import pytest

from lessons.document import CONTENT_DIR


@pytest.mark.parametrize("folder", ["", "de/", "vi/"])
def test_the_suggestions_stand_right_above_the_calculator(folder: str) -> None:
    text = (CONTENT_DIR / f"{folder}why-memory.md").read_text(encoding="utf-8")
    before, after = text.split("{{calculator:memory}}")
    last_paragraph = before.rstrip().split("\n\n")[-1]
    assert last_paragraph.startswith("- ") and last_paragraph.count("\n- ") == 2
    assert not after.lstrip().startswith("- ")  # nothing to try is left below it
