"""The MCP proxy's budget on its own (sans I/O): what a `tools/call` does after each attempt,
decided without an upstream, a host or real time. The wire-level behaviour is the other
`test_mcp_*` files'; these are the decisions they rest on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest

from breakerdeck.engine import Engine, ToolPolicy
from breakerdeck.engine.front.mcp import classify
from breakerdeck.engine.front.mcp.breakers import Breakers, ManualFrontClock
from breakerdeck.engine.front.mcp.call import McpBudget, Sent
from breakerdeck.engine.front.mcp.settings.config import ServerConfig
from breakerdeck.engine.front.mcp.upstream import Upstream
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass

KEY = "search@default"
LOOKUP = types.Tool(
    name="lookup",
    input_schema={"type": "object"},
    annotations=types.ToolAnnotations(idempotent_hint=True),
)
FAILED = classify.Verdict(
    classify.counted(OutcomeClass.UPSTREAM_FAILURE, "the server failed (JSON-RPC -32603)"),
    "internal_error",
    retry=True,
)


@pytest.fixture
def clock() -> ManualFrontClock:
    return ManualFrontClock()


@pytest.fixture
def breakers(clock: ManualFrontClock) -> Iterator[Breakers]:
    with Engine(ToolPolicy(), clock=clock) as engine:
        yield Breakers(engine, clock)


def budget(breakers: Breakers, **settings: Any) -> McpBudget:
    """An admitted `search__lookup` call (a probe when the breaker is half-open)."""
    config = ServerConfig.model_validate({"command": ["search"], **settings})
    upstream = Upstream("search", config, on_tools_changed=lambda: None)
    engine = breakers.engine
    call = engine.enter(KEY, "ava", "search", "search__lookup", config.deadline_seconds)
    assert engine.admit(call, config.lease).allowed
    return McpBudget(breakers, call, None, upstream, LOOKUP, {"query": "q"})  # type: ignore[arg-type]


def trip(engine: Engine) -> None:
    for _ in range(3):
        call = engine.enter(KEY, "bo", "search", "search__charge", 30.0)
        engine.admit(call, 30.0)
        engine.complete(call, FAILED.outcome, "internal_error", "tool_error")


def test_a_retry_the_recheck_refuses_is_written_with_the_last_attempts_outcome(
    breakers: Breakers,
) -> None:
    retrying = budget(breakers)
    assert retrying.report(Sent(FAILED))  # a retry is due
    trip(breakers.engine)  # while it waited out its backoff

    assert not retrying.recheck()
    outcome, fault, status, refresh, platform_status = retrying.completion()
    assert (outcome, fault, status) == (FAILED.outcome, "internal_error", "circuit_open")
    assert (refresh, platform_status) == (None, None)


def test_a_retry_the_recheck_refuses_is_answered_circuit_open_with_the_time_left(
    breakers: Breakers,
) -> None:
    retrying = budget(breakers)
    retrying.report(Sent(FAILED))
    trip(breakers.engine)
    retrying.recheck()
    breakers.engine.complete(retrying.call, *retrying.completion())

    answer = retrying.answer()
    assert answer.is_error
    assert answer.structured_content is not None
    assert answer.structured_content["status"] == "circuit_open"
    assert answer.structured_content["tool"] == "search__lookup"
    assert answer.structured_content["retry_after_ms"] == 30_000
    # read after completing: the count includes this call's own failure
    assert "search@default failed 4 times" in answer.structured_content["reason"]


def test_a_retry_after_waited_out_extends_the_probes_lease_by_as_much(
    breakers: Breakers, clock: ManualFrontClock
) -> None:
    trip(breakers.engine)
    clock.advance(30)
    probe = budget(breakers)
    assert probe.call.admitted_as == "probe"
    breaker = breakers.engine.breaker(KEY)
    leased = breaker.probe_deadline
    limited = classify.Verdict(
        Outcome(OutcomeClass.RATE_LIMITED, retry_after=5.0, detail="429"),
        "http_429",
        retry=True,
        wait=5.0,
    )
    probe.report(Sent(limited))

    assert probe.wait() == 5.0
    assert breaker.probe_deadline == leased + 5.0


def test_without_a_retry_after_the_wait_is_the_backoff_and_the_lease_stays(
    breakers: Breakers, clock: ManualFrontClock
) -> None:
    trip(breakers.engine)
    clock.advance(30)
    probe = budget(breakers, backoff_seconds=2.5)
    leased = breakers.engine.breaker(KEY).probe_deadline
    probe.report(Sent(FAILED))

    assert probe.wait() == 2.5
    assert breakers.engine.breaker(KEY).probe_deadline == leased


def test_a_resend_after_an_expired_session_leaves_the_round_its_retry(
    breakers: Breakers,
) -> None:
    """The resend counts as a second attempt in the line, inside the first round: a failed
    resend of an idempotent tool still gets the budget's second round."""
    resent = budget(breakers, attempts=2)
    resent.call.attempts = 2  # the attempt and its resend
    assert resent.report(Sent(FAILED))  # a retry is due
    resent.call.attempts = 3
    assert not resent.report(Sent(FAILED))


def test_an_answer_that_asks_no_retry_ends_the_budget_at_once(breakers: Breakers) -> None:
    answered = budget(breakers, attempts=3)
    assert not answered.report(Sent(classify.Verdict(SUCCESS, "ok", relay=True)))
