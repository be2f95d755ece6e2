"""ADK runs `after_tool_callback` also on the dict a before or error callback returned: each
call is still recorded once."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from tests.adapters.drive_google_adk import GoogleAdkDriver
from tests.adapters.support import Crm


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
