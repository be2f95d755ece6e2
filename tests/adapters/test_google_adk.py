"""ADK runs `after_tool_callback` also on the dict a before or error callback returned: each
call is still recorded once. Its callbacks get the tool and its arguments, so a tool named
idempotent is retried there, through ADK's own runner loop, counted at the wire."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from pydantic import BaseModel

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from tests.adapters.drive_google_adk import GoogleAdkDriver
from tests.adapters.support import REFUSED, Crm


class Found(BaseModel):
    customer: str
    found: dict[str, Any]


async def test_a_failure_the_error_callback_answered_is_recorded_once(
    engine: Engine, crm: Crm, events: list[Any]
) -> None:
    driver = GoogleAdkDriver()
    driver.build(engine, crm)
    crm.down()
    await driver.runs(4)
    completed = [e for e in events if e.type == "call.completed"]
    assert len(completed) == 3 and engine.view("crm@default").count == 3
    assert [e.type for e in events].count("call.denied") == 1


async def test_a_cancelled_call_is_neutral_and_frees_the_probe_slot(
    engine: Engine, crm: Crm, clock: ManualClock, events: list[Any]
) -> None:
    driver = GoogleAdkDriver()
    driver.build(engine, crm)
    crm.down()
    await driver.runs(3)
    clock.advance(30)
    plugin, tool = driver.plugin, SimpleNamespace(name="lookup_customer")
    context = SimpleNamespace(function_call_id="call-probe", agent_name="support_bot")
    hooked = {"tool": tool, "tool_args": {"customer": "c-1"}, "tool_context": context}
    assert await plugin.before_tool_callback(**hooked) is None  # the probe goes
    cancelled = asyncio.CancelledError()
    assert await plugin.on_tool_error_callback(**hooked, error=cancelled) is None
    assert (engine.view("crm@default").state, engine.view("crm@default").count) == ("half_open", 3)
    assert events[-1].fields["fault"] == "cancelled"
    context.function_call_id = "call-next"
    assert await plugin.before_tool_callback(**hooked) is None  # the next call is the probe


async def test_an_idempotent_tools_failed_run_is_retried_and_its_answer_replaces_the_error(
    engine: Engine, crm: Crm, events: list[Any]
) -> None:
    driver = GoogleAdkDriver()
    driver.build(engine, crm, idempotent=["lookup_customer"])
    crm.platform.set_fault(REFUSED, requests=1)  # ADK's own run fails, the retry succeeds
    await driver.run()
    assert crm.platform.requests == 2
    assert driver.seen[-1]["customer"] == "c-1"  # the model reads the retry's answer
    (completed,) = [e for e in events if e.type == "call.completed"]
    assert (completed.fields["outcome"], completed.fields["attempts"]) == ("success", 2)
    assert engine.view("crm@default").count == 0


async def test_a_result_failing_its_schema_is_retried_and_the_retrys_answer_replaces_it(
    engine: Engine, crm: Crm
) -> None:
    driver = GoogleAdkDriver()
    crm.answer = {"unexpected": True}  # ADK's own run: a 2xx that fails the schema
    runs = 0
    original = crm.lookup_customer

    async def lookup_customer(customer: str) -> Any:
        nonlocal runs
        runs += 1
        if runs == 2:
            crm.answer = None  # the retry gets the real answer
        return await original(customer)

    crm.lookup_customer = lookup_customer  # type: ignore[method-assign]
    driver.build(engine, crm, idempotent=["lookup_customer"], schemas={"lookup_customer": Found})
    await driver.run()
    assert crm.platform.requests == 2
    assert driver.seen[-1]["customer"] == "c-1"


async def test_the_breaker_is_asked_again_before_the_retry(engine: Engine, crm: Crm) -> None:
    driver = GoogleAdkDriver()
    emails = [("send_email", {"to": f"{i}@example.com"}) for i in range(3)]
    driver.calls = [("lookup_customer", {"customer": "c-1"}), *emails]
    driver.build(engine, crm, idempotent=["lookup_customer"])
    crm.down()
    # The three emails (one attempt each) fail and open the breaker while the lookup waits
    # out its backoff: its retry is refused at the re-check, never sent.
    await driver.run()
    assert crm.platform.requests == 4
    assert engine.view("crm@default").state == "open"
    lookup = [a for a in driver.seen if a.get("tool") == "lookup_customer"]
    assert [answer["status"] for answer in lookup] == ["circuit_open"]
