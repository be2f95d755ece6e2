"""Hold and shadow at the MCP proxy (DESIGN, "Operator control: hold and shadow"): a held
server's calls are answered with the `tool` policy's held `circuit_open` as an `isError`
result and never reach it; a shadow server's calls reach it whatever its breaker would say, and
nothing the host or the model reads (the tool list, the status tool) shows that breaker. The
fixture server counts every `tools/call` it receives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from breakerdeck.engine.front.mcp.settings.config import ConfigError, load
from tests.front.mcp_support import ANNOTATED, Bench, control, fixture_server, proxied
from tests.front.test_mcp_listing import changes, until

FAST = {"deadline_seconds": 0.3, "backoff_seconds": 0.01, "attempts": 1}
HOUR = 3600.0
WATCHED = {**ANNOTATED, "status_tool": True}
HELD = {
    "status": "circuit_open",
    "tool": "search__lookup",
    "held": True,
    "reason": "held open by ana until 01:00 UTC: vendor maintenance",
    "retry_after_ms": 3_600_000,
    "alternatives": [],
}


async def _status(bench: Bench) -> dict[str, object]:
    answer = await bench.call("breakerdeck__status", {})
    (line,) = answer.structured_content["servers"]
    return dict(line)


async def _descriptions(bench: Bench) -> list[str]:
    return [tool.description or "" for tool in (await bench.host.list_tools()).tools]


async def test_a_held_servers_calls_get_the_held_is_error_result_and_never_reach_it(
    tmp_path: Path,
) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": fixture_server(ctl.dir, **FAST)}) as bench:
        assert not (await bench.call("search__lookup", {"query": "q"})).is_error
        bench.engine.hold(bench.key("search"), "ana", "vendor maintenance", HOUR)
        refused = [await bench.call("search__lookup", {"query": "q"}) for _ in range(3)]
        assert ctl.calls() == 1
    for answer in refused:
        assert answer.is_error
        assert answer.structured_content == HELD
        assert json.loads(answer.content[0].text) == HELD


async def test_a_server_can_be_held_before_its_first_call(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": fixture_server(ctl.dir, **FAST)}) as bench:
        bench.engine.hold(bench.key("search"), "ana", "vendor maintenance", HOUR)
        answer = await bench.call("search__lookup", {"query": "q"})
        assert ctl.calls() == 0
    assert answer.is_error
    assert answer.structured_content == HELD


async def test_a_held_server_is_shown_held_with_who_and_until_when(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    servers = {"search": fixture_server(ctl.dir, **FAST)}
    async with proxied(servers, proxy_table=WATCHED) as bench:
        await bench.call("search__lookup", {"query": "q"})
        bench.engine.hold(bench.key("search"), "ana", "vendor maintenance", HOUR)
        line = await _status(bench)
        descriptions = await _descriptions(bench)
    assert line == {
        "server": "search",
        "key": "search@default",
        "state": "held",
        "probe_out": False,
        "until": "2026-01-01T01:00:00Z",
        "retry_after_ms": 3_600_000,
        "reason": "held open by ana until 01:00 UTC: vendor maintenance",
    }
    assert descriptions[0].splitlines()[0] == (
        "Unavailable until 2026-01-01 01:00:00 UTC: "
        "held open by ana until 01:00 UTC: vendor maintenance"
    )


async def test_a_hold_and_its_release_are_announced_as_list_changes(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    servers = {"search": fixture_server(ctl.dir, **FAST)}
    async with proxied(servers, proxy_table=ANNOTATED) as bench:
        await bench.call("search__lookup", {"query": "q"})
        before = changes(bench)
        bench.engine.hold(bench.key("search"), "ana", "vendor maintenance", HOUR)
        await until(lambda: changes(bench) == before + 1)
        bench.engine.release(bench.key("search"), "ana")
        await until(lambda: changes(bench) >= before + 2)


async def test_after_a_release_the_next_call_reaches_the_server_as_the_probe(
    tmp_path: Path,
) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": fixture_server(ctl.dir, **FAST)}) as bench:
        await bench.call("search__lookup", {"query": "q"})
        bench.engine.hold(bench.key("search"), "ana", "vendor maintenance", HOUR)
        await bench.call("search__lookup", {"query": "q"})
        bench.engine.release(bench.key("search"), "ana")
        probe = await bench.call("search__lookup", {"query": "q"})
        assert ctl.calls() == 2
        assert not probe.is_error
        assert bench.state("search") == "closed"


async def test_a_shadow_servers_calls_reach_it_while_its_breaker_is_open(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    servers = {"search": fixture_server(ctl.dir, **FAST, mode="shadow")}
    async with proxied(servers) as bench:
        ctl.set_mode("internal_error")
        for _ in range(3):
            assert (await bench.call("search__lookup", {"query": "q"})).is_error
        view = bench.engine.view(bench.key("search"))
        assert (view.state, view.mode) == ("open", "shadow")
        ctl.set_mode("ok")
        answers = [await bench.call("search__lookup", {"query": "q"}) for _ in range(3)]
        assert ctl.calls() == 6
        assert bench.state("search") == "open"
    for answer in answers:
        assert not answer.is_error
        assert answer.structured_content == {"value": "found q"}


async def test_nothing_the_host_reads_shows_a_shadow_breakers_state(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    servers = {"search": fixture_server(ctl.dir, **FAST, mode="shadow")}
    async with proxied(servers, proxy_table=WATCHED) as bench:
        ctl.set_mode("internal_error")
        for _ in range(3):
            await bench.call("search__lookup", {"query": "q"})
        assert bench.state("search") == "open"
        line = await _status(bench)
        descriptions = await _descriptions(bench)
    assert line == {
        "server": "search",
        "key": "search@default",
        "state": "closed",
        "probe_out": False,
        "until": None,
        "retry_after_ms": None,
        "reason": "",
    }
    assert not any(text.startswith("Unavailable") for text in descriptions)


async def test_a_held_shadow_server_is_refused_and_shown_held(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    servers = {"search": fixture_server(ctl.dir, **FAST, mode="shadow")}
    async with proxied(servers, proxy_table=WATCHED) as bench:
        bench.engine.hold(bench.key("search"), "ana", "vendor maintenance", HOUR)
        refused = await bench.call("search__lookup", {"query": "q"})
        line = await _status(bench)
        assert ctl.calls() == 0
    assert refused.structured_content == HELD
    assert line["state"] == "held"


def test_a_servers_mode_is_read_and_any_other_value_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "mcp.toml"
    path.write_text('[servers.search]\ncommand = ["true"]\nmode = "shadow"\n')
    assert load(path).servers["search"].mode == "shadow"
    path.write_text('[servers.search]\ncommand = ["true"]\nmode = "shdow"\n')
    with pytest.raises(ConfigError, match=r"mcp\.toml.*search.*mode") as refused:
        load(path)
    assert "'enforce' or 'shadow'" in str(refused.value)
