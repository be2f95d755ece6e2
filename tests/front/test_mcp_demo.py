"""`breakerdeck mcp --demo`: real MCP traffic from a scripted host trips a tool breaker."""

from __future__ import annotations

import pytest

from tests.front.conftest import DemoRun


@pytest.mark.xdist_group("mcp-demo")
def test_the_demo_trips_the_hanging_servers_breaker_and_says_how_to_watch(
    mcp_demo: DemoRun,
) -> None:
    said = "".join(mcp_demo.said)
    assert f"breakerdeck watch ws://127.0.0.1:{mcp_demo.port}" in said
    assert "search__lookup: tool_error" in said
    assert "search__lookup: circuit_open" in said
    assert "t=200s" not in said  # tripped in the script's first hang, however slow the start
    assert mcp_demo.stdout == ""
