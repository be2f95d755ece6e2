"""The proxy never loses a tool: each server's last list is kept in the state dir and listed
while the server is down, the list is the same bytes whatever the breakers do (under both
eras, with no list change announced for it), and only a server's own change is announced."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from breakerdeck.console.card import Failure
from breakerdeck.console.hint import fault_words
from breakerdeck.engine.front.mcp.lists import StoredLists
from breakerdeck.engine.front.mcp.settings.config import ServerConfig
from breakerdeck.engine.front.mcp.upstream import Upstream
from breakerdeck.fixtures.mcp_server import TOOLS
from tests.front.conftest import counted
from tests.front.mcp_support import Bench, control, fixture_server, listening, proxied

FAST = {"deadline_seconds": 0.5, "backoff_seconds": 0.01, "attempts": 1}
MODERN = "2026-07-28"
ERAS = [("legacy", "legacy"), (MODERN, MODERN)]
PLAIN = [sys.executable, "-m", "breakerdeck.fixtures.mcp_plain_server"]
#: Reads its input and never answers (it ends when its stdin closes, as the proxy stops it).
NEVER_ANSWERS = ["sh", "-c", "cat > /dev/null"]


def stored(state_dir: Path, server: str = "search") -> None:
    """The tools `server` listed in the last run, as that run kept them."""
    assert StoredLists(state_dir).save(server, TOOLS) is None


def exiting(tmp_path: Path) -> dict[str, Any]:
    """A server whose command starts and exits at once, every time (each start a line in
    `starts`)."""
    return {"command": ["sh", "-c", f"echo started >> {tmp_path}/starts"], **FAST}


def starts(tmp_path: Path) -> int:
    path = tmp_path / "starts"
    return len(path.read_text().splitlines()) if path.exists() else 0


def listings(bench: Bench) -> list[bytes]:
    """The `result` of every `tools/list` answer, as the bytes the host got."""
    return [
        line.split(b'"result":', 1)[1]
        for line in bench.wire
        if "tools" in json.loads(line).get("result", {})
    ]


def changes(bench: Bench) -> int:
    return sum(isinstance(n, types.ToolListChangedNotification) for n in bench.notices)


async def test_a_server_failing_at_start_is_listed_from_its_last_runs_tools(
    tmp_path: Path,
) -> None:
    stored(tmp_path / "state")
    async with proxied({"search": exiting(tmp_path)}, state_dir=tmp_path / "state") as bench:
        names = [tool.name for tool in (await bench.host.list_tools()).tools]
        assert names == ["search__lookup", "search__charge"]
        await bench.proxy.settled()
        assert "listed from its last run's tools" in bench.errlog.getvalue()
        assert counted(bench.engine) == []  # the start at launch was not a call


async def test_its_calls_are_tool_errors_then_circuit_open_after_three(tmp_path: Path) -> None:
    stored(tmp_path / "state")
    async with proxied({"search": exiting(tmp_path)}, state_dir=tmp_path / "state") as bench:
        await bench.proxy.settled()
        assert starts(tmp_path) == 1  # the start at launch
        answers = [await bench.call("search__charge", {"amount": 1}) for _ in range(4)]
        statuses = [a.structured_content["status"] for a in answers]
        assert statuses == ["tool_error", "tool_error", "tool_error", "circuit_open"]
        assert "exited before it answered" in answers[0].structured_content["reason"]
        assert starts(tmp_path) == 4  # each admitted call's start was its attempt


async def test_other_servers_answer_while_one_hangs_at_its_start(tmp_path: Path) -> None:
    stored(tmp_path / "state", "slow")
    good = control(tmp_path)
    servers = {
        "slow": {"command": NEVER_ANSWERS},
        "search": fixture_server(good.dir, **FAST),
    }
    async with proxied(servers, state_dir=tmp_path / "state", start_deadline=60.0) as bench:
        with anyio.fail_after(20):  # well inside the hanging start's 60 s
            names = {tool.name for tool in (await bench.host.list_tools()).tools}
            assert {"slow__lookup", "search__lookup"} <= names
            assert not (await bench.call("search__lookup", {"query": "q"})).is_error
        assert good.calls() == 1


@pytest.mark.parametrize(("host_mode", "upstream_mode"), ERAS)
async def test_the_list_is_the_same_bytes_before_during_and_after_a_trip_and_unannounced(
    tmp_path: Path, host_mode: str, upstream_mode: str
) -> None:
    ctl = control(tmp_path)
    servers = {"search": fixture_server(ctl.dir, **FAST)}
    async with (
        proxied(servers, host_mode=host_mode, upstream_mode=upstream_mode) as bench,
        listening(bench, modern=host_mode == MODERN) as events,
    ):
        await bench.host.list_tools()
        ctl.set_mode("internal_error")
        for _ in range(3):
            await bench.call("search__charge", {"amount": 1})
        assert bench.state("search") == "open"
        await bench.host.list_tools()
        bench.cool_down()
        await bench.host.list_tools()  # half-open
        ctl.set_mode("ok")
        assert not (await bench.call("search__charge", {"amount": 1})).is_error
        assert bench.state("search") == "closed"
        await bench.host.list_tools()
        await anyio.sleep(0.3)  # time enough for an announcement that must not come
        first, *others = listings(bench)
        assert others == [first, first, first]
        assert changes(bench) == 0
        assert events == []


async def test_an_upstreams_own_list_change_is_announced_once(tmp_path: Path) -> None:
    async with proxied({"plain": {"command": PLAIN}}) as bench:
        await bench.host.list_tools()
        await bench.call("plain__churn", {"times": 1})
        with anyio.fail_after(10):
            while not changes(bench):
                await anyio.sleep(0.05)
        await anyio.sleep(1.2)  # past the pause, in which a second one could have come
        assert changes(bench) == 1
        assert "generation 1" in _description(await bench.host.list_tools(), "churn")


async def test_an_upstreams_list_changing_in_a_burst_is_announced_at_most_once_a_second(
    tmp_path: Path,
) -> None:
    async with proxied({"plain": {"command": PLAIN}}) as bench:
        first = (await bench.host.list_tools()).tools
        await bench.call("plain__churn", {"times": 5})
        with anyio.fail_after(10):
            while "generation 5" not in _description(await bench.host.list_tools(), "churn"):
                await anyio.sleep(0.05)
        await anyio.sleep(1.2)  # the pause after the last announcement ends
        seen = [at for at, n in bench.arrivals if isinstance(n, types.ToolListChangedNotification)]
    assert _description(types.ListToolsResult(tools=first), "churn") == "generation 0"
    # Five changes, at most two announcements: the burst is coalesced. How far apart they
    # arrive is the machine's load as much as the proxy's pause, so it is not asserted.
    assert 1 <= len(seen) <= 2


def _description(listing: types.ListToolsResult, tool: str) -> str:
    return next(t.description or "" for t in listing.tools if t.name.endswith(f"__{tool}"))


async def test_a_damaged_stored_list_is_moved_aside_and_the_servers_answer_kept_instead(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    (state / "tools").mkdir(parents=True, mode=0o700)
    (state / "tools" / "search.json").write_text('{"format": 1, "tools": [{"nam')
    ctl = control(tmp_path)
    async with proxied({"search": fixture_server(ctl.dir, **FAST)}, state_dir=state) as bench:
        names = [tool.name for tool in (await bench.host.list_tools()).tools]
    assert names == ["search__lookup", "search__charge"]
    assert "its stored tool list" in bench.errlog.getvalue()
    assert (state / "tools" / "search.json.corrupt-1").exists()
    kept = StoredLists(state).load("search")  # the list it answered with, for the next run
    assert kept is not None
    assert [f"search__{tool.name}" for tool in kept] == names
    assert (state / "tools" / "search.json").stat().st_mode & 0o077 == 0


def test_a_planted_link_in_place_of_a_stored_list_is_moved_aside_not_read(
    tmp_path: Path,
) -> None:
    lists = StoredLists(tmp_path)
    assert lists.save("elsewhere", TOOLS) is None
    (tmp_path / "tools" / "search.json").symlink_to(tmp_path / "tools" / "elsewhere.json")
    assert lists.load("search") is None
    assert (tmp_path / "tools" / "search.json.corrupt-1").is_symlink()
    assert "unusable" in lists.problems[0]


def test_a_server_listing_ten_thousand_tools_is_refused_with_its_name() -> None:
    said = io.StringIO()
    upstream = Upstream("many", ServerConfig(command=["true"]), on_tools_changed=print, errlog=said)
    upstream._absorb(
        [types.Tool(name=f"t{n}", input_schema={"type": "object"}) for n in range(10_000)]
    )
    assert upstream.tools == {}
    assert "many: lists 10000 tools, over 1000: its list is refused" in said.getvalue()


def test_the_consoles_hint_for_a_server_that_exited_at_start_says_it_exited() -> None:
    exited = Failure(1, 0.0, "search", "upstream_failure", "exited", "tool_error", None, True)
    assert fault_words([exited]) == "server exits"
