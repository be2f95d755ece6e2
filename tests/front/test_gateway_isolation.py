"""The gateway as a shared service: no agent's streams take another agent's connections, and a
stream ends when its agent does (DESIGN, "A shared service"). Counted at the platform's wire."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.events import Event
from breakerdeck.engine.front.gateway import transport
from tests.front.conftest import (
    SHORT_DEADLINE,
    Rig,
    StartRig,
    auth,
    body,
    credential_file,
    write_config,
)
from tests.front.upstream import Recorder
from tests.waiting import BOUND_SECONDS, eventually


@pytest.fixture
async def platform() -> AsyncIterator[Recorder]:
    recorder = await Recorder().start()
    yield recorder
    await recorder.close()


async def _rig(
    tmp_path: Path,
    platform: Recorder,
    start_gateway: StartRig,
    gateway: str,
    deadline: float | None = None,
) -> Rig:
    cred = credential_file(tmp_path)
    config = write_config(
        tmp_path,
        {"payments": platform.url("/api")},
        {"hog": {"payments": cred}, "billing": {"payments": cred}},
        gateway=gateway,
    )
    rig: Rig = await (
        start_gateway(config) if deadline is None else start_gateway(config, deadline)
    )
    return rig


@contextlib.asynccontextmanager
async def _streams(rig: Rig, agent: str, count: int) -> AsyncIterator[list[httpx.Response]]:
    """`count` SSE streams that `agent` opens and never reads past their head."""
    async with contextlib.AsyncExitStack() as stack:
        opened = [
            await stack.enter_async_context(
                rig.client.stream("GET", rig.url + "/p/payments/sse/1", headers=auth(agent))
            )
            for _ in range(count)
        ]
        yield opened


async def test_an_agent_holding_its_connection_bound_leaves_other_agents_answered(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(
        tmp_path, platform, start_gateway, "max_connections = 8\nmax_connections_per_agent = 4"
    )
    async with _streams(rig, "hog", 4) as held:
        assert [stream.status_code for stream in held] == [200] * 4
        for _ in range(3):
            answer = await rig.call("billing", "/p/payments/x")
            assert answer.status_code == 200
        assert len(platform.seen) == 7
        for _ in range(4):
            platform.gate.put_nowait(None)
    assert (rig.count("billing"), rig.count("hog")) == (0, 0)


async def test_a_call_over_its_agents_bound_is_gateway_busy_uncounted_and_never_sent(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "max_connections_per_agent = 2")
    async with _streams(rig, "hog", 2):
        busy = await rig.call("hog", "/p/payments/x")
        assert busy.status_code == 503
        assert body(busy) == {
            "error": "gateway_busy",
            "limit": "max_connections_per_agent",
            "retry_after_seconds": 1,
        }
        assert busy.headers["retry-after"] == "1"
        assert busy.headers["x-breakerdeck-call"].startswith("call-")
        assert len(platform.seen) == 2
        for _ in range(2):
            platform.gate.put_nowait(None)
    assert rig.count("hog") == 0


async def test_an_agent_waiting_at_its_own_bound_never_holds_up_another_agents_call(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Hog's calls wait for a slot until its streams end, however slowly the machine runs:
    # billing's answer must come while they still wait.
    monkeypatch.setattr(transport, "SLOT_WAIT_SECONDS", BOUND_SECONDS)
    rig = await _rig(tmp_path, platform, start_gateway, "max_connections_per_agent = 2")
    async with _streams(rig, "hog", 2):
        waiting = [asyncio.create_task(rig.call("hog", "/p/payments/x")) for _ in range(3)]
        await eventually(lambda: queued(rig) == 3, "hog's three calls queued for its slots")
        answer = await rig.call("billing", "/p/payments/x")
        assert answer.status_code == 200
        assert not any(call.done() for call in waiting)
        for _ in range(2):
            platform.gate.put_nowait(None)
    assert [(await call).status_code for call in waiting] == [200] * 3


def queued(rig: Rig) -> int:
    """Calls waiting at the gateway for a connection slot."""
    return len(rig.app.slots._waiters)


async def test_a_call_that_finds_the_total_bound_full_names_it(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "max_connections = 2")
    async with _streams(rig, "hog", 2):
        busy = await rig.call("billing", "/p/payments/x")
        assert (busy.status_code, body(busy)["limit"]) == (503, "max_connections")
        for _ in range(2):
            platform.gate.put_nowait(None)


async def test_a_slot_freed_within_the_wait_serves_the_waiting_call(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transport, "SLOT_WAIT_SECONDS", BOUND_SECONDS)  # a wait load cannot end
    rig = await _rig(tmp_path, platform, start_gateway, "max_connections_per_agent = 1")
    async with _streams(rig, "billing", 1):
        waiting = asyncio.create_task(rig.call("billing", "/p/payments/x"))
        await eventually(lambda: queued(rig) == 1, "the call queued for the slot")
        assert not waiting.done()
        platform.gate.put_nowait(None)  # the stream ends, and its slot goes to the waiter
    answer = await waiting
    assert answer.status_code == 200


async def test_a_probe_refused_as_gateway_busy_frees_the_probe_slot(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "max_connections = 1")
    for _ in range(5):
        await rig.call("billing", "/p/payments/garbage")
    rig.clock.advance(300)
    lines: list[Event] = []
    rig.engine.subscribe(lines.append)
    async with _streams(rig, "hog", 1):
        for _ in range(2):  # each is let in as the probe: the busy one before it freed the slot
            busy = await rig.call("billing", "/p/payments/x")
            assert body(busy)["error"] == "gateway_busy"
        platform.gate.put_nowait(None)
    probe = await rig.call("billing", "/p/payments/x")
    assert probe.status_code == 200
    billing = [line for line in lines if line.key == "billing"]
    assert [
        (line.type, line.fields.get("admitted_as"), line.fields.get("outcome")) for line in billing
    ] == [
        (ev.HALF_OPEN, None, None),
        (ev.CALL_COMPLETED, "probe", "gateway_busy"),
        (ev.CALL_COMPLETED, "probe", "gateway_busy"),
        (ev.CALL_COMPLETED, "probe", "success"),
        (ev.RECOVERED, None, None),
    ]


async def test_an_abandoned_stream_is_closed_at_the_platform_within_a_second(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "")
    async with rig.client.stream(
        "GET", rig.url + "/p/payments/sse/5", headers=auth("billing")
    ) as stream:
        platform.gate.put_nowait(None)
        events = stream.aiter_raw()
        assert await anext(events) == b"data: event 0\n\n"
    # The agent left with four events still to come: the platform sees its reader hang up.
    await platform.wait_cut(1, within=1.0)
    assert rig.app.slots.used == 0


async def test_an_agent_that_stops_reading_is_cut_at_the_idle_timeout_both_sides(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "", deadline=SHORT_DEADLINE)
    reader, writer = await asyncio.open_connection("127.0.0.1", int(rig.url.rsplit(":", 1)[1]))
    writer.write(
        b"GET /p/payments/flood HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer token-of-billing"
        b"\r\n\r\n"
    )
    await writer.drain()
    await reader.readuntil(b"\r\n\r\n")  # the head; then this agent reads nothing more
    await platform.wait_cut(1, within=5.0)
    assert rig.app.slots.used == 0
    received = len(await asyncio.wait_for(reader.read(), 5.0))  # the gateway closed it
    assert received < 64 * 1024 * 1024
    writer.close()


async def test_a_slow_small_body_reaches_the_agent_as_the_platform_sends_it(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "")
    async with rig.client.stream(
        "GET", rig.url + "/p/payments/slow-small", headers=auth("billing")
    ) as answer:
        chunks = answer.aiter_raw()
        assert await anext(chunks) == b"abc"  # before the platform sent the rest
        platform.gate.put_nowait(None)
        assert b"".join([chunk async for chunk in chunks]) == b"def"


async def test_proxy_headers_from_the_agent_never_reach_the_platform(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "")
    planted = {
        "X-Forwarded-For": "10.0.0.1",
        "X-Forwarded-Host": "admin.internal",
        "X-Forwarded-Proto": "https",
        "X-Forwarded-Port": "443",
        "Forwarded": "for=10.0.0.1;host=admin.internal",
        "X-Real-IP": "10.0.0.1",
        "True-Client-IP": "10.0.0.1",
        "CF-Connecting-IP": "10.0.0.1",
        "X-Original-URL": "/admin",
        "X_Forwarded_For": "10.0.0.1",
    }
    answer = await rig.call("billing", "/p/payments/x", headers=planted)
    assert answer.status_code == 200
    names = {name.lower() for name, _ in platform.seen[0].headers}
    assert not names & {name.lower() for name in planted}


async def test_a_relayed_redirect_is_a_platform_answer_never_a_failure_row(
    tmp_path: Path, platform: Recorder, start_gateway: StartRig
) -> None:
    rig = await _rig(tmp_path, platform, start_gateway, "")
    lines: list[Event] = []
    rig.engine.subscribe(lines.append)
    answer = await rig.call("billing", "/p/payments/redirect")
    assert answer.status_code == 302
    completed = [line for line in lines if line.type == ev.CALL_COMPLETED]
    assert [(c.fields["outcome"], c.fields["counted"]) for c in completed] == [
        ("platform_answer", False)
    ]
    assert ev.audit_form(completed[0]) is None
