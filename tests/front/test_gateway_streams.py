"""Streaming both ways, and the metrics the gateway serves."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.front.conftest import Rig, StartRig, credential_file, write_config
from tests.front.upstream import Recorder


@pytest.fixture
async def platform() -> AsyncIterator[Recorder]:
    recorder = await Recorder().start()
    yield recorder
    await recorder.close()


@pytest.fixture
async def rig(tmp_path: Path, platform: Recorder, start_gateway: StartRig) -> Rig:
    cred = credential_file(tmp_path)
    config = write_config(
        tmp_path, {"payments": platform.url("/api")}, {"billing": {"payments": cred}}
    )
    started: Rig = await start_gateway(config)
    return started


async def test_an_sse_answer_reaches_the_agent_event_by_event(rig: Rig, platform: Recorder) -> None:
    async with rig.client.stream(
        "GET", rig.url + "/p/payments/sse/3", headers={"Authorization": "Bearer token-of-billing"}
    ) as answer:
        assert answer.headers["content-type"] == "text/event-stream"
        events = answer.aiter_raw()
        for number in range(3):
            platform.gate.put_nowait(None)  # the platform sends one event only now
            assert await anext(events) == b"data: event %d\n\n" % number


async def test_a_long_stream_from_a_probe_is_never_an_expired_probe(
    rig: Rig, platform: Recorder
) -> None:
    for _ in range(5):
        await rig.call("billing", "/p/payments/garbage")
    rig.clock.advance(300)
    async with rig.client.stream(
        "GET", rig.url + "/p/payments/sse/2", headers={"Authorization": "Bearer token-of-billing"}
    ) as answer:
        assert answer.status_code == 200
        rig.clock.advance(10 * rig.app.policy.probe_lease())
        platform.gate.put_nowait(None)
        platform.gate.put_nowait(None)
        assert b"".join([chunk async for chunk in answer.aiter_raw()]).count(b"data:") == 2
    second = await rig.call("billing", "/p/payments/x")
    assert second.status_code == 200
    view = rig.engine.view("billing")
    assert (view.state, view.count) == ("closed", 0)


async def test_metrics_are_served_without_a_token_with_the_designs_names(
    rig: Rig, platform: Recorder
) -> None:
    await rig.call("billing", "/p/payments/x")
    for _ in range(5):
        await rig.call("billing", "/p/payments/garbage")
    await rig.call("billing", "/p/payments/x")
    text = (await rig.client.get(rig.url + "/-/metrics")).text
    expected = [
        'breakerdeck_breaker_state{key="billing",state="open"} 1.0',
        'breakerdeck_breaker_state{key="billing",state="closed"} 0.0',
        'breakerdeck_calls_total{counted="false",key="billing",outcome="success"} 1.0',
        'breakerdeck_calls_total{counted="true",key="billing",outcome="upstream_failure"} 5.0',
        'breakerdeck_denied_calls_total{key="billing",reason="circuit_breaker_open"} 1.0',
        'breakerdeck_transitions_total{key="billing",to="open"} 1.0',
        'breakerdeck_call_duration_seconds_count{key="billing"} 6.0',
    ]
    for line in expected:
        assert line in text


async def test_metrics_count_a_whole_episode_trip_probe_and_recovery(
    rig: Rig, platform: Recorder
) -> None:
    for _ in range(5):
        await rig.call("billing", "/p/payments/garbage")
    rig.clock.advance(300)
    await rig.call("billing", "/p/payments/x")  # the probe, a success
    await rig.call("billing", "/p/payments/x")  # healthy again
    text = (await rig.client.get(rig.url + "/-/metrics")).text
    expected = [
        'breakerdeck_transitions_total{key="billing",to="open"} 1.0',
        'breakerdeck_transitions_total{key="billing",to="half_open"} 1.0',
        'breakerdeck_transitions_total{key="billing",to="closed"} 1.0',
        'breakerdeck_calls_total{counted="false",key="billing",outcome="success"} 2.0',
        'breakerdeck_breaker_state{key="billing",state="closed"} 1.0',
    ]
    for line in expected:
        assert line in text
