"""Spans through the gateways: the in-process one and `breakerdeck gateway` over a loopback
socket (DESIGN, "Telemetry"): the tool is the platform, the span continues the agent's trace
and the platform gets the gateway's own `traceparent`, never the agent's `baggage`; a streamed
answer's span ends at its head; no span before the token check; nothing of the request in it."""

from __future__ import annotations

import httpx

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.gateway import Gateway
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.fixtures.platform import FakePlatform, FakeVault
from tests.front.conftest import Rig, auth
from tests.front.test_gateway_streams import platform, rig
from tests.front.upstream import Recorder
from tests.telemetry.conftest import Exported

#: The streams tests' gateway, before a platform that records what reached it.
__all__ = ["platform", "rig"]

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
AGENT_TRACE = {"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01", "baggage": "user=secret"}


async def test_the_in_process_gateway_names_the_platform_as_the_tool(exported: Exported) -> None:
    platform = FakePlatform("payments")
    client = httpx.AsyncClient(transport=platform, base_url="https://payments.test")
    with Engine(AgentPolicy(), clock=ManualClock()) as engine:
        gateway = Gateway(engine, {"payments": client}, FakeVault())
        await gateway.call("ava", "payments", path="/charges", json={"amount": 5})
    [span] = exported.calls()
    assert span.name == "execute_tool payments"
    assert span.attributes["gen_ai.tool.name"] == "payments"
    assert span.attributes["breakerdeck.key"] == "ava"


async def test_the_span_continues_the_agents_trace_and_the_platform_gets_ours(
    exported: Exported, rig: Rig, platform: Recorder
) -> None:
    answer = await rig.call("billing", "/p/payments/x", headers=AGENT_TRACE)
    assert answer.status_code == 200
    [span] = exported.calls()
    [attempt] = exported.children(span)
    assert format(span.get_span_context().trace_id, "032x") == TRACE_ID
    assert span.parent is not None and format(span.parent.span_id, "016x") == "00f067aa0ba902b7"
    sent = platform.seen[0]
    attempt_id = format(attempt.get_span_context().span_id, "016x")
    assert sent.header("traceparent") == [f"00-{TRACE_ID}-{attempt_id}-01"]
    assert sent.header("baggage") == []


async def test_a_stranger_without_a_token_makes_no_span(exported: Exported, rig: Rig) -> None:
    answer = await rig.client.get(rig.url + "/p/payments/x", headers=AGENT_TRACE)
    assert answer.status_code == 401
    assert exported.finished() == []


async def test_a_streamed_answers_span_ends_at_its_head(
    exported: Exported, rig: Rig, platform: Recorder
) -> None:
    url = rig.url + "/p/payments/sse/1"
    async with rig.client.stream("GET", url, headers=auth("billing")) as answer:
        assert answer.status_code == 200
        [span] = exported.calls()  # finished while the stream is still open
        assert span.attributes["breakerdeck.outcome"] == "success"
        platform.gate.put_nowait(None)
        await answer.aread()


async def test_nothing_of_the_request_or_its_answer_goes_into_a_span(
    exported: Exported, rig: Rig
) -> None:
    await rig.call(
        "billing",
        "/p/payments/x?card=4111111111111111",
        method="POST",
        json={"ssn": "078-05-1120"},
        headers={"X-Api-Key": "agent-secret"},
    )
    texts = " ".join(
        f"{name}={value}"
        for span in exported.finished()
        for attributes in (span.attributes, *(event.attributes for event in span.events))
        for name, value in (attributes or {}).items()
    )
    for secret in ("4111111111111111", "078-05-1120", "agent-secret", "stored-credential", "card"):
        assert secret not in texts


async def test_a_denied_agent_gets_a_short_circuit_open_span(exported: Exported, rig: Rig) -> None:
    for _ in range(6):
        await rig.call("billing", "/p/payments/garbage")
    denied = exported.calls()[-1]
    assert denied.attributes["error.type"] == "circuit_open"
    assert denied.attributes["gen_ai.tool.name"] == "payments"
    assert exported.children(denied) == []
