"""The catalogs: translated per call for the language asked, never installed for the whole
process, shared safely between threads, rebuilt from the .po when its .mo is missing or
stale."""

from __future__ import annotations

import builtins
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from i18n import catalog
from i18n.catalog import gettext, ngettext, translations

ROOT = Path(__file__).resolve().parents[2]


def test_each_call_answers_in_the_language_it_names() -> None:
    assert gettext("de", "Lessons") == "Lektionen"
    assert gettext("vi", "Lessons") == "Bài học"
    assert gettext("en", "Lessons") == "Lessons"
    assert gettext("de", "Lessons visited: {visited} / {total}", visited=3, total=7) == (
        "Besuchte Lektionen: 3 / 7")
    assert "_" not in builtins.__dict__  # nothing installed process-wide


def test_plurals_follow_each_languages_rule() -> None:
    def cores(code: str, count: int) -> str:
        return ngettext(code, "CPU ({reason}), {count} core", "CPU ({reason}), {count} cores",
                        count, reason="x")

    assert [cores("en", n) for n in (1, 2)] == ["CPU (x), 1 core", "CPU (x), 2 cores"]
    assert [cores("de", n) for n in (1, 2)] == ["CPU (x), 1 Kern", "CPU (x), 2 Kerne"]
    assert [cores("vi", n) for n in (1, 2)] == ["CPU (x), 1 nhân", "CPU (x), 2 nhân"]


def test_an_unknown_message_falls_back_to_english() -> None:
    assert gettext("de", "No such message {n}", n=1024) == "No such message 1024"


def test_threads_in_different_languages_never_mix() -> None:
    """Many sessions at once, each in its own language, share one translation object per
    language and each gets its own language's text every time."""
    expected = {"en": "Live demos", "de": "Live-Demos", "vi": "Demo trực tiếp"}
    assert translations("de") is translations("de")

    def work(code: str) -> set[str]:
        return {gettext(code, "Live demos") for _ in range(2000)}

    codes = list(expected) * 8
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(work, codes))
    assert [result for result in results] == [{expected[code]} for code in codes]


@pytest.fixture
def locale_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of locale/ with only the .po files, the catalog module pointed at it."""
    target = tmp_path / "locale"
    shutil.copytree(ROOT / "locale", target, ignore=shutil.ignore_patterns("*.mo"))
    monkeypatch.setattr(catalog, "LOCALE_DIR", target)
    catalog._cache.clear()
    yield target
    catalog._cache.clear()


def test_a_missing_mo_is_compiled_from_the_po_in_memory(locale_copy: Path) -> None:
    assert not catalog.mo_path("de").exists()
    assert gettext("de", "Lessons") == "Lektionen"


def test_a_mo_older_than_its_po_is_not_served(locale_copy: Path) -> None:
    po = catalog.po_path("de")
    subprocess.run([str(Path(sys.executable).parent / "pybabel"), "-q", "compile", "-i",
                    str(po), "-o", str(catalog.mo_path("de"))], check=True)
    assert gettext("de", "Lessons") == "Lektionen"
    po.write_text(po.read_text(encoding="utf-8").replace('"Lektionen"', '"Kapitel"'),
                  encoding="utf-8")
    mo_time = catalog.mo_path("de").stat().st_mtime_ns
    os.utime(po, ns=(mo_time + 10**9, mo_time + 10**9))
    assert gettext("de", "Lessons") == "Kapitel"


def test_the_installed_mo_files_are_current() -> None:
    """`make` compiles each .po into its .mo; a .mo older than its .po means the build rule
    did not run (the app would still compile in memory, with a warning)."""
    for code in ("de", "vi"):
        mo, po = catalog.mo_path(code), catalog.po_path(code)
        if not mo.exists():
            pytest.skip(f"{mo} not built (tests run without make)")
        assert mo.stat().st_mtime_ns >= po.stat().st_mtime_ns, f"{mo} is stale: run make"


def test_every_package_that_marks_messages_is_extracted() -> None:
    """A package moved or added without a line in SOURCES would lose its messages at the
    next `make messages`: every top-level package whose code calls a marking function is
    one of the extracted sources."""
    import re

    from i18n.__main__ import SOURCES
    from tests.helpers import ROOT

    marks = re.compile(r"\b(N_|t|tn|pt|gettext|ngettext|pgettext)\(\s*[\"']")
    marking = {path.relative_to(ROOT).parts[0] for path in ROOT.glob("*/**/*.py")
               if path.relative_to(ROOT).parts[0] not in ("tests", "tools", "benchmarks")
               and not any(part.startswith(".") or part == "node_modules"
                           for part in path.relative_to(ROOT).parts)
               and marks.search(path.read_text(encoding="utf-8"))}
    assert "reports" in marking
    assert marking <= set(SOURCES)
