"""A hold and a shadow breaker in metrics and spans (DESIGN, "Operator control: hold and
shadow", "Metrics", "Telemetry"): `held` as a state, each breaker's mode, would-be refusals
counted; a held refusal's `error.type` is `circuit_held`, a would-be refusal an event on a
call that went through."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import generate_latest

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.front.metrics import Counts, registry_for
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.policy import ToolPolicy
from breakerdeck.engine.telemetry.meters import observe
from breakerdeck.fixtures.faults import OK, Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform
from tests.telemetry.conftest import Exported

KEY = "payments@default"
REFUSED = Fault(FaultKind.REFUSED)


@pytest.fixture
def platform() -> FakePlatform:
    return FakePlatform("payments")


def harness_on(engine: Engine, platform: FakePlatform) -> Harness:
    client = httpx.AsyncClient(transport=platform, base_url="https://payments.test")
    harness = Harness(engine, {"payments": client})
    harness.register(Tool("charge", backend="payments", path="/charges", backoff_seconds=0))
    return harness


@pytest.fixture
def enforcing(platform: FakePlatform) -> Iterator[Harness]:
    with Engine(ToolPolicy(), clock=ManualClock()) as engine:
        yield harness_on(engine, platform)


@pytest.fixture
def shadowing(platform: FakePlatform) -> Iterator[Harness]:
    with Engine(ToolPolicy(), clock=ManualClock(), mode="shadow") as engine:
        yield harness_on(engine, platform)


def scraped(engine: Engine) -> str:
    return generate_latest(registry_for(engine, Counts())).decode()


async def trip(harness: Harness, platform: FakePlatform) -> None:
    platform.set_fault(REFUSED)
    for _ in range(3):
        await harness.call_tool("ava", "charge")
    platform.set_fault(OK)


async def test_metrics_after_a_hold_show_the_held_state_and_the_held_refusals(
    enforcing: Harness,
) -> None:
    await enforcing.call_tool("ava", "charge")
    engine = enforcing.engine
    engine.hold(KEY, "ops", "vendor maintenance", 1800)
    await enforcing.call_tool("ava", "charge")
    text = scraped(engine)
    assert f'breakerdeck_breaker_state{{key="{KEY}",state="held"}} 1.0' in text
    assert f'breakerdeck_breaker_state{{key="{KEY}",state="closed"}} 0.0' in text
    assert f'breakerdeck_transitions_total{{key="{KEY}",to="held"}} 1.0' in text
    assert f'breakerdeck_denied_calls_total{{key="{KEY}",reason="held"}} 1.0' in text
    assert f'breakerdeck_breaker_mode{{key="{KEY}",mode="enforce"}} 1.0' in text
    assert f'breakerdeck_would_deny_total{{key="{KEY}"}} 0.0' in text


async def test_metrics_count_a_shadow_breaker_s_would_be_refusals_by_key(
    shadowing: Harness, platform: FakePlatform
) -> None:
    await trip(shadowing, platform)
    for _ in range(2):
        assert (await shadowing.call_tool("ava", "charge"))["status"] == "ok"
    text = scraped(shadowing.engine)
    assert f'breakerdeck_breaker_mode{{key="{KEY}",mode="shadow"}} 1.0' in text
    assert f'breakerdeck_breaker_mode{{key="{KEY}",mode="enforce"}} 0.0' in text
    assert f'breakerdeck_would_deny_total{{key="{KEY}"}} 2.0' in text
    assert f'breakerdeck_denied_calls_total{{key="{KEY}",reason="circuit_breaker_open"}} 0.0' in (
        text
    )


async def test_the_same_families_reach_opentelemetry(
    shadowing: Harness, platform: FakePlatform
) -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    observe(meters, shadowing.engine, Counts())
    await trip(shadowing, platform)
    await shadowing.call_tool("ava", "charge")
    data = reader.get_metrics_data()
    assert data is not None
    points = {
        metric.name: list(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    meters.shutdown()
    modes = {p.attributes["mode"]: p.value for p in points["breakerdeck.breaker.mode"]}
    assert modes == {"enforce": 0, "shadow": 1}
    [would] = points["breakerdeck.would_deny"]
    assert would.value == 1


async def test_a_held_refusal_is_a_short_span_with_circuit_held(
    exported: Exported, enforcing: Harness
) -> None:
    await enforcing.call_tool("ava", "charge")
    enforcing.engine.hold(KEY, "ops", "vendor maintenance", 1800)
    await enforcing.call_tool("ava", "charge")
    *_, held = exported.calls()
    assert held.attributes["error.type"] == "circuit_held"
    assert held.attributes["breakerdeck.denied_reason"] == "held"
    assert held.attributes["breakerdeck.attempts"] == 0
    assert exported.children(held) == []


async def test_a_would_be_refusal_is_an_event_on_a_call_that_went_through(
    exported: Exported, shadowing: Harness, platform: FakePlatform
) -> None:
    await trip(shadowing, platform)
    assert (await shadowing.call_tool("ava", "charge"))["status"] == "ok"
    *_, through = exported.calls()
    assert "error.type" not in (through.attributes or {})
    assert through.attributes["breakerdeck.outcome"] == "success"
    [event] = [e for e in through.events if e.name == "breaker.would_deny"]
    assert event.attributes["breakerdeck.denied_reason"] == "circuit_breaker_open"
    assert event.attributes["breakerdeck.retry_after"] > 0
