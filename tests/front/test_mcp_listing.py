"""What the host sees of the tools: names, annotations while a server is out, the list-change
announcement on every transition under both protocol eras, and who is calling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.front.mcp_support import (
    ANNOTATED,
    Bench,
    control,
    fixture_server,
    listening,
    proxied,
)

FAST = {"deadline_seconds": 0.3, "backoff_seconds": 0.01, "attempts": 1}
MODERN = "2026-07-28"


def changes(bench: Bench) -> int:
    return sum(isinstance(n, types.ToolListChangedNotification) for n in bench.notices)


async def until(check: Any, seconds: float = 3.0) -> None:
    with anyio.fail_after(seconds):
        while not check():
            await anyio.sleep(0.01)


async def trip(bench: Bench, tool: str = "search__charge") -> None:
    for _ in range(3):
        await bench.call(tool, {"amount": 1})


async def test_tools_are_listed_as_server__tool_with_schemas_and_annotations(
    tmp_path: Path,
) -> None:
    servers = {
        "search": fixture_server(control(tmp_path).dir),
        "billing-eu": fixture_server(control(tmp_path, "billing").dir),
    }
    async with proxied(servers) as bench:
        listed = {tool.name: tool for tool in (await bench.host.list_tools()).tools}
    assert set(listed) == {
        "search__lookup",
        "search__charge",
        "billing-eu__lookup",
        "billing-eu__charge",
    }
    lookup = listed["search__lookup"]
    assert lookup.annotations is not None and lookup.annotations.idempotent_hint
    assert lookup.input_schema["required"] == ["query"]
    assert lookup.output_schema is not None


async def test_an_open_servers_tools_stay_listed_with_a_first_line_saying_unavailable(
    tmp_path: Path,
) -> None:
    search, billing = control(tmp_path), control(tmp_path, "billing")
    servers = {
        "search": fixture_server(search.dir, **FAST),
        "billing": fixture_server(billing.dir, **FAST),
    }
    async with proxied(servers, proxy_table=ANNOTATED) as bench:
        search.set_mode("internal_error")
        await trip(bench)
        listed = {tool.name: tool for tool in (await bench.host.list_tools()).tools}
        first_line = listed["search__lookup"].description.splitlines()[0]
        assert first_line.startswith("Unavailable until 2026-01-01 00:00:30 UTC")
        assert "failed 3 times" in first_line
        assert listed["search__lookup"].annotations.read_only_hint
        assert not listed["billing__lookup"].description.startswith("Unavailable")
        ok = await bench.call("billing__lookup", {"query": "x"})
        assert not ok.is_error


async def test_a_handshake_era_host_hears_of_every_transition(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": fixture_server(ctl.dir, **FAST)}, proxy_table=ANNOTATED) as bench:
        await until(lambda: True)
        before = changes(bench)
        ctl.set_mode("internal_error")
        await trip(bench)
        await until(lambda: changes(bench) == before + 1)
        bench.cool_down()
        await until(lambda: changes(bench) == before + 2)
        half_open = (await bench.host.list_tools()).tools[0].description
        assert half_open.startswith("Unavailable: its server was failing; the next call")
        ctl.set_mode("ok")
        await bench.call("search__charge", {"amount": 1})
        await until(lambda: changes(bench) == before + 3)
        closed = (await bench.host.list_tools()).tools[0].description
        assert not closed.startswith("Unavailable")


async def test_a_2026_era_host_hears_of_every_transition_on_subscriptions_listen(
    tmp_path: Path,
) -> None:
    ctl = control(tmp_path)
    settings = fixture_server(ctl.dir, **FAST)
    async with proxied(
        {"search": settings}, host_mode=MODERN, upstream_mode=MODERN, proxy_table=ANNOTATED
    ) as bench:
        assert bench.host.protocol_version == MODERN
        async with listening(bench) as events:
            ctl.set_mode("internal_error")
            await trip(bench)
            await until(lambda: len(events) >= 1)
            bench.cool_down()
            await until(lambda: len(events) >= 2)
            ctl.set_mode("ok")
            await bench.call("search__charge", {"amount": 1})
            await until(lambda: len(events) >= 3)
        assert bench.state("search") == "closed"


@pytest.mark.parametrize(("host_mode", "upstream_mode"), [("legacy", "legacy"), (MODERN, MODERN)])
async def test_three_timed_out_idempotent_calls_send_six_under_either_era(
    tmp_path: Path, host_mode: str, upstream_mode: str
) -> None:
    ctl = control(tmp_path)
    settings = fixture_server(ctl.dir, deadline_seconds=0.3, backoff_seconds=0.01)
    async with proxied({"search": settings}, host_mode=host_mode, upstream_mode=upstream_mode) as b:
        ctl.set_mode("hang")
        for _ in range(3):
            await b.call("search__lookup", {"query": "q"})
        refused = await b.call("search__lookup", {"query": "q"})
        assert refused.structured_content["status"] == "circuit_open"
        assert ctl.calls() == 6


@pytest.mark.parametrize("host_mode", ["legacy", MODERN])
async def test_the_calling_agent_is_the_hosts_client_info_name(
    tmp_path: Path, host_mode: str
) -> None:
    ctl = control(tmp_path)
    settings = fixture_server(ctl.dir, **FAST)
    async with proxied({"search": settings}, host_mode=host_mode, agent="claude-desktop") as b:
        ctl.set_mode("internal_error")
        await b.call("search__charge", {"amount": 1})
        assert b.engine.view("search@default").agents == ("claude-desktop",)


@pytest.mark.parametrize("upstream_mode", ["legacy", MODERN])
async def test_an_upstream_whose_tools_change_is_listed_again_and_hosts_hear_of_it(
    tmp_path: Path, upstream_mode: str
) -> None:
    ctl = control(tmp_path)
    settings = fixture_server(ctl.dir, **FAST)
    async with proxied({"search": settings}, upstream_mode=upstream_mode) as bench:
        before = changes(bench)
        ctl.set_mode("add_tool")
        await bench.call("search__charge", {"amount": 1})
        await until(lambda: "extra" in bench.proxy.upstreams["search"].tools)
        await until(lambda: changes(bench) > before)
        names = {tool.name for tool in (await bench.host.list_tools()).tools}
        assert "search__extra" in names
