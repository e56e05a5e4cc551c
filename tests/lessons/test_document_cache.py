"""lessons.document.load keeps parsed lessons per (file, mtime, language, values)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lessons import document

SOURCE = """---
takeaways:
  - It holds {{value:size}}.
demo:
  path: compare
  label: Compare
  query: {layers: 4}
---
The [planner]({{page:plan}}) says {{value:size}}.
"""


@pytest.fixture
def content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """A content folder with one lesson, "demo", in English and German; returns the list
    of files read_source is asked for."""
    (tmp_path / "de").mkdir()
    (tmp_path / "demo.md").write_text(SOURCE, encoding="utf-8")
    (tmp_path / "de" / "demo.md").write_text(SOURCE.replace("says", "sagt"), encoding="utf-8")
    monkeypatch.setattr(document, "CONTENT_DIR", tmp_path)
    reads: list[Path] = []
    real = document.read_source

    def counting(file: Path) -> str:
        reads.append(file)
        return real(file)

    monkeypatch.setattr(document, "read_source", counting)
    document._parsed.cache_clear()
    yield reads
    document._parsed.cache_clear()


def test_a_second_load_is_equal_and_reads_nothing(content: list[Path]):
    first = document.load("demo", {"size": "4 GB"})
    second = document.load("demo", {"size": "4 GB"})
    assert first == second
    assert "says 4 GB" in first.blocks[0].text
    assert len(content) == 1


def test_a_touched_file_is_read_again(content: list[Path], tmp_path: Path):
    assert "says" in document.load("demo", {"size": "4 GB"}).blocks[0].text
    file = tmp_path / "demo.md"
    file.write_text(SOURCE.replace("says", "now says"), encoding="utf-8")
    stat = file.stat()
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert "now says 4 GB" in document.load("demo", {"size": "4 GB"}).blocks[0].text
    assert len(content) == 2


def test_languages_and_values_never_mix(content: list[Path]):
    english = document.load("demo", {"size": "4.0 GB"}, "en")
    german = document.load("demo", {"size": "4,0 GB"}, "de")
    # Vietnamese has no file: the English one, with its own values and links
    vietnamese = document.load("demo", {"size": "4,0 GB"}, "vi")
    assert "says 4.0 GB" in english.blocks[0].text and "lang=en" in english.blocks[0].text
    assert "sagt 4,0 GB" in german.blocks[0].text and "lang=de" in german.blocks[0].text
    assert "says 4,0 GB" in vietnamese.blocks[0].text and "lang=vi" in vietnamese.blocks[0].text
    assert english.takeaways == ("It holds 4.0 GB.",)
    assert german.takeaways == vietnamese.takeaways == ("It holds 4,0 GB.",)
    # each again, from the cache: unchanged
    assert document.load("demo", {"size": "4.0 GB"}, "en") == english
    assert document.load("demo", {"size": "4,0 GB"}, "de") == german
    assert len(content) == 3


def test_a_caller_changing_its_demo_query_changes_no_one_elses(content: list[Path]):
    first = document.load("demo", {"size": "4 GB"})
    first.demo.query["layers"] = "64"
    assert document.load("demo", {"size": "4 GB"}).demo.query == {"layers": "4"}
