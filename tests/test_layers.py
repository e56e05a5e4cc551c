"""The floors of the code and the one direction their imports point.

Each top-level package is one floor, named for what it holds. Bottom to top:

    i18n, command_line            languages, numbers and units as text; the commands' parser
    memory, storage               the memory model (pure arithmetic, no torch), the database
    model_classes                 real library classes (transformers, PEFT, bitsandbytes) built
                                  and measured, one adapter per model kind
    demos, lessons                the lab's model and its measurement (and its command,
                                  python -m demos); the course's content
    quiz, planner                 questions, certificates; advice and code for a real run
                                  (and its command, python -m planner)
    serving, reports              serving many learners; tables and figures of results
    tools                         developer checks (translations), never imported by the app
    ui, pages                     Streamlit

Every import statement of every module is read from its syntax tree (nothing is imported),
so a lazy import inside a function counts too. A package may import only the packages
listed for it; no two packages import each other, directly or through others, and no two
modules, anywhere, import each other through a cycle. No module is longer than
MAX_LINES lines.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# package -> the packages it may import (besides itself and third-party packages)
BELOW_UI = frozenset({"i18n", "command_line", "memory", "storage", "model_classes", "demos",
                      "lessons", "quiz", "planner", "serving", "reports"})
ALLOWED: dict[str, frozenset[str]] = {
    "i18n": frozenset(),
    "command_line": frozenset(),
    "memory": frozenset({"i18n"}),
    "storage": frozenset(),
    "model_classes": frozenset({"i18n", "memory"}),
    "demos": frozenset({"i18n", "command_line", "memory", "model_classes"}),
    "lessons": frozenset({"i18n", "memory"}),
    "quiz": frozenset({"i18n", "memory", "storage", "lessons"}),
    "planner": frozenset({"i18n", "command_line", "memory", "model_classes"}),
    "serving": frozenset({"i18n", "memory", "storage", "model_classes", "demos"}),
    "reports": frozenset({"i18n", "memory", "model_classes", "demos"}),
    "tools": BELOW_UI,
    "ui": BELOW_UI,
    "pages": BELOW_UI | {"ui"},
}
# Streamlit belongs to the two top floors only.
STREAMLIT_ROOMS = frozenset({"ui", "pages"})
# the longest a module may be: past it, split it by idea
MAX_LINES = 600


def room_of(module: str) -> str | None:
    """The package a dotted module name belongs to ('demos.model' -> 'demos')."""
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


def test_no_two_packages_import_each_other() -> None:
    """Read from the imports themselves, not from ALLOWED: the graph of packages each
    module's imports make has no cycle, however long."""
    packages: dict[str, set[str]] = defaultdict(set)
    for name, targets in import_graph().items():
        for target in targets:
            if room_of(target) != room_of(name):
                packages[room_of(name)].add(room_of(target))
    assert "model_classes" in packages["planner"] and "model_classes" in packages["demos"]
    assert cycles(packages) == []


def test_no_module_is_longer_than_the_limit() -> None:
    folders = [*ALLOWED, "tests", "benchmarks"]
    long = {str(path.relative_to(ROOT)): n for folder in folders
            for path in sorted((ROOT / folder).rglob("*.py")) if "node_modules" not in path.parts
            and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


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
              "from . import sibling\nfrom .real_models import measure\n")
    names = imported_modules(source, "demos.cli")
    assert {"streamlit", "ui.query", "pages", "ui.navigation"} <= names
    assert {"demos.sibling", "demos.real_models", "demos.real_models.measure"} <= names
    assert room_of("demos.model") == "demos" and room_of("planner.cli") == "planner"


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
