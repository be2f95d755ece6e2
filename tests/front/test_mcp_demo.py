"""`breakerdeck mcp --demo`: real MCP traffic from a scripted host trips a tool breaker."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from tests.front.mcp_support import free_port
from tests.front.test_mcp_cli import COMMAND
from tests.waiting import BOUND_SECONDS


def test_the_demo_trips_the_hanging_servers_breaker_and_says_how_to_watch(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [
            *COMMAND,
            "--demo",
            "--state-dir",
            str(tmp_path / "state"),
            "--speed",
            "25",
            "--feed-listen",
            f"127.0.0.1:{port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    seen: list[str] = []
    # Starts that miss their 10 s on a loaded machine are made good by later listings.
    deadline = time.monotonic() + 3 * BOUND_SECONDS
    try:
        while time.monotonic() < deadline:
            line = process.stderr.readline()
            seen.append(line)
            if "search__lookup: circuit_open" in line:
                break
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    said = "".join(seen)
    assert f"breakerdeck watch ws://127.0.0.1:{port}" in said
    assert "search__lookup: tool_error" in said
    assert "search__lookup: circuit_open" in said
    assert "t=200s" not in said  # tripped in the script's first hang, however slow the start
    assert process.stdout is not None and process.stdout.read() == ""
