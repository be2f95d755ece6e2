"""The adapters' tests run each framework's own agent loop on the simulated-time loop, so
backoffs and deadlines cost no real time, and the engine on a manual clock, so a cooldown ends
when a test says (`clock.advance`). The fixture platforms' counters are the wire."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import Event
from breakerdeck.engine.policy import ToolPolicy
from breakerdeck.engine.simtime import VirtualTimeLoop
from breakerdeck.fixtures.platform import FakePlatform
from tests.adapters.support import Crm, Driver


def pytest_asyncio_loop_factories(config, item):
    return {"simulated": VirtualTimeLoop}


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def engine(clock: ManualClock, state_dir: Path) -> Iterator[Engine]:
    engine = Engine(ToolPolicy(), clock=clock, state_dir=state_dir)
    yield engine
    engine.close()


@pytest.fixture
def events(engine: Engine) -> list[Event]:
    seen: list[Event] = []
    engine.subscribe(seen.append)
    return seen


@pytest.fixture
def platform() -> FakePlatform:
    return FakePlatform("crm")


@pytest.fixture
def crm(platform: FakePlatform) -> Crm:
    return Crm(platform)


#: Each framework's driver (tests/adapters/drive_<framework>.py), imported only when used.
DRIVERS = {
    "pydantic_ai": "PydanticAiDriver",
    "openai_agents": "OpenAiAgentsDriver",
    "langchain": "LangchainDriver",
    "claude_agent": "ClaudeAgentDriver",
    "google_adk": "GoogleAdkDriver",
}


@pytest.fixture(params=sorted(DRIVERS))
def driver(request: pytest.FixtureRequest) -> Driver:
    module = importlib.import_module(f"tests.adapters.drive_{request.param}")
    made: Driver = getattr(module, DRIVERS[request.param])()
    return made
