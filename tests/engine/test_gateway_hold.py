"""Hold and shadow at the in-process gateway (DESIGN, "Operator control: hold and shadow"): a
held agent gets the 403 `circuit_breaker_held` and nothing reaches its platform; a shadow
agent's calls reach the platform whatever its breaker would say, and the agent gets the
platform's answer. The fake platform counts every request."""

import httpx
import pytest

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.gateway import Gateway
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.fixtures.faults import Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform, FakeVault

AGENT = "ava"
HOUR = 3600.0


def held_body(until: str, reason: str, seconds: int) -> dict[str, object]:
    """DESIGN's 403 body for a call refused while held."""
    return {
        "error": "agent_halted",
        "reason": "circuit_breaker_held",
        "halt": {
            "state": "breaker_held",
            "recoverable_by": "operator",
            "cause": "operator_hold",
            "until": until,
            "retry_after_seconds": seconds,
            "instructions": (
                f"An operator paused calls to this platform until {until}, because: {reason}. "
                "Do not retry or work around it; tell the user."
            ),
        },
    }


HELD = held_body("2026-01-01T01:00:00.000Z", "vendor maintenance", 3600)


@pytest.fixture
def platform() -> FakePlatform:
    return FakePlatform("payments")


def gateway_on(engine: Engine, platform: FakePlatform) -> Gateway:
    client = httpx.AsyncClient(transport=platform, base_url="https://payments.test")
    return Gateway(engine, {"payments": client}, FakeVault())


async def call(gateway: Gateway) -> int:
    return (await gateway.call(AGENT, "payments", path="/charges", json={"amount": 5})).status


async def test_a_held_agent_gets_the_held_403_and_nothing_reaches_the_platform(
    platform: FakePlatform,
) -> None:
    engine = Engine(AgentPolicy(), clock=ManualClock())
    gateway = gateway_on(engine, platform)
    assert await call(gateway) == 200
    engine.hold(AGENT, "ana", "vendor maintenance", HOUR)
    answers = [await gateway.call(AGENT, "payments", path="/charges") for _ in range(3)]
    assert platform.requests == 1
    assert [(a.status, a.body) for a in answers] == [(403, HELD)] * 3


async def test_a_shadow_agent_reaches_the_platform_while_its_breaker_is_open(
    platform: FakePlatform,
) -> None:
    engine = Engine(AgentPolicy(), clock=ManualClock())
    engine.configure_mode(AGENT, "shadow")
    gateway = gateway_on(engine, platform)
    platform.set_fault(Fault(FaultKind.REFUSED))
    assert [await call(gateway) for _ in range(5)] == [502] * 5
    assert (engine.view(AGENT).state, engine.view(AGENT).mode) == ("open", "shadow")
    platform.set_fault(Fault(FaultKind.OK))
    assert [await call(gateway) for _ in range(3)] == [200] * 3
    assert platform.requests == 8
    assert engine.view(AGENT).state == "open"


async def test_engine_mode_shadow_is_the_default_for_every_agent(platform: FakePlatform) -> None:
    engine = Engine(AgentPolicy(), clock=ManualClock(), mode="shadow")
    gateway = gateway_on(engine, platform)
    platform.set_fault(Fault(FaultKind.REFUSED))
    statuses = [await call(gateway) for _ in range(7)]
    assert statuses == [502] * 7
    assert platform.requests == 7
