"""`--events FILE`: the gateway and the MCP proxy write the headless trace's format, checked as
an outside tool checks a scenario's trace (DESIGN, "Front doors")."""

from __future__ import annotations

import asyncio
import json
import signal
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from breakerdeck.fixtures.faults import REFUSED
from breakerdeck.fixtures.platform import FakePlatform
from breakerdeck.fixtures.server import PlatformServer
from tests.console.test_headless import CALL_FIELDS, KEYS
from tests.front.conftest import DemoRun, auth, credential_file, write_config
from tests.front.test_gateway_process import Gateway


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _check_format(lines: list[dict[str, Any]]) -> None:
    """What every trace holds to, whichever door wrote it."""
    seqs = [line["seq"] for line in lines]
    assert seqs == sorted(set(seqs))
    start = datetime.fromisoformat(lines[0]["at"].replace("Z", "+00:00")).timestamp()
    start -= lines[0]["t"]
    for line in lines:
        assert list(line)[:6] == KEYS
        at = datetime.fromisoformat(line["at"].replace("Z", "+00:00")).timestamp()
        assert abs(at - (start + line["t"])) < 2e-3
        if line["type"] == "call.completed":
            assert list(line)[6:] == CALL_FIELDS
    by_seq = {line["seq"]: line for line in lines}
    for line in lines:
        if "cause_seq" in line:
            assert by_seq[line["cause_seq"]]["t"] == line["t"]


async def test_the_gateway_writes_every_call_and_its_trip_to_events(tmp_path: Path) -> None:
    platform = FakePlatform("payments")
    events = tmp_path / "events.jsonl"
    with PlatformServer({"payments": platform}) as server:
        config = write_config(
            tmp_path,
            {"payments": server.url("payments")},
            {"billing": {"payments": credential_file(tmp_path)}},
        )
        platform.set_fault(REFUSED)
        gateway = Gateway(config, "--events", str(events))
        try:
            async with httpx.AsyncClient(timeout=30) as client:
                for _ in range(6):
                    await client.get(gateway.url + "/p/payments/x", headers=auth("billing"))
            gateway.process.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(gateway.process.wait, 10) == 0
        finally:
            gateway.stop()
    lines = _lines(events)
    _check_format(lines)
    assert [line["type"] for line in lines] == [
        *["call.completed"] * 5,
        "circuit_breaker.tripped",
        "call.denied",
    ]
    calls = lines[:5]
    assert {(c["platform"], c["tool"], c["fault"], c["agent_status"]) for c in calls} == {
        ("payments", "payments", "reset", 502)  # the fixture accepts, then closes: a reset
    }
    assert [c["attempts"] for c in calls] == [1] * 5 == [1] * platform.requests
    assert lines[5]["cause_seq"] == lines[4]["seq"]
    assert lines[6]["reason"] == "circuit_breaker_open"


@pytest.mark.xdist_group("mcp-demo")
def test_the_mcp_demo_writes_its_calls_with_server_and_tool_names(mcp_demo: DemoRun) -> None:
    lines = _lines(mcp_demo.events)
    _check_format(lines)
    calls = [line for line in lines if line["type"] == "call.completed"]
    assert {(c["platform"], c["tool"]) for c in calls} >= {("search", "search__lookup")}
    # Which server's breaker trips first depends on how many of search's calls timed out
    # within its hang, which a loaded machine changes: search's trip is the one awaited.
    tripped = [line["key"] for line in lines if line["type"] == "circuit_breaker.tripped"]
    assert any(key.startswith("search@") for key in tripped), tripped
