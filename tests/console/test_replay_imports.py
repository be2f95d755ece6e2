"""Issue 30: `breakerdeck replay` starts in about a second: it imports the console and the
breaker core, not the doors' servers nor their libraries (each is a few hundred milliseconds of
a start that has little more than a second)."""

from __future__ import annotations

import subprocess
import sys

#: What only a door serves with: the MCP SDK, the web servers and clients, the shared store,
#: telemetry, and the doors' own server modules.
DOORS = (
    "mcp", "uvicorn", "aiohttp", "starlette", "redis", "valkey", "opentelemetry",
    "breakerdeck.engine.front.gateway.server", "breakerdeck.engine.front.gateway.app",
    "breakerdeck.engine.front.mcp.proxy", "breakerdeck.engine.front.mcp.serve",
    "breakerdeck.console.web",
)  # fmt: skip


def test_the_replay_command_imports_none_of_the_doors_modules():
    code = (
        "import sys\n"
        "from breakerdeck.console.cli import parse\n"
        "from breakerdeck.console.replay_command import run_replay\n"
        "parse(['replay', 'trace.jsonl'])\n"
        "print('\\n'.join(sys.modules))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    assert [m for m in loaded if m in DOORS or m.startswith(tuple(f"{d}." for d in DOORS))] == []
