"""The gateway's refusal while the breaker is open costs no request: the request is checked
only when the breaker would let the call in, and an unsendable one never holds the probe."""

import asyncio
from dataclasses import dataclass

import httpx
import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.gateway import Gateway
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.fixtures.faults import Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform, FakeVault

AGENT = "ava"
COOLDOWN = AgentPolicy().cooldown_seconds
UNSENDABLE = {"amount": float("nan")}


@dataclass
class JumpingClock:
    """The loop's time, which jumps `ahead` seconds after `reads` more monotonic reads: the
    moment between the gateway's look at the breaker and the breaker's own answer."""

    loop: asyncio.AbstractEventLoop
    epoch: float = 1_767_225_600.0
    offset: float = 0.0
    ahead: float = 0.0
    reads: int | None = None

    def monotonic(self) -> float:
        if self.reads is not None:
            if self.reads == 0:
                self.offset += self.ahead
                self.reads = None
            else:
                self.reads -= 1
        return self.loop.time() + self.offset

    def wall(self) -> float:
        return self.epoch + self.loop.time() + self.offset


@pytest.fixture
async def clock() -> JumpingClock:
    return JumpingClock(asyncio.get_running_loop())


@pytest.fixture
def engine(clock, tmp_path):
    engine = Engine(AgentPolicy(), clock=clock, state_dir=tmp_path / "state")
    yield engine
    engine.close()


@pytest.fixture
def platform() -> FakePlatform:
    return FakePlatform("payments")


@pytest.fixture
def vault() -> FakeVault:
    return FakeVault()


@pytest.fixture
def gateway(engine, platform, vault) -> Gateway:
    client = httpx.AsyncClient(transport=platform, base_url="https://payments.test")
    return Gateway(engine, {"payments": client}, vault)


async def charge(gateway: Gateway, json: object = None) -> int:
    response = await gateway.call(AGENT, "payments", path="/charges", json=json or {"amount": 5})
    return response.status


async def trip(gateway: Gateway, platform: FakePlatform) -> None:
    platform.set_fault(Fault(FaultKind.REFUSED))
    for _ in range(5):
        assert await charge(gateway) == 502
    platform.set_fault(Fault(FaultKind.OK))


async def test_while_halted_an_unsendable_request_is_halted_unchecked(gateway, platform, vault):
    await trip(gateway, platform)
    seen = (platform.requests, vault.fetches)
    response = await gateway.call(AGENT, "payments", path="/charges", json=UNSENDABLE)
    assert response.status == 403 and response.body["error"] == "agent_halted"
    assert (platform.requests, vault.fetches) == seen


async def test_while_halted_a_bad_target_is_halted_unchecked(gateway, platform):
    await trip(gateway, platform)
    response = await gateway.call(AGENT, "payments", method="GE T", path="/x\x00")
    assert response.status == 403 and response.body["error"] == "agent_halted"


async def test_a_request_let_in_as_the_cooldown_ends_is_checked_then_and_never_sent(
    gateway, platform, vault, engine, clock
):
    await trip(gateway, platform)
    seen = (platform.requests, vault.fetches)
    lines: list[ev.Event] = []
    engine.subscribe(lines.append)
    clock.ahead, clock.reads = COOLDOWN, 1  # the gateway sees it open, the breaker admits
    response = await gateway.call(AGENT, "payments", path="/charges", json=UNSENDABLE)
    assert response.status == 400 and response.body["error"] == "invalid_request"
    assert (platform.requests, vault.fetches) == seen
    (line,) = [e for e in lines if e.type == ev.CALL_COMPLETED]
    assert line.fields["admitted_as"] == "probe"
    assert (line.fields["attempts"], line.fields["counted"]) == (0, False)


async def test_an_unsendable_request_let_in_as_the_probe_hands_the_slot_back(
    gateway, platform, engine, clock
):
    await trip(gateway, platform)
    clock.ahead, clock.reads = COOLDOWN, 1
    assert await charge(gateway, UNSENDABLE) == 400
    assert await charge(gateway) == 200
    assert engine.view(AGENT).state == "closed"
