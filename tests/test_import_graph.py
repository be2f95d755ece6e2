"""No two modules import each other, directly or around a loop, lazy imports in functions
included (issue 18): a circle means neither can be read, tested or moved without the other."""

from __future__ import annotations

import ast
import gc
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The source folders and the package each is installed as (DESIGN's layout).
PACKAGES = {"engine": "breakerdeck.engine", "console": "breakerdeck.console"}
PACKAGES["fixtures"] = "breakerdeck.fixtures"


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            found[name] = path
    return found


@cache
def _tree(path: Path) -> ast.Module:
    """The file parsed once for every test that reads it (the tests only read the trees), with
    the collector off: CPython 3.11 keeps the AST builder's depth once per interpreter
    (gh-106905), so a collection in mid-parse that runs another thread's parse (a test's
    leftover thread importing) fails this one with a SystemError."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(path.read_text())
    finally:
        if collecting:
            gc.enable()


def _imports(path: Path, known: set[str], *, type_only: bool = False) -> set[str]:
    """Every breakerdeck module this file imports, at any depth of the file; those imported
    only for type checking (they never run) only when `type_only` asks for them."""
    tree = _tree(path)
    checking_only: set[int] = set()
    for node in ast.walk(tree):
        if not type_only and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            checking_only.update(id(child) for child in ast.walk(node))
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in checking_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name in known}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@cache
def _graph(*, type_only: bool = False) -> dict[str, set[str]]:
    """The import graph, made once a process for each `type_only`; the tests only read it."""
    modules = _modules()
    known = set(modules)
    return {
        name: {
            other
            for other in _imports(path, known, type_only=type_only)
            if other != name and not (name.startswith(other + ".") and other in PACKAGES.values())
        }
        for name, path in modules.items()
    }


def test_no_module_imports_itself_around_a_circle() -> None:
    assert _circles(_graph()) == []


def test_the_doors_import_only_downward_counting_type_only_imports() -> None:
    """A door's module that names another only for its types still cannot be read without it
    (issue 31: five MCP modules once went around through one file holding both transports)."""
    doors = "breakerdeck.engine.front."
    circles = _circles(_graph(type_only=True))
    assert [circle for circle in circles if any(name.startswith(doors) for name in circle)] == []


#: The engine's floors (engine/__init__.py): a module may import its own floor and those below.
_FLOORS: list[tuple[str, ...]] = [
    ("clock", "simtime", "errors", "events", "outcomes", "policy", "state", "text", "page"),
    ("core", "results"),
    ("storage", "recorded"),
    ("parts",),
    ("replicas",),
    ("engine",),
    ("calls", "telemetry"),
    ("harness", "gateway", "shared", "feed", "front", "adapters"),
]


def _floor(module: str) -> int | None:
    """Where an engine module sits: by its first name below `breakerdeck.engine`."""
    if not module.startswith("breakerdeck.engine."):
        return None
    first = module.removeprefix("breakerdeck.engine.").split(".")[0]
    return next((n for n, floor in enumerate(_FLOORS) if first in floor), None)


def test_every_engine_module_has_a_floor() -> None:
    unplaced = [name for name in _graph() if name.count(".") >= 2 and _floor(name) is None]
    assert [n for n in unplaced if n.startswith("breakerdeck.engine.")] == []


def test_the_engine_imports_only_downward() -> None:
    """Each folder of engine/ imports only the floors below its own (the layout issue 31 asks
    for): counting type-only imports, which a reader must follow too."""
    upward = [
        (name, other)
        for name, others in _graph(type_only=True).items()
        for other in others
        if (mine := _floor(name)) is not None
        and (theirs := _floor(other)) is not None
        and theirs > mine
    ]
    assert upward == []


def test_no_folder_of_the_engine_holds_more_than_sixteen_modules() -> None:
    folders = [ROOT / "engine", *(p for p in (ROOT / "engine").rglob("*") if p.is_dir())]
    crowded = {
        str(folder.relative_to(ROOT)): count
        for folder in folders
        if (count := len([p for p in folder.glob("*.py") if p.name != "__init__.py"])) > 16
    }
    assert crowded == {}
