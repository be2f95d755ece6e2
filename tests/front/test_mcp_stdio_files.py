"""`breakerdeck mcp` on whatever files its stdin and stdout are: a pipe, a regular file,
/dev/null, a terminal. Each test runs the real command with real files, bounded by timeouts."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from tests.front.mcp_support import FIXTURE
from tests.front.test_mcp_cli import COMMAND
from tests.front.test_mcp_state import INITIALIZE
from tests.waiting import wait_until

#: Generous bounds: a loaded machine takes seconds to start Python and a fixture server.
START_SECONDS = 60.0
EXIT_SECONDS = 30.0

INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def frame(*messages: dict[str, Any]) -> bytes:
    return "".join(json.dumps(message) + "\n" for message in messages).encode()


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "mcp.toml"
    command = json.dumps([*FIXTURE, "--control", str(tmp_path / "search")])
    path.write_text(f"[servers.search]\ncommand = {command}\n")
    return path


def answers(path: Path) -> list[Any]:
    """The JSON-RPC answers written so far (whole lines only)."""
    text = path.read_text()
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


@contextmanager
def proxy(
    tmp_path: Path, stdin: int | IO[Any], stdout: IO[Any], config: Path | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """The proxy on `config` (default: one fixture server) with the given stdin and stdout and
    its stderr in a file; killed if a test leaves it running."""
    errors = tmp_path / "stderr.txt"
    config = config or write_config(tmp_path)
    with errors.open("wb") as stderr:
        process = subprocess.Popen(
            [*COMMAND, "--config", str(config), "--speed", "10"],
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
        )
    try:
        yield process, errors
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(EXIT_SECONDS)


def test_answers_reach_a_stdout_redirected_to_a_regular_file(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    read_end, write_end = os.pipe()
    with out.open("wb") as stdout, proxy(tmp_path, read_end, stdout) as (process, errors):
        os.close(read_end)
        os.write(write_end, frame(INITIALIZE, INITIALIZED, LIST_TOOLS))
        wait_until(lambda: len(answers(out)) == 2, "answers in the file")
        os.close(write_end)
        assert process.wait(EXIT_SECONDS) == 0, errors.read_text()
    assert [answer["id"] for answer in answers(out)] == [1, 2]
    assert "search__lookup" in {tool["name"] for tool in answers(out)[1]["result"]["tools"]}
    assert "Traceback" not in errors.read_text()


def test_stdin_from_dev_null_is_the_end_of_input_and_the_proxy_exits_0(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    with (
        open(os.devnull, "rb") as stdin,
        out.open("wb") as stdout,
        proxy(tmp_path, stdin, stdout) as (process, errors),
    ):
        assert process.wait(START_SECONDS) == 0, errors.read_text()
    assert "Exception in callback" not in errors.read_text()
    assert "Traceback" not in errors.read_text()
    assert out.read_text() == ""


def test_a_terminal_on_stdin_is_told_once_what_the_command_is_for_and_it_keeps_serving(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.json"
    terminal, tty = pty.openpty()
    try:
        with out.open("wb") as stdout, proxy(tmp_path, tty, stdout) as (process, errors):
            os.close(tty)
            tty = -1
            wait_until(lambda: "docs/mcp.md" in errors.read_text(), "hint")
            hint = [line for line in errors.read_text().splitlines() if "docs/mcp.md" in line]
            assert len(hint) == 1
            assert "MCP" in hint[0] and "stdin/stdout" in hint[0]
            os.write(terminal, frame(INITIALIZE))
            wait_until(lambda: len(answers(out)) == 1, "answer to initialize")
            assert answers(out)[0]["id"] == 1
            os.close(terminal)  # the terminal hangs up: the end of input
            terminal = -1
            assert process.wait(EXIT_SECONDS) == 0, errors.read_text()
    finally:
        for fd in (terminal, tty):
            if fd != -1:
                os.close(fd)
