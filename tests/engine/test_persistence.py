"""Verdicts and the audit log across a restart: a fresh engine on the same state directory."""

import asyncio

import httpx
import pytest
from pydantic import BaseModel

from breakerdeck.engine import events as ev
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.gateway import Gateway
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.fixtures.faults import Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform, FakeVault

OK = Fault(FaultKind.OK)
REFUSED = Fault(FaultKind.REFUSED)
KEY = "payments@default"


class Listing(BaseModel):
    ok: bool
    data: dict


RESTORED_FIELDS = [
    "state",
    "count",
    "last_failure_t",
    "opened_t",
    "cooldown_seconds",
    "failed_probes",
    "paged",
    "rate_limited_streak",
    "last_retry_after_seconds",
]


class Restarts:
    """Engines on one state directory, one after the other, as successive processes."""

    def __init__(self, policy, clock, state_dir) -> None:
        self.policy = policy
        self.clock = clock
        self.state_dir = state_dir
        self.engines: list[Engine] = []

    def start(self) -> Engine:
        for engine in self.engines:
            engine.close()
        engine = Engine(self.policy, clock=self.clock, state_dir=self.state_dir)
        self.engines.append(engine)
        return engine

    def close(self) -> None:
        for engine in self.engines:
            engine.close()


@pytest.fixture
def tool_runs(loop_clock, tmp_path):
    runs = Restarts(ToolPolicy(), loop_clock, tmp_path / "state")
    yield runs
    runs.close()


@pytest.fixture
def agent_runs(loop_clock, tmp_path):
    runs = Restarts(AgentPolicy(), loop_clock, tmp_path / "state")
    yield runs
    runs.close()


def harness_on(engine: Engine, platform: FakePlatform) -> Harness:
    client = httpx.AsyncClient(transport=platform, base_url="https://payments.test")
    harness = Harness(engine, {"payments": client})
    harness.register(Tool("charge", backend="payments", path="/c", response_schema=Listing))
    return harness


async def trip_tool(engine: Engine) -> None:
    dead = FakePlatform("payments", REFUSED)
    harness = harness_on(engine, dead)
    for _ in range(3):
        await harness.call_tool("ava", "charge")
    assert engine.view(KEY).state == "open"


async def test_a_fresh_engine_after_a_trip_fast_fails_its_first_call_off_the_wire(tool_runs):
    await trip_tool(tool_runs.start())
    engine = tool_runs.start()
    engine.restore()
    fresh = FakePlatform("payments", OK)

    result = await harness_on(engine, fresh).call_tool("ava", "charge")

    assert result["status"] == "circuit_open"
    assert 0 < result["retry_after_ms"] <= 30_000
    assert fresh.requests == 0


async def test_a_fresh_gateway_after_an_agent_trip_halts_its_first_call(agent_runs):
    engine = agent_runs.start()
    dead = FakePlatform("payments", REFUSED)
    vault = FakeVault()
    gateway = Gateway(engine, {"payments": httpx.AsyncClient(transport=dead)}, vault)
    for _ in range(5):
        await gateway.call("ava", "payments")
    await asyncio.sleep(100)
    engine = agent_runs.start()
    engine.restore()
    fresh = FakePlatform("payments", OK)
    gateway = Gateway(engine, {"payments": httpx.AsyncClient(transport=fresh)}, FakeVault())

    response = await gateway.call("ava", "payments")

    assert response.status == 403
    assert response.body["halt"]["cause"] == "breaker_upstream_failure"
    assert response.body["halt"]["retry_after_seconds"] == 200
    assert fresh.requests == 0


async def test_restore_writes_circuit_breaker_restored_with_the_design_fields(tool_runs):
    first = tool_runs.start()
    await trip_tool(first)
    opened_wall = first.clock.wall()
    await asyncio.sleep(10)
    engine = tool_runs.start()
    seen = []
    engine.subscribe(seen.append)

    restored = engine.restore()

    assert [e.type for e in seen] == [ev.RESTORED] and restored == seen
    (event,) = restored
    assert event.key == KEY
    assert list(event.fields) == RESTORED_FIELDS
    assert event.fields["state"] == "open"
    assert event.fields["count"] == 3
    assert event.fields["cooldown_seconds"] == 30
    assert event.fields["failed_probes"] == 0
    assert event.fields["paged"] is False
    assert event.fields["rate_limited_streak"] == 0
    assert event.fields["last_retry_after_seconds"] is None
    assert event.fields["opened_t"] == round(opened_wall - engine.epoch, 3) == -10
    assert event.fields["last_failure_t"] == -10
    (logged,) = engine.audit.query(key=KEY, types=[ev.RESTORED])
    assert logged.fields == event.fields


async def test_a_restored_open_breaker_half_opens_when_its_cooldown_runs_out(tool_runs):
    await trip_tool(tool_runs.start())
    await asyncio.sleep(10)
    engine = tool_runs.start()
    engine.restore()
    harness = harness_on(engine, FakePlatform("payments", OK))
    await asyncio.sleep(19)
    assert (await harness.call_tool("ava", "charge"))["status"] == "circuit_open"
    await asyncio.sleep(1)
    assert (await harness.call_tool("ava", "charge"))["status"] == "ok"
    assert engine.view(KEY).state == "closed"


async def test_a_verdict_older_than_the_longest_cooldown_is_discarded(tool_runs):
    await trip_tool(tool_runs.start())
    await asyncio.sleep(901)
    engine = tool_runs.start()

    assert engine.restore() == []

    keys = engine.keys()
    assert KEY not in keys
    fresh = FakePlatform("payments", OK)
    assert (await harness_on(engine, fresh).call_tool("ava", "charge"))["status"] == "ok"
    assert fresh.requests == 1


async def test_a_verdict_within_the_longest_cooldown_is_kept(tool_runs):
    await trip_tool(tool_runs.start())
    await asyncio.sleep(899)
    engine = tool_runs.start()
    assert [e.fields["state"] for e in engine.restore()] == ["open"]


async def test_a_stale_verdict_is_discarded_even_when_its_credential_has_worked(tool_runs):
    first = tool_runs.start()
    harness = harness_on(first, FakePlatform("payments", OK))
    assert (await harness.call_tool("ava", "charge"))["status"] == "ok"
    await trip_tool(first)
    await asyncio.sleep(3600)
    engine = tool_runs.start()

    assert engine.restore() == []

    fresh = FakePlatform("payments", OK)
    result = await harness_on(engine, fresh).call_tool("ava", "charge")
    assert result["status"] == "ok"
    assert engine.view(KEY).state == "closed"
    assert engine.credential_worked(KEY)


async def upstream_failures(gateway: Gateway, n: int) -> None:
    for _ in range(n):
        assert (await gateway.call("ava", "payments")).status == 502


def dead_gateway(engine: Engine) -> Gateway:
    dead = FakePlatform("payments", REFUSED)
    return Gateway(engine, {"payments": httpx.AsyncClient(transport=dead)}, FakeVault())


async def test_a_closed_verdict_with_a_count_survives_within_the_window(agent_runs):
    await upstream_failures(dead_gateway(agent_runs.start()), 3)
    await asyncio.sleep(500)  # past the 300 s cooldown, inside the 600 s window
    engine = agent_runs.start()

    (event,) = engine.restore()

    assert (event.fields["state"], event.fields["count"]) == ("closed", 3)
    assert event.fields["last_failure_t"] == -500
    await upstream_failures(dead_gateway(engine), 2)
    assert engine.view("ava").state == "open"


async def test_a_closed_verdict_older_than_the_window_is_discarded(agent_runs):
    await upstream_failures(dead_gateway(agent_runs.start()), 4)
    await asyncio.sleep(601)
    engine = agent_runs.start()
    assert engine.restore() == []
    await upstream_failures(dead_gateway(engine), 4)
    assert engine.view("ava").state == "closed" and engine.view("ava").count == 4


async def test_a_corrupt_verdict_store_is_reported_and_ignored(loop_clock, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "verdicts.sqlite3").write_bytes(b"this is not a database\x00\xff" * 200)

    engine = Engine(ToolPolicy(), clock=loop_clock, state_dir=state)
    try:
        assert any("verdicts.sqlite3" in problem for problem in engine.problems)
        assert engine.restore() == []
        await trip_tool(engine)
        assert (await harness_on(engine, FakePlatform("payments")).call_tool("ava", "charge"))[
            "status"
        ] == "circuit_open"
    finally:
        engine.close()
    again = Engine(ToolPolicy(), clock=loop_clock, state_dir=state)
    try:
        assert again.problems == []
        assert [e.fields["state"] for e in again.restore()] == ["open"]
    finally:
        again.close()


async def test_the_audit_log_survives_a_restart_and_seq_continues(tool_runs):
    first = tool_runs.start()
    await trip_tool(first)
    last_seq = first.seq
    before = first.audit.query(key=KEY)
    assert before and before[0].seq == last_seq

    engine = tool_runs.start()
    assert engine.seq == last_seq
    (restored,) = engine.restore()

    assert restored.seq == last_seq + 1
    history = engine.audit.query(key=KEY)
    assert [e.seq for e in history] == [restored.seq, *[e.seq for e in before]]
    assert [e.type for e in history][-3:] == [ev.CALL_FAILED] * 3


async def test_a_credential_that_worked_before_a_restart_pauses_on_a_401(tool_runs):
    first = tool_runs.start()
    assert (await harness_on(first, FakePlatform("payments")).call_tool("ava", "charge"))[
        "status"
    ] == "ok"
    engine = tool_runs.start()
    engine.restore()
    revoked = FakePlatform("payments")
    revoked.revoke_credential()
    harness = harness_on(engine, revoked)

    assert (await harness.call_tool("ava", "charge"))["status"] == "credential_revoked"
    assert (await harness.call_tool("ava", "charge"))["status"] == "credential_revoked"

    assert revoked.requests == 1
    assert engine.credential_paused(KEY)
    assert engine.view(KEY).count == 0


async def test_a_paused_credential_stays_paused_across_a_restart(tool_runs):
    first = tool_runs.start()
    platform = FakePlatform("payments")
    harness = harness_on(first, platform)
    await harness.call_tool("ava", "charge")
    platform.revoke_credential()
    await harness.call_tool("ava", "charge")
    engine = tool_runs.start()
    engine.restore()
    fixed = FakePlatform("payments")
    assert (await harness_on(engine, fixed).call_tool("ava", "charge"))["status"] == (
        "credential_revoked"
    )
    assert fixed.requests == 0
    engine.restore_credential(KEY, actor="alice")
    assert (await harness_on(engine, fixed).call_tool("ava", "charge"))["status"] == "ok"


async def test_the_ladder_and_page_flag_survive_a_restart(tool_runs):
    first = tool_runs.start()
    await trip_tool(first)
    dead = harness_on(first, FakePlatform("payments", REFUSED))
    for wait in (30, 60):
        await asyncio.sleep(wait)
        assert (await dead.call_tool("ava", "charge"))["status"] == "tool_error"
    assert first.view(KEY).paged and first.view(KEY).cooldown == 300
    engine = tool_runs.start()
    (restored,) = engine.restore()
    assert restored.fields["failed_probes"] == 2 and restored.fields["paged"] is True
    pages = []
    engine.subscribe(lambda e: pages.append(e) if e.type == ev.PAGE else None)
    await asyncio.sleep(300)
    dead = harness_on(engine, FakePlatform("payments", REFUSED))
    assert (await dead.call_tool("ava", "charge"))["status"] == "tool_error"
    assert engine.view(KEY).cooldown == 900  # the third step, not the first again
    assert pages == []  # one page per episode, restart or not


async def test_a_half_open_verdict_restores_as_open_and_due(tool_runs):
    first = tool_runs.start()
    await trip_tool(first)
    await asyncio.sleep(30)
    first.poll()
    assert first.view(KEY).state == "half_open"
    engine = tool_runs.start()
    (restored,) = engine.restore()
    assert restored.fields["state"] == "half_open"
    fresh = FakePlatform("payments", OK)
    assert (await harness_on(engine, fresh).call_tool("ava", "charge"))["status"] == "ok"
    assert fresh.requests == 1 and engine.view(KEY).state == "closed"


async def test_a_restored_open_breaker_still_names_its_last_failure(tool_runs):
    await trip_tool(tool_runs.start())
    engine = tool_runs.start()
    engine.restore()

    result = await harness_on(engine, FakePlatform("payments", OK)).call_tool("ava", "charge")

    assert "Connection refused" in result["reason"]
