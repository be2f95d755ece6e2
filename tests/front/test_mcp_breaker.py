"""`breakerdeck mcp` over stdio: the `tool` policy at the wire of real MCP servers.

The host is the SDK's own client on OS pipes; each upstream is the fixture server in its own
process, counting every `tools/call` it receives. Cooldowns move on a manual clock; attempt
deadlines are short real ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from breakerdeck.fixtures.mcp_server import FixtureControl
from tests.front.mcp_support import control, fixture_server, proxied

FAST = {"deadline_seconds": 0.3, "backoff_seconds": 0.01}


def server(ctl: FixtureControl, **settings: object) -> dict[str, object]:
    return fixture_server(ctl.dir, **{**FAST, **settings})


async def test_three_timed_out_calls_to_an_idempotent_tool_send_six_then_none(
    tmp_path: Path,
) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": server(ctl)}) as bench:
        ctl.set_mode("hang")
        for _ in range(3):
            result = await bench.call("search__lookup", {"query": "q"})
            assert result.structured_content["status"] == "tool_error"
            assert result.structured_content["attempts"] == 2
        assert ctl.calls() == 6
        refused = await bench.call("search__lookup", {"query": "q"})
        assert refused.is_error
        assert refused.structured_content["status"] == "circuit_open"
        assert ctl.calls() == 6
        assert bench.state("search") == "open"


async def test_three_timed_out_calls_to_a_non_idempotent_tool_send_three(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": server(ctl)}) as bench:
        ctl.set_mode("hang")
        for _ in range(3):
            result = await bench.call("search__charge", {"amount": 1})
            assert result.structured_content["attempts"] == 1
        assert ctl.calls() == 3
        refused = await bench.call("search__charge", {"amount": 1})
        assert refused.structured_content["status"] == "circuit_open"
        assert ctl.calls() == 3


async def test_ten_is_error_answers_reach_the_upstream_ten_times_and_never_trip(
    tmp_path: Path,
) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": server(ctl)}) as bench:
        ctl.set_mode("is_error")
        for _ in range(10):
            result = await bench.call("search__lookup", {"query": "q"})
            assert result.is_error
            assert "no such customer" in result.content[0].text  # the tool's own answer
        assert ctl.calls() == 10
        assert bench.state("search") == "closed"
        assert bench.engine.breaker(bench.key("search")).count == 0


async def test_ten_invalid_params_errors_reach_the_upstream_ten_times_and_never_trip(
    tmp_path: Path,
) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": server(ctl)}) as bench:
        ctl.set_mode("invalid_params")
        for _ in range(10):
            result = await bench.call("search__charge", {"amount": 1})
            assert result.structured_content["status"] == "invalid_request"
            assert "positive integer" in result.structured_content["error"]
        assert ctl.calls() == 10
        assert bench.state("search") == "closed"


async def test_a_vendor_timeout_is_error_is_not_counted_without_count_is_error(
    tmp_path: Path,
) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": server(ctl)}) as bench:
        ctl.set_mode("vendor_timeout")
        for _ in range(4):
            await bench.call("search__charge", {"amount": 1})
        assert ctl.calls() == 4
        assert bench.state("search") == "closed"


async def test_a_vendor_timeout_is_error_trips_with_count_is_error(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    settings = server(ctl, count_is_error=["(?i)vendor timed out"])
    async with proxied({"search": settings}) as bench:
        ctl.set_mode("vendor_timeout")
        for _ in range(3):
            result = await bench.call("search__charge", {"amount": 1})
            assert "vendor timed out" in result.content[0].text  # relayed unchanged
        assert bench.state("search") == "open"
        refused = await bench.call("search__charge", {"amount": 1})
        assert refused.structured_content["status"] == "circuit_open"
        assert ctl.calls() == 3


async def test_a_crashed_stdio_upstream_is_started_again_only_by_an_admitted_attempt(
    tmp_path: Path,
) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": server(ctl, attempts=1)}) as bench:
        ctl.set_mode("crash")
        for _ in range(3):
            result = await bench.call("search__charge", {"amount": 1})
            assert result.structured_content["status"] == "tool_error"
        assert ctl.starts() == 3  # the first start, then one per admitted attempt after a crash
        await bench.call("search__charge", {"amount": 1})
        await bench.host.list_tools()
        assert ctl.starts() == 3  # open: nothing starts it
        ctl.set_mode("ok")
        bench.cool_down()
        probe = await bench.call("search__charge", {"amount": 1})
        assert not probe.is_error
        assert ctl.starts() == 4
        assert bench.state("search") == "closed"


async def test_fifty_concurrent_calls_at_half_open_send_exactly_one_probe(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": server(ctl, deadline_seconds=5.0)}) as bench:
        ctl.set_mode("internal_error")
        for _ in range(3):
            await bench.call("search__charge", {"amount": 1})
        assert bench.state("search") == "open"
        before = ctl.calls()
        ctl.set_mode("progress", steps=0, every=0.05, until_released=True)
        bench.cool_down()
        statuses: list[str] = []

        async def one() -> None:
            result = await bench.call("search__charge", {"amount": 1})
            statuses.append("ok" if not result.is_error else result.structured_content["status"])

        async with anyio.create_task_group() as group:
            for _ in range(50):
                group.start_soon(one)
            with anyio.fail_after(30):
                while len(statuses) < 49:  # the probe is held on the wire until all 49 answered
                    await anyio.sleep(0.02)
            ctl.release()
        assert ctl.calls() - before == 1
        assert statuses.count("ok") == 1
        assert statuses.count("probe_in_flight") == 49
        assert bench.state("search") == "closed"


async def test_a_host_that_cancels_the_probe_frees_the_slot(tmp_path: Path) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": server(ctl, deadline_seconds=30.0, attempts=1)}) as bench:
        ctl.set_mode("internal_error")
        for _ in range(3):
            await bench.call("search__charge", {"amount": 1})
        bench.cool_down()
        ctl.set_mode("hang")
        with pytest.raises(MCPError):
            await bench.host.call_tool("search__charge", {"amount": 1}, read_timeout_seconds=0.3)
        with anyio.fail_after(30):  # the host's cancellation reaches the proxy
            while not any(e.fields.get("fault") == "cancelled" for e in bench.events):
                await anyio.sleep(0.02)
        ctl.set_mode("ok")
        probe = await bench.call("search__charge", {"amount": 1})
        assert not probe.is_error
        assert bench.state("search") == "closed"
        cancelled = [e for e in bench.events if e.fields.get("fault") == "cancelled"]
        assert len(cancelled) == 1
        assert cancelled[0].fields["probe"] is True
        assert cancelled[0].fields["counted"] is False


async def test_every_refusal_is_an_is_error_result_whose_text_is_its_structured_content(
    tmp_path: Path,
) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": server(ctl)}) as bench:
        ctl.set_mode("internal_error")
        answers = [await bench.call("search__charge", {"amount": 1}) for _ in range(4)]
        for answer in answers:
            assert answer.is_error
            assert json.loads(answer.content[0].text) == answer.structured_content
            assert answer.structured_content["tool"] == "search__charge"
        assert [a.structured_content["status"] for a in answers] == [
            "tool_error",
            "tool_error",
            "tool_error",
            "circuit_open",
        ]


async def test_with_a_probe_wait_calls_behind_a_successful_probe_go_through(
    tmp_path: Path,
) -> None:
    ctl = control(tmp_path)
    settings = server(ctl, deadline_seconds=5.0, probe_wait_seconds=5.0)
    async with proxied({"search": settings}) as bench:
        ctl.set_mode("internal_error")
        for _ in range(3):
            await bench.call("search__charge", {"amount": 1})
        before = ctl.calls()
        ctl.set_mode("progress", steps=2, every=0.1)
        bench.cool_down()
        answers = []

        async def one() -> None:
            answers.append(await bench.call("search__charge", {"amount": 1}))

        async with anyio.create_task_group() as group:
            for _ in range(5):
                group.start_soon(one)
        assert [a.is_error for a in answers] == [False] * 5
        assert ctl.calls() - before == 5
