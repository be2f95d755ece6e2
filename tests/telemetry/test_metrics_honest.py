"""Metrics that do not mislead an on-call team (DESIGN, "Metrics"; issue 20): a restart is not a
transition, a reset is one, and every door counts a call that has a line the same way."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.front.metrics import Counts, registry_for
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy
from tests.front.conftest import StartRig, credential_file, write_config
from tests.front.mcp_support import control, fixture_server, proxied
from tests.front.upstream import Recorder

FAILURE = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="502")


def trip(engine: Engine, key: str) -> None:
    """Counted failures on `key` until its breaker opens."""
    for _ in range(20):
        call = engine.enter(key, key, "payments", "payments", 10.0)
        assert engine.admit(call, 10.0).allowed
        engine.complete(call, FAILURE, "upstream", 502)
        if engine.view(key).state == "open":
            return
    raise AssertionError(f"{key} never tripped")


def scraped(engine: Engine, counts: Counts | None = None) -> str:
    return generate_latest(registry_for(engine, counts or Counts())).decode()


def test_a_verdict_restored_at_start_is_no_transition(tmp_path: Path) -> None:
    clock = ManualClock()
    with Engine(AgentPolicy(), clock=clock, state_dir=tmp_path) as before:
        trip(before, "billing")
        assert 'breakerdeck_transitions_total{key="billing",to="open"} 1.0' in scraped(before)
    with Engine(AgentPolicy(), clock=clock, state_dir=tmp_path) as after:
        after.restore()
        text = scraped(after)
    assert 'breakerdeck_breaker_state{key="billing",state="open"} 1.0' in text
    assert 'breakerdeck_transitions_total{key="billing",to="open"} 0.0' in text
    assert 'breakerdeck_transitions_total{key="billing",to="closed"} 0.0' in text


def test_a_known_keys_counters_start_at_zero_so_its_first_trip_is_an_increase() -> None:
    with Engine(AgentPolicy(), clock=ManualClock()) as engine:
        call = engine.enter("billing", "billing", "payments", "payments", 10.0)
        engine.admit(call, 10.0)
        text = scraped(engine)
    for line in (
        'breakerdeck_transitions_total{key="billing",to="open"} 0.0',
        'breakerdeck_denied_calls_total{key="billing",reason="circuit_breaker_open"} 0.0',
        'breakerdeck_denied_calls_total{key="billing",reason="probe_in_flight"} 0.0',
        'breakerdeck_pages_total{key="billing"} 0.0',
    ):
        assert line in text


def test_a_reset_is_a_transition_to_closed(tmp_path: Path) -> None:
    with Engine(AgentPolicy(), clock=ManualClock()) as engine:
        trip(engine, "billing")
        engine.reset("billing", "ops@example.com", "the platform is back")
        text = scraped(engine)
    assert 'breakerdeck_transitions_total{key="billing",to="closed"} 1.0' in text
    assert 'breakerdeck_breaker_state{key="billing",state="closed"} 1.0' in text


async def test_a_relayed_redirect_is_counted_as_a_platform_answer(
    tmp_path: Path, start_gateway: StartRig
) -> None:
    platform = await Recorder().start()
    try:
        config = write_config(
            tmp_path,
            {"payments": platform.url("/api")},
            {"billing": {"payments": credential_file(tmp_path)}},
        )
        rig = await start_gateway(config)
        assert (await rig.call("billing", "/p/payments/redirect")).status_code == 302
        text = (await rig.client.get(rig.url + "/-/metrics")).text
    finally:
        await platform.close()
    line = 'breakerdeck_calls_total{counted="false",key="billing",outcome="platform_answer"} 1.0'
    assert line in text
    assert "upstream_error" not in text


async def test_the_mcp_proxy_counts_a_refused_call_as_the_gateway_counts_caller_errors(
    tmp_path: Path,
) -> None:
    ctl = control(tmp_path)
    async with proxied({"search": fixture_server(ctl.dir, attempts=1)}) as bench:
        counts = bench.proxy.breakers.counts = Counts()
        await bench.call("search__charge", {"amount": "ten"})  # fails the tool's schema
        text = scraped(bench.engine, counts)
    line = (
        'breakerdeck_calls_total{counted="false",key="search@default",outcome="caller_error"} 1.0'
    )
    assert line in text
