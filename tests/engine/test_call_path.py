"""The one call path under the harness: the opt-in probe wait and the async guard (DESIGN,
"Both policies"), counted at the fake platform's wire, on simulated time."""

import asyncio

import pytest

from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.fixtures.faults import Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform
from tests.engine.conftest import Listing

REFUSED = Fault(FaultKind.REFUSED)


async def _tripped_then_slow(harness: Harness, platform: FakePlatform, delay: float) -> int:
    """Trip `payments@default`, wait out the cooldown, make the next answers slow and good;
    the requests the wire has seen so far."""
    platform.set_fault(REFUSED)
    for _ in range(3):
        await harness.call_tool("ava", "charge")
    platform.set_fault(Fault(FaultKind.SLOW, delay=delay))
    await asyncio.sleep(30)
    return platform.requests


@pytest.fixture
def waiting(harness: Harness) -> Harness:
    harness.register(
        Tool(
            "charge",
            backend="payments",
            path="/charges",
            response_schema=Listing,
            probe_wait_seconds=5,
        )
    )
    return harness


async def test_calls_that_wait_for_a_successful_probe_then_go_as_normal_calls(
    waiting: Harness, platform: FakePlatform
) -> None:
    before = await _tripped_then_slow(waiting, platform, delay=2.0)
    results = await asyncio.gather(*(waiting.call_tool("ava", "charge") for _ in range(10)))
    assert [r["status"] for r in results] == ["ok"] * 10
    assert platform.requests - before == 10


async def test_while_the_probe_is_out_only_the_probe_is_on_the_wire(
    waiting: Harness, platform: FakePlatform
) -> None:
    before = await _tripped_then_slow(waiting, platform, delay=2.0)
    calls = [asyncio.create_task(waiting.call_tool("ava", "charge")) for _ in range(10)]
    await asyncio.sleep(1.0)  # the probe is half-way through its 2 s answer
    assert platform.requests - before == 1
    await asyncio.gather(*calls)


async def test_a_waiter_whose_bound_runs_out_first_gets_probe_in_flight(
    waiting: Harness, platform: FakePlatform
) -> None:
    before = await _tripped_then_slow(waiting, platform, delay=10.0)
    results = await asyncio.gather(*(waiting.call_tool("ava", "charge") for _ in range(5)))
    assert sorted(r["status"] for r in results) == ["ok"] + ["probe_in_flight"] * 4
    assert platform.requests - before == 1


def test_a_probe_wait_longer_than_the_deadline_is_refused() -> None:
    with pytest.raises(ValueError, match="probe_wait_seconds"):
        Tool("charge", backend="payments", deadline_seconds=30, probe_wait_seconds=31)


async def test_an_async_function_guarded_trips_and_then_is_never_called(harness: Harness) -> None:
    calls = 0

    @harness.guard("search")
    async def search(query: str) -> dict[str, str]:
        nonlocal calls
        calls += 1
        raise ConnectionError("connection refused")

    statuses = [(await search("q"))["status"] for _ in range(3)]
    assert statuses == ["tool_error"] * 3
    assert calls == 6  # two attempts each: a function tool keeps its retry budget for now
    assert (await search("q"))["status"] == "circuit_open"
    assert calls == 6


async def test_an_async_guarded_function_gets_its_arguments_and_its_result_back(
    harness: Harness,
) -> None:
    @harness.guard("crm")
    async def lookup(customer: str, *, field: str) -> dict[str, str]:
        return {customer: field}

    result = await lookup("c-1", field="email", agent="ava")
    assert (result["status"], result["data"]) == ("ok", {"c-1": "email"})
    assert harness.engine.view("crm@default").state == "closed"
