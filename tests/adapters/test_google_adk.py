"""ADK runs `after_tool_callback` also on the dict a before or error callback returned: each
call is still recorded once."""

from __future__ import annotations

from typing import Any

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
