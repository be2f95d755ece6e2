"""breakerdeck installs beside anything: one import name, package data read from the wheel.

`engine`, `console` and `fixtures` are the folders' names and other distributions' import
names (`fixtures` is a widely used testing library), so the wheel claims only `breakerdeck`.
"""

import ast
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

#: One xdist worker runs the whole module, so the wheel and its venv are built once.
pytestmark = pytest.mark.xdist_group("packaging")

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("engine", "console", "fixtures")
LOCAL_ONLY = (".venv", ".git", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy of the sources, as from a fresh clone: setuptools would otherwise pack
    whatever an earlier build left in build/lib."""
    source = tmp_path_factory.mktemp("source") / "breakerdeck"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*LOCAL_ONLY))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("breakerdeck-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding our wheel and the `fixtures` testing library side by side.

    Installed by this environment's pip (`--python`), so the venv needs no pip of its own, and
    without compiling every dependency's bytecode: 6 s rather than 18 s, the same packages."""
    env = tmp_path_factory.mktemp("venv")
    venv.create(env, with_pip=False)
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(env / "bin" / "python")),
            *("install", "--quiet", "--no-compile", str(wheel), "fixtures"),
        ],
        check=True,
        capture_output=True,
    )
    return env


def test_the_wheel_claims_only_the_breakerdeck_name(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        top = {name.split("/")[0] for name in archive.namelist()}
    assert top == {"breakerdeck", f"{wheel.name.split('-py3')[0]}.dist-info"}


def test_the_wheel_carries_the_scenarios_and_the_console_stylesheet(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "breakerdeck/console/breakerdeck.tcss" in names
    assert "breakerdeck/fixtures/scenarios/live-demo.toml" in names
    assert {"breakerdeck/engine/py.typed", "breakerdeck/console/py.typed"} <= names


def test_installed_beside_the_fixtures_library_both_import(installed: Path, tmp_path: Path) -> None:
    probe = (
        "import fixtures, breakerdeck.engine\n"
        "assert fixtures.Fixture.__module__.startswith('fixtures.'), fixtures.Fixture\n"
        "print(breakerdeck.engine.Engine.__module__)\n"
    )
    done = subprocess.run(
        [installed / "bin" / "python", "-c", probe],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == "breakerdeck.engine.engine"


def test_the_installed_command_reads_its_scenarios_from_the_wheel(
    installed: Path, tmp_path: Path
) -> None:
    done = subprocess.run(
        [installed / "bin" / "breakerdeck", "scenarios"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    )
    assert "live-demo" in done.stdout
    assert "vendor-outage" in done.stdout


def test_a_type_checker_resolves_the_public_imports(tmp_path: Path) -> None:
    checked = tmp_path / "adopter.py"
    checked.write_text(
        "from breakerdeck.engine import Engine, ToolPolicy\n"
        "engine: Engine = Engine(ToolPolicy())\n"
        "reveal_type(engine.policy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", str(checked)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert "breakerdeck.engine.policy" in done.stdout, done.stdout
    assert "error" not in done.stdout, done.stdout


def test_no_source_file_imports_a_folder_by_its_bare_name() -> None:
    """`import engine` would load a second copy of a module beside `breakerdeck.engine`."""
    offenders = []
    for path in ROOT.glob("**/*.py"):
        if {".venv", "build", ".git"} & set(path.relative_to(ROOT).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            offenders += [f"{path}: {n}" for n in names if n.split(".")[0] in FOLDERS]
    assert offenders == []


def test_the_engine_never_imports_the_console_or_the_fixtures() -> None:
    """DESIGN's layout: `engine` stands alone, whatever runs it (the demos live in fixtures/)."""
    offenders = []
    for path in (ROOT / "engine").glob("**/*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            offenders += [
                f"{path.relative_to(ROOT)}: {n}"
                for n in names
                if n.startswith(("breakerdeck.console", "breakerdeck.fixtures"))
            ]
    assert offenders == []
