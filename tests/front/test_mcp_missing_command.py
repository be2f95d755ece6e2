"""A stdio server whose program is not there: `--check-config` refuses the file naming the
server and the command; at run time the proxy says so in one line and serves the others."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.front.test_check_config_start import mcp
from tests.front.test_mcp_cli import fixture_command, write_config
from tests.front.test_mcp_stdio_files import (
    EXIT_SECONDS,
    INITIALIZE,
    INITIALIZED,
    LIST_TOOLS,
    answers,
    frame,
    proxy,
)
from tests.waiting import wait_until

GHOST = '[servers.ghost]\ncommand = ["nonexistent-server-bin", "--stdio"]\n'


def test_check_refuses_a_server_whose_command_is_not_on_path(tmp_path: Path) -> None:
    path = write_config(tmp_path, GHOST)
    done = mcp("--config", str(path), "--check-config")
    assert done.returncode == 2
    assert (
        f"{path}: [servers.ghost] command: 'nonexistent-server-bin' not found on PATH"
        in done.stderr
    )
    assert "ok" not in done.stderr


def test_check_refuses_a_command_path_that_is_not_executable(tmp_path: Path) -> None:
    program = tmp_path / "server.py"
    program.write_text("print('hi')\n")
    program.chmod(0o644)
    path = write_config(tmp_path, f"[servers.local]\ncommand = [{json.dumps(str(program))}]\n")
    done = mcp("--config", str(path), "--check-config")
    assert done.returncode == 2
    assert f"[servers.local] command: '{program}' is not an executable file" in done.stderr


def test_a_server_that_cannot_start_is_one_stderr_line_and_the_others_are_served(
    tmp_path: Path,
) -> None:
    search = f"[servers.search]\ncommand = {fixture_command(tmp_path / 's')}\n"
    path = write_config(tmp_path, GHOST + search)
    out = tmp_path / "out.json"
    read_end, write_end = os.pipe()
    with out.open("wb") as stdout, proxy(tmp_path, read_end, stdout, path) as (process, errors):
        os.close(read_end)
        os.write(write_end, frame(INITIALIZE, INITIALIZED, LIST_TOOLS))
        wait_until(lambda: len(answers(out)) == 2, "answer to tools/list")
        os.close(write_end)
        assert process.wait(EXIT_SECONDS) == 0, errors.read_text()
    tools = {tool["name"] for tool in answers(out)[1]["result"]["tools"]}
    assert "search__lookup" in tools
    assert not any(name.startswith("ghost__") for name in tools)
    said = [line for line in errors.read_text().splitlines() if "ghost" in line]
    assert said == [
        "breakerdeck mcp: ghost: could not start: 'nonexistent-server-bin' not found on PATH; "
        "its tools are left out until it starts (tried again when a host lists tools)"
    ]
    assert "Traceback" not in errors.read_text()
