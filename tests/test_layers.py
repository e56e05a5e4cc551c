"""The rooms of the code and the one direction their imports point.

Bottom to top:

    i18n                          languages, catalogs, numbers and units as text
    memory, storage               the memory model (pure arithmetic, no torch), the database
    demos.engine, lessons         the lab's model and its measurement; the course's content
    quiz, planner                 questions, certificates; advice and code for a real run
    demos.runtime, demos.reports  serving many learners; tables and figures of results
    demos                         the command line (python -m demos)
    tools                         developer checks (translations), never imported by the app
    ui, pages                     Streamlit

Every import statement of every module is read from its syntax tree (nothing is imported),
so a lazy import inside a function counts too. A room may import only the rooms listed for
it; no two modules, anywhere, import each other through a cycle.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# room -> the rooms it may import (besides itself and third-party packages)
ALLOWED: dict[str, frozenset[str]] = {
    "i18n": frozenset(),
    "memory": frozenset({"i18n"}),
    "storage": frozenset(),
    "demos.engine": frozenset({"i18n", "memory"}),
    "lessons": frozenset({"i18n", "memory"}),
    "quiz": frozenset({"i18n", "memory", "storage", "lessons"}),
    "planner": frozenset({"i18n", "memory", "demos.engine"}),
    "demos.runtime": frozenset({"i18n", "memory", "storage", "demos.engine"}),
    "demos.reports": frozenset({"i18n", "memory", "demos.engine"}),
    "demos": frozenset({"i18n", "memory", "storage", "planner", "demos.engine",
                        "demos.runtime", "demos.reports"}),
    "tools": frozenset({"i18n", "memory", "storage", "lessons", "quiz", "planner",
                        "demos.engine", "demos.runtime", "demos.reports", "demos"}),
    "ui": frozenset({"i18n", "memory", "storage", "lessons", "quiz", "planner",
                     "demos.engine", "demos.runtime", "demos.reports", "demos"}),
    "pages": frozenset({"i18n", "memory", "storage", "lessons", "quiz", "planner",
                        "demos.engine", "demos.runtime", "demos.reports", "demos", "ui"}),
}
# Streamlit belongs to the two top rooms only.
STREAMLIT_ROOMS = frozenset({"ui", "pages"})
SUBROOMS = ("demos.engine", "demos.runtime", "demos.reports")


def room_of(module: str) -> str | None:
    """The room a dotted module name belongs to ('demos.engine.model' -> 'demos.engine')."""
    for sub in SUBROOMS:
        if module == sub or module.startswith(sub + "."):
            return sub
    top = module.split(".")[0]
    return top if top in ALLOWED else None


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, module: str = "", is_package: bool = False) -> set[str]:
    """The absolute module names a file imports ('ui.query', 'streamlit', ...); relative
    imports are resolved against `module`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                if not module:
                    continue
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join([*parts[:keep], *([node.module] if node.module else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def project_modules() -> dict[str, Path]:
    found = {}
    for room in ALLOWED:
        if "." in room:
            continue
        for path in sorted((ROOT / room).rglob("*.py")):
            found[module_name(path)] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (a package import counts for its __init__)."""
    modules = project_modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for target in imported_modules(path.read_text(encoding="utf-8"), name,
                                       path.name == "__init__.py"):
            if target in modules and target != name:
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def violations(room: str) -> list[str]:
    found = []
    for name, path in project_modules().items():
        if room_of(name) != room:
            continue
        for target in sorted(imported_modules(path.read_text(encoding="utf-8"), name,
                                              path.name == "__init__.py")):
            if target.split(".")[0] == "streamlit" and room not in STREAMLIT_ROOMS:
                found.append(f"{path.relative_to(ROOT)} imports {target}")
            other = room_of(target)
            if other is not None and other != room and other not in ALLOWED[room]:
                found.append(f"{path.relative_to(ROOT)} imports {target} ({other})")
    return found


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_a_room_imports_only_the_rooms_below_it(room: str) -> None:
    assert (ROOT / room.replace(".", "/")).is_dir()
    assert violations(room) == []


def test_the_allowed_rooms_form_no_cycle() -> None:
    assert cycles({room: set(allowed) for room, allowed in ALLOWED.items()}) == []


def test_no_module_imports_itself_through_a_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 50  # the scan sees the project
    assert cycles(graph) == []


def test_the_memory_model_runs_without_torch() -> None:
    """The memory model is arithmetic: no torch, no pandas, nothing heavy."""
    heavy = ("torch", "pandas", "plotly", "numpy")
    found = [f"{path.relative_to(ROOT)} imports {target}"
             for name, path in project_modules().items() if room_of(name) == "memory"
             for target in imported_modules(path.read_text(encoding="utf-8"), name)
             if target.split(".")[0] in heavy]
    assert found == []


def test_the_scan_sees_every_form_of_import() -> None:
    source = ("import streamlit as st\nfrom ui.query import int_slider\n"
              "def f():\n    from pages import home\n    import ui.navigation\n"
              "from . import sibling\nfrom .engine import model\n")
    names = imported_modules(source, "demos.cli")
    assert {"streamlit", "ui.query", "pages", "ui.navigation"} <= names
    assert {"demos.sibling", "demos.engine.model"} <= names
    assert room_of("demos.engine.model") == "demos.engine" and room_of("demos.cli") == "demos"


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
