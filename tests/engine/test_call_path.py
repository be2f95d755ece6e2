"""The one call path under the harness: the opt-in probe wait and the async guard (DESIGN,
"Both policies"), counted at the fake platform's wire, on simulated time; and what every
shell gets from it (a Retry-After that extends a probe's lease, completion on cancellation)."""

import asyncio

import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.calls.callpath import CallPath, Completion, Retries
from breakerdeck.engine.core.breaker import Admission
from breakerdeck.engine.core.classify import Attempt
from breakerdeck.engine.engine import LEASE_GRACE_SECONDS, Engine
from breakerdeck.engine.events import Event
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
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
    assert calls == 3  # one attempt each: a function tool is retried only when marked
    assert (await search("q"))["status"] == "circuit_open"
    assert calls == 3


async def test_an_async_guarded_function_gets_its_arguments_and_its_result_back(
    harness: Harness,
) -> None:
    @harness.guard("crm")
    async def lookup(customer: str, *, field: str) -> dict[str, str]:
        return {customer: field}

    result = await lookup("c-1", field="email", agent="ava")
    assert (result["status"], result["data"]) == ("ok", {"c-1": "email"})
    assert harness.engine.view("crm@default").state == "closed"


async def test_a_retry_after_waited_out_extends_the_probes_lease_by_as_much(
    harness: Harness, platform: FakePlatform
) -> None:
    await _tripped_then_slow(harness, platform, delay=0.0)
    platform.set_fault(Fault.http(429, retry_after="10"))
    loop = asyncio.get_running_loop()
    admitted = loop.time()
    probe = asyncio.create_task(harness.call_tool("ava", "charge"))
    await asyncio.sleep(1)  # its first attempt was told to wait 10 s
    leased = admitted + harness.tools["charge"].lease + LEASE_GRACE_SECONDS
    assert harness.engine.breaker("payments@default").probe_deadline == leased + 10
    await probe


class _Waiting(Retries[Attempt]):
    """A budget of attempts that never end."""

    def completion(self) -> Completion:
        assert self.tried is not None
        return self.tried.outcome, self.tried.fault, "ok", None, None

    def answer(self) -> str:
        return "answered"


class _Hanging(CallPath[_Waiting, Attempt, str]):
    """A shell whose attempts never end."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def _attempt(self, budget: _Waiting) -> Attempt:
        budget.call.attempts += 1
        await asyncio.Event().wait()
        raise AssertionError("never answered")

    def _denied(self, budget: _Waiting, admission: Admission) -> str:
        return "denied"


def _cancel_mid_attempt(engine: Engine, agent: str) -> asyncio.Task[str]:
    call = engine.new_call("hang@default", agent, "hang", "wait", 30.0)
    budget = _Waiting(engine, call, 2, 1.0)
    return asyncio.create_task(_Hanging(engine)._run(budget, 61.0))


async def test_a_call_cancelled_mid_attempt_is_completed_once_neutral(
    tool_engine: Engine,
) -> None:
    lines: list[Event] = []
    tool_engine.subscribe(lines.append)
    task = _cancel_mid_attempt(tool_engine, "ava")
    await asyncio.sleep(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (line,) = [e for e in lines if e.type == ev.CALL_COMPLETED]
    assert (line.fields["fault"], line.fields["agent_status"]) == ("cancelled", "cancelled")
    assert (line.fields["outcome"], line.fields["counted"]) == ("caller_error", False)
    assert line.fields["attempts"] == 1


async def test_a_probe_cancelled_mid_attempt_frees_the_slot_for_the_next_call(
    tool_engine: Engine,
) -> None:
    failed = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="refused")
    for _ in range(3):
        call = tool_engine.new_call("hang@default", "bo", "hang", "wait", 30.0)
        tool_engine.admit(call, 30.0)
        tool_engine.complete(call, failed, "refused", "tool_error")
    await asyncio.sleep(30)
    tool_engine.poll()
    probe = _cancel_mid_attempt(tool_engine, "ava")
    await asyncio.sleep(1)
    probe.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probe
    after = tool_engine.new_call("hang@default", "cy", "hang", "wait", 30.0)
    assert tool_engine.admit(after, 30.0).allowed
    assert after.admitted_as == "probe"
