"""A real third-party MCP server from PyPI (`mcp-server-time`, a test dependency) listed and
called through the proxy by the SDK's own client, under both protocol eras."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.front.mcp_support import proxied

MODERN = "2026-07-28"
#: Installed beside the interpreter by the test dependencies.
TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))


@pytest.mark.parametrize(("host_mode", "upstream_mode"), [("legacy", "legacy"), (MODERN, MODERN)])
async def test_mcp_server_time_is_listed_and_called_through_the_proxy(
    host_mode: str, upstream_mode: str
) -> None:
    assert shutil.which(TIME_SERVER), "mcp-server-time is a test dependency: make .venv/.installed"
    servers = {"time": {"command": [TIME_SERVER, "--local-timezone", "UTC"]}}
    async with proxied(servers, host_mode=host_mode, upstream_mode=upstream_mode) as bench:
        names = {tool.name for tool in (await bench.host.list_tools()).tools}
        assert {"time__get_current_time", "time__convert_time"} <= names
        result = await bench.call("time__get_current_time", {"timezone": "Europe/Paris"})
    assert not result.is_error, result
    assert "Europe/Paris" in result.content[0].text  # type: ignore[union-attr]
    assert bench.engine.view("time@default").count == 0
