"""Spans through the harness (the library door): one `execute_tool` span per call, attempts as
children, denied calls as short error spans, transitions as events on the call that caused
them (DESIGN, "Telemetry")."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from opentelemetry import trace

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.policy import ToolPolicy
from breakerdeck.fixtures.faults import OK, Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform
from tests.telemetry.conftest import Exported

REFUSED = Fault(FaultKind.REFUSED)


async def trip(harness: Harness, platform: FakePlatform) -> None:
    """Three calls refused at the wire, each tried twice: the breaker opens for 30 s."""
    platform.set_fault(REFUSED)
    for _ in range(3):
        await harness.call_tool("ava", "charge")


@pytest.fixture
def platform() -> FakePlatform:
    return FakePlatform("payments")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def harness(platform: FakePlatform, clock: ManualClock) -> Iterator[Harness]:
    with Engine(ToolPolicy(), clock=clock) as engine:
        client = httpx.AsyncClient(transport=platform, base_url="https://payments.test")
        harness = Harness(engine, {"payments": client})
        harness.register(Tool("charge", backend="payments", path="/charges", backoff_seconds=0))
        yield harness


async def test_a_healthy_call_is_one_execute_tool_span_with_one_attempt(
    exported: Exported, harness: Harness
) -> None:
    await harness.call_tool("ava", "charge", {"amount": 10})
    [span] = exported.calls()
    assert span.name == "execute_tool charge"
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "charge",
        "gen_ai.tool.call.id": "call-000001",
        "breakerdeck.key": "payments@default",
        "breakerdeck.agent": "ava",
        "breakerdeck.outcome": "success",
        "breakerdeck.counted": False,
        "breakerdeck.attempts": 1,
        "breakerdeck.probe": False,
    }
    assert span.status.status_code is trace.StatusCode.UNSET
    assert [child.name for child in exported.children(span)] == ["breakerdeck.attempt"]


async def test_a_retried_call_has_each_attempt_as_a_child_span(
    exported: Exported, harness: Harness, platform: FakePlatform
) -> None:
    platform.set_fault(REFUSED)
    await harness.call_tool("ava", "charge")
    [span] = exported.calls()
    attempts = exported.children(span)
    assert [a.attributes["breakerdeck.attempt.number"] for a in attempts] == [1, 2]
    assert span.attributes["error.type"] == "upstream_failure"
    assert span.attributes["breakerdeck.attempts"] == 2
    assert span.status.status_code is trace.StatusCode.ERROR


async def test_the_call_that_trips_carries_the_transition_and_the_next_is_a_short_denial(
    exported: Exported, harness: Harness, platform: FakePlatform
) -> None:
    await trip(harness, platform)
    await harness.call_tool("ava", "charge")
    *failed, denied = exported.calls()
    assert [event.name for event in failed[-1].events] == ["circuit_breaker.tripped"]
    tripped = failed[-1].events[0].attributes
    assert dict(tripped or {}) == {
        "breakerdeck.key": "payments@default",
        "breakerdeck.failure_class": "upstream_failure",
        "breakerdeck.count": 3,
        "breakerdeck.cooldown_seconds": 30.0,
    }
    assert denied.attributes["error.type"] == "circuit_open"
    assert denied.attributes["breakerdeck.attempts"] == 0
    assert denied.attributes["breakerdeck.retry_after"] == 30.0
    assert exported.children(denied) == []


async def test_a_call_refused_while_the_probe_is_out_says_probe_in_flight(
    exported: Exported, harness: Harness, platform: FakePlatform, clock: ManualClock
) -> None:
    await trip(harness, platform)
    clock.advance(30)
    engine = harness.engine
    probe = engine.enter("payments@default", "bo", "payments", "charge", 30.0)
    assert engine.admit(probe, 60.0).as_probe
    await harness.call_tool("ava", "charge")
    denied = exported.calls()[-1]
    assert denied.attributes["error.type"] == "probe_in_flight"


async def test_the_probe_that_recovers_carries_half_open_and_recovered(
    exported: Exported, harness: Harness, platform: FakePlatform, clock: ManualClock
) -> None:
    await trip(harness, platform)
    platform.set_fault(OK)
    clock.advance(30)
    await harness.call_tool("ava", "charge")
    probe = exported.calls()[-1]
    assert probe.attributes["breakerdeck.probe"] is True
    names = [event.name for event in probe.events]
    assert names == ["circuit_breaker.half_open", "circuit_breaker.recovered"]


async def test_a_framework_execute_tool_span_is_added_to_never_doubled(
    exported: Exported, harness: Harness
) -> None:
    tracer = exported.provider.get_tracer("a-framework")
    framework = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "toolu_01"}
    with tracer.start_as_current_span("execute_tool charge", attributes=framework):
        await harness.call_tool("ava", "charge")
    [span] = exported.calls()
    assert span.instrumentation_scope.name == "a-framework"
    assert span.attributes["gen_ai.tool.call.id"] == "toolu_01"  # the framework's, kept
    assert span.attributes["breakerdeck.call.id"] == "call-000001"
    assert span.attributes["breakerdeck.key"] == "payments@default"
    assert span.attributes["breakerdeck.outcome"] == "success"
    assert [child.name for child in exported.children(span)] == ["breakerdeck.attempt"]


def test_a_guarded_plain_function_has_its_span_too(exported: Exported, harness: Harness) -> None:
    @harness.guard(Tool("lookup", backend="payments"))
    def lookup() -> str:  # the guard answers with its result object
        return "found"

    assert lookup()["status"] == "ok"
    [span] = exported.calls()
    assert span.name == "execute_tool lookup"
    assert [child.name for child in exported.children(span)] == ["breakerdeck.attempt"]


async def test_each_call_records_the_execute_tool_duration(
    exported: Exported, harness: Harness, platform: FakePlatform
) -> None:
    await harness.call_tool("ava", "charge")
    platform.set_fault(REFUSED)
    await harness.call_tool("ava", "charge")
    points = exported.points("gen_ai.execute_tool.duration")
    by_error = {point.attributes.get("error.type"): point.count for point in points}
    assert by_error == {None: 1, "upstream_failure": 1}
    assert all(p.attributes["gen_ai.tool.name"] == "charge" for p in points)
    [by_key] = exported.points("breakerdeck.call.duration")
    assert (dict(by_key.attributes), by_key.count) == ({"key": "payments@default"}, 2)
