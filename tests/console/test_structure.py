"""Issue 10: screens post messages and the app owns the workflows, so nothing under screens/ or
widgets/ imports the app (that was the console's only import circle)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CONSOLE = Path(__file__).resolve().parents[2] / "console"
UI = sorted([*CONSOLE.glob("screens/*.py"), *CONSOLE.glob("widgets/*.py")])


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("path", UI, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_screen_or_widget_imports_the_app(path):
    assert "breakerdeck.console.app" not in imported(path)
