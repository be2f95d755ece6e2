"""Spans through the MCP proxy, driven by the MCP SDK's own client over pipes (DESIGN,
"Telemetry"): the tool is the host's name for it, a refusal before the breaker is a call too."""

from __future__ import annotations

from pathlib import Path

from tests.front.mcp_support import control, fixture_server, proxied
from tests.telemetry.conftest import Exported


async def test_a_relayed_tool_call_is_one_span_with_its_attempt(
    exported: Exported, tmp_path: Path
) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": fixture_server(ctl.dir, attempts=1)}) as bench:
        result = await bench.call("search__lookup", {"query": "private words"})
        assert not result.is_error
    [span] = exported.calls()
    assert span.name == "execute_tool search__lookup"
    assert span.attributes["breakerdeck.key"] == "search@default"
    assert span.attributes["breakerdeck.agent"] == "test-agent"
    assert span.attributes["breakerdeck.outcome"] == "success"
    assert [child.name for child in exported.children(span)] == ["breakerdeck.attempt"]
    assert "private words" not in str(span.to_json())


async def test_arguments_failing_the_schema_are_a_short_caller_error_span(
    exported: Exported, tmp_path: Path
) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": fixture_server(ctl.dir, attempts=1)}) as bench:
        await bench.call("search__charge", {"amount": "ten"})
    [span] = exported.calls()
    assert span.attributes["error.type"] == "caller_error"
    assert span.attributes["breakerdeck.attempts"] == 0
    assert exported.children(span) == []
