"""Bad input on either side: each gets a clear error, the other servers' tools keep working,
and nothing is counted that the `tool` policy does not count."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.front.conftest import counted
from tests.front.mcp_support import FIXTURE, START_DEADLINE, control, fixture_server, proxied

FAST = {"deadline_seconds": 0.5, "backoff_seconds": 0.01, "attempts": 1}


async def test_an_unknown_tool_is_a_clear_error_and_counts_nothing(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": fixture_server(ctl.dir, **FAST)}) as bench:
        result = await bench.call("search__nope", {})
        assert result.is_error
        assert result.structured_content["status"] == "invalid_request"
        assert "search__lookup" in result.structured_content["error"]
        assert ctl.calls() == 0
        assert counted(bench.engine) == []


async def test_arguments_failing_the_schema_never_reach_the_upstream(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": fixture_server(ctl.dir, **FAST)}) as bench:
        for _ in range(4):
            result = await bench.call("search__charge", {"amount": "ten"})
            assert result.structured_content["status"] == "invalid_request"
            assert "amount" in result.structured_content["error"]
        assert ctl.calls() == 0
        assert bench.state("search") == "closed"
        assert bench.engine.breaker("search@default").count == 0


@pytest.mark.parametrize("behaviour", ["garbage", "exit"])
async def test_an_upstream_that_never_completes_the_handshake_leaves_the_others_working(
    tmp_path: Path, behaviour: str
) -> None:
    """It exits (after its garbage, or without a word): one that hangs is the next test's."""
    good, broken = control(tmp_path), control(tmp_path, "broken")
    servers = {
        "search": fixture_server(good.dir, **FAST),
        "broken": fixture_server(broken.dir, "--behaviour", behaviour),
    }
    async with proxied(servers) as bench:
        names = [tool.name for tool in (await bench.host.list_tools()).tools]
        assert names == ["search__lookup", "search__charge"]
        assert "broken: could not start" in bench.errlog.getvalue()
        assert broken.starts() >= 1  # it ran (listing tools may start it once more)
        result = await bench.call("search__lookup", {"query": "x"})
        assert not result.is_error
        assert counted(bench.engine) == []  # the failed start counted nothing


async def test_an_upstream_that_hangs_at_start_is_cut_off_at_the_start_deadline(
    tmp_path: Path,
) -> None:
    """DESIGN's real-time 10 s start deadline, shortened here: the rule is the same."""
    servers = {"broken": fixture_server(control(tmp_path, "broken").dir, "--behaviour", "silent")}
    async with proxied(servers, start_deadline=1.0) as bench:
        assert (await bench.host.list_tools()).tools == []
        said = bench.errlog.getvalue()
        assert "broken: could not start: no answer to the handshake within 1 s" in said
        assert counted(bench.engine) == []  # starting at launch is not a call: nothing counted


async def test_clashing_and_invalid_tool_names_are_left_out_and_named(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    servers = {"search": fixture_server(ctl.dir, "--behaviour", "invalid-names")}
    async with proxied(servers) as bench:
        names = sorted(tool.name for tool in (await bench.host.list_tools()).tools)
        assert names == ["search__charge", "search__lookup"]
    said = bench.errlog.getvalue()
    assert "left out: its name has characters hosts refuse" in said
    assert "is over 64" in said
    assert "\u202e" not in said  # the bidi override is escaped, not printed


async def test_clashing_tool_names_keep_the_first(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": fixture_server(ctl.dir, "--behaviour", "clash")}) as bench:
        names = sorted(tool.name for tool in (await bench.host.list_tools()).tools)
        assert names == ["search__charge", "search__lookup"]
    assert "listed twice" in bench.errlog.getvalue()


@pytest.mark.parametrize(
    ("mode", "detail"),
    [
        ("huge", "is over 16777216 bytes"),
        ("malformed", "not a valid CallToolResult"),
        ("bad_output", "outputSchema"),
    ],
)
async def test_a_result_the_host_cannot_use_is_a_counted_malformed_failure(
    tmp_path: Path, mode: str, detail: str
) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": fixture_server(ctl.dir, deadline_seconds=10.0)}) as bench:
        ctl.set_mode(mode)
        result = await bench.call("search__lookup", {"query": "x"})
        assert result.structured_content["status"] == "tool_error"
        assert detail in result.structured_content["reason"]
        breaker = bench.engine.breaker("search@default")
        assert breaker.count == 1
        assert breaker.last_failure_detail.startswith("the result")


async def test_an_upstream_that_dies_mid_call_is_counted_and_the_others_keep_working(
    tmp_path: Path,
) -> None:
    dying, other = control(tmp_path), control(tmp_path, "other")
    servers = {
        "search": fixture_server(dying.dir, **FAST),
        "other": fixture_server(other.dir, **FAST),
    }
    async with proxied(servers) as bench:
        dying.set_mode("crash")
        result = await bench.call("search__charge", {"amount": 1})
        assert result.structured_content["status"] == "tool_error"
        assert "exited mid-call" in result.structured_content["reason"]
        assert bench.engine.breaker("search@default").count == 1
        assert not (await bench.call("other__charge", {"amount": 1})).is_error


async def test_a_stream_closed_mid_call_is_a_counted_upstream_failure(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": fixture_server(ctl.dir, **FAST)}) as bench:
        ctl.set_mode("close")
        result = await bench.call("search__charge", {"amount": 1})
        assert result.structured_content["status"] == "tool_error"
        assert bench.engine.breaker("search@default").count == 1


async def test_a_server_that_could_not_start_is_listed_once_it_can(tmp_path: Path) -> None:
    launcher = tmp_path / "launch-search"
    ctl = control(tmp_path)
    async with proxied({"search": {"command": [str(launcher)], **FAST}}) as bench:
        assert (await bench.host.list_tools()).tools == []
        assert "search: could not start" in bench.errlog.getvalue()
        launcher.write_text(f"#!/bin/sh\nexec {' '.join(FIXTURE)} --control {ctl.dir}\n")
        launcher.chmod(0o755)
        bench.clock.advance(30)
        await bench.host.list_tools()  # asks for the server again, in the background
        with anyio.fail_after(START_DEADLINE):  # started within the bench's deadline
            while not bench.proxy.upstreams["search"].tools:
                await anyio.sleep(0.05)
        names = sorted(t.name for t in (await bench.host.list_tools()).tools)
        assert names == ["search__charge", "search__lookup"]
        assert counted(bench.engine) == []  # listing is not a call: nothing counted
