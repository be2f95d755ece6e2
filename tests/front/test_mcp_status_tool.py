"""`breakerdeck__status`, opt-in: which servers are out and until when, as structured content
under an output schema, with the failure class and counts but never an upstream's text."""

from __future__ import annotations

from pathlib import Path

import jsonschema  # type: ignore[import-untyped]
import pytest

from breakerdeck.engine.front.mcp.lists import StoredLists
from breakerdeck.engine.front.mcp.settings.config import ConfigError, load
from breakerdeck.fixtures.mcp_server import TOOLS
from tests.front.mcp_support import proxied

STATUS = {"status_tool": True}
DEAD = {"deadline_seconds": 0.5, "backoff_seconds": 0.01, "attempts": 1}


def dead(tmp_path: Path) -> dict[str, object]:
    """A server that says why on stderr and exits: its words must not reach the status."""
    return {"command": ["sh", "-c", "echo the vendor is down >&2"], **DEAD}


async def test_the_status_tool_reports_an_open_server_with_its_time(tmp_path: Path) -> None:
    assert StoredLists(tmp_path).save("search", TOOLS) is None  # its last run's tools
    async with proxied({"search": dead(tmp_path)}, proxy_table=STATUS, state_dir=tmp_path) as bench:
        listed = {tool.name: tool for tool in (await bench.host.list_tools()).tools}
        status = listed["breakerdeck__status"]
        assert status.annotations is not None and status.annotations.read_only_hint
        for _ in range(3):
            await bench.call("search__charge", {"amount": 1})
        answer = await bench.call("breakerdeck__status", {})
    assert not answer.is_error
    jsonschema.validate(answer.structured_content, status.output_schema)
    assert answer.structured_content == {
        "servers": [
            {
                "server": "search",
                "key": "search@default",
                "state": "open",
                "probe_out": False,
                "until": "2026-01-01T00:00:30Z",
                "retry_after_ms": 30000,
                "reason": "3 counted failures in a row; tripped by upstream_failure",
            }
        ]
    }


async def test_the_status_tool_is_not_listed_unless_asked_for(tmp_path: Path) -> None:
    async with proxied({"search": dead(tmp_path)}) as bench:
        names = [tool.name for tool in (await bench.host.list_tools()).tools]
        refused = await bench.call("breakerdeck__status", {})
    assert "breakerdeck__status" not in names
    assert refused.structured_content["status"] == "invalid_request"


def test_the_server_name_breakerdeck_is_reserved(tmp_path: Path) -> None:
    path = tmp_path / "mcp.toml"
    path.write_text('[servers.breakerdeck]\ncommand = ["true"]\n')
    with pytest.raises(ConfigError, match=r"\[servers\] breakerdeck: reserved"):
        load(path)
