"""Engine tests run on the simulated-time loop: timeouts, backoffs and cooldowns cost no real
time, and the fixtures' counters stay the witnesses."""

import asyncio

import httpx
import pytest
from pydantic import BaseModel

from breakerdeck.engine.clock import LoopClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.policy import ToolPolicy
from breakerdeck.engine.simtime import VirtualTimeLoop
from breakerdeck.fixtures.platform import FakePlatform

EPOCH = 1_767_225_600.0


def pytest_asyncio_loop_factories(config, item):
    return {"simulated": VirtualTimeLoop}


class Listing(BaseModel):
    ok: bool
    data: dict


@pytest.fixture
def platform() -> FakePlatform:
    return FakePlatform("payments")


@pytest.fixture
async def loop_clock() -> LoopClock:
    return LoopClock(asyncio.get_running_loop(), EPOCH)


@pytest.fixture
def tool_engine(loop_clock: LoopClock, tmp_path) -> Engine:
    engine = Engine(ToolPolicy(), clock=loop_clock, state_dir=tmp_path / "state")
    yield engine
    engine.close()


@pytest.fixture
def harness(tool_engine: Engine, platform: FakePlatform) -> Harness:
    client = httpx.AsyncClient(transport=platform, base_url="https://payments.test")
    harness = Harness(tool_engine, {"payments": client})
    harness.register(
        Tool(
            "charge",
            backend="payments",
            path="/charges",
            response_schema=Listing,
            alternatives=("queue_charge",),
        )
    )
    harness.register(Tool("refund", backend="payments", path="/refunds", response_schema=Listing))
    return harness
