"""The layers point one way: pages -> ui -> demos / lessons / quiz.

Every import statement of every module is read from its syntax tree (nothing is
imported), so a lazy import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# package -> the top-level modules it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "demos": ("streamlit", "ui", "pages"),
    "lessons": ("streamlit", "ui", "pages"),
    "quiz": ("streamlit", "ui", "pages"),
    "ui": ("pages",),
}


def imported_modules(source: str) -> set[str]:
    """The absolute module names a file imports ('ui.query', 'streamlit', ...)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def violations(package: str) -> list[str]:
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for name in sorted(imported_modules(path.read_text(encoding="utf-8"))):
            if name.split(".")[0] in FORBIDDEN[package]:
                found.append(f"{path.relative_to(ROOT)} imports {name}")
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_layer_never_imports_the_layers_above_it(package: str) -> None:
    assert (ROOT / package).is_dir()
    assert violations(package) == []


def test_the_scan_sees_every_form_of_import() -> None:
    source = ("import streamlit as st\nfrom ui.query import int_slider\n"
              "def f():\n    from pages import home\n    import ui.navigation\n"
              "from . import sibling\n")
    names = imported_modules(source)
    assert {"streamlit", "ui.query", "pages", "ui.navigation"} <= names
    assert not any(name.startswith("sibling") for name in names)  # relative: same package
