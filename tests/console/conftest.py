"""Console tests: a real engine on a manual clock, driven through the real gateway and harness
over counting fake platforms. Normal asyncio loops (no simulated-time loop here)."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx
import pytest

from breakerdeck.console.app import BreakerdeckApp
from breakerdeck.console.source import InProcessSource
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.gateway import Gateway
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.fixtures.faults import Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform, FakeVault

PLATFORMS = ("payments", "crm", "email", "search")
OPERATOR = "oncall-ann"


@dataclass
class AgentWorld:
    """Agents calling platforms through the gateway (`agent` policy), on a manual clock."""

    engine: Engine
    clock: ManualClock
    gateway: Gateway
    platforms: dict[str, FakePlatform]
    vault: FakeVault = field(default_factory=FakeVault)

    async def call(self, agent: str, platform: str, times: int = 1) -> list[int]:
        statuses = []
        for _ in range(times):
            response = await self.gateway.call(agent, platform, path="/work")
            statuses.append(response.status)
        return statuses

    async def trip_upstream(self, agent: str, platform: str = "payments") -> None:
        self.platforms[platform].set_fault(Fault(FaultKind.REFUSED))
        await self.call(agent, platform, 5)
        assert self.engine.view(agent).state == "open"

    async def trip_auth(self, agent: str, platform: str = "crm") -> None:
        self.platforms[platform].revoke_credential()
        await self.call(agent, platform, 3)
        assert self.engine.view(agent).state == "open"

    def heal(self, platform: str) -> None:
        self.platforms[platform].set_fault(Fault(FaultKind.OK))
        self.platforms[platform].fix_credential()


@pytest.fixture
def agent_world(tmp_path) -> AgentWorld:
    clock = ManualClock(now=12 * 3600.0)  # reads 12:00:00 on screen
    engine = Engine(AgentPolicy(), clock=clock, state_dir=tmp_path / "state")
    platforms = {name: FakePlatform(name) for name in PLATFORMS}
    clients = {
        name: httpx.AsyncClient(transport=fake, base_url=f"https://{name}.test")
        for name, fake in platforms.items()
    }
    vault = FakeVault()
    world = AgentWorld(engine, clock, Gateway(engine, clients, vault), platforms, vault)
    yield world
    engine.close()


@dataclass
class ToolWorld:
    engine: Engine
    clock: ManualClock
    harness: Harness
    platforms: dict[str, FakePlatform]


@pytest.fixture
def tool_world(tmp_path) -> ToolWorld:
    clock = ManualClock(now=12 * 3600.0)
    engine = Engine(ToolPolicy(), clock=clock, state_dir=tmp_path / "state")
    platforms = {name: FakePlatform(name) for name in PLATFORMS}
    clients = {
        name: httpx.AsyncClient(transport=fake, base_url=f"https://{name}.test")
        for name, fake in platforms.items()
    }
    harness = Harness(engine, clients)
    # No backoff between a call's two attempts: on this real loop it is a real second's sleep
    # per failed call, and what the console shows of a call does not depend on it.
    harness.register(Tool("charge", backend="payments", path="/charges", backoff_seconds=0))
    harness.register(Tool("lookup", backend="crm", path="/lookup", backoff_seconds=0))
    yield ToolWorld(engine, clock, harness, platforms)
    engine.close()


@pytest.fixture
def worlds(tmp_path):
    """A factory of engines (agents over fake platforms), closed at the end."""
    made: list[AgentWorld] = []

    def make(name: str) -> AgentWorld:
        clock = ManualClock(now=12 * 3600.0)
        engine = Engine(AgentPolicy(), clock=clock, state_dir=tmp_path / name)
        platforms = {n: FakePlatform(n) for n in ("payments", "crm")}
        clients = {
            n: httpx.AsyncClient(transport=fake, base_url=f"https://{n}.test")
            for n, fake in platforms.items()
        }
        vault = FakeVault()
        world = AgentWorld(engine, clock, Gateway(engine, clients, vault), platforms, vault)
        made.append(world)
        return world

    yield make
    for world in made:
        world.engine.close()


def make_app(engine: Engine, **kwargs) -> BreakerdeckApp:
    source = InProcessSource(engine, label="test", speed=kwargs.pop("speed", None))
    return BreakerdeckApp(
        source, operator=OPERATOR, tick_seconds=None, min_repaint_seconds=0, **kwargs
    )


async def settle(pilot, rounds: int = 4) -> None:
    """Let the source reader and the message queue catch up with the engine."""
    for _ in range(rounds):
        await pilot.pause()
