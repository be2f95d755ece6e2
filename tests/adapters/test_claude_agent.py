"""Claude's hooks: what only a pair of hooks around the CLI's own run can get wrong."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from tests.adapters.drive_claude_agent import ClaudeAgentDriver, fire
from tests.adapters.support import KEY, Crm

USE = {
    "session_id": "session-1",
    "transcript_path": "/tmp/transcript.jsonl",
    "cwd": "/tmp",
    "tool_name": "lookup_customer",
    "tool_input": {"customer": "c-1"},
}


@pytest.fixture
def claude(engine: Engine, crm: Crm) -> ClaudeAgentDriver:
    driver = ClaudeAgentDriver()
    driver.build(engine, crm)
    return driver


async def tripped(claude: ClaudeAgentDriver, crm: Crm, clock: ManualClock) -> None:
    """Open, then half-open: the next call is the probe."""
    crm.down()
    await claude.runs(3)
    clock.advance(30)


async def test_an_interrupted_probe_frees_the_slot_and_counts_nothing(
    claude: ClaudeAgentDriver, engine: Engine, crm: Crm, clock: ManualClock
) -> None:
    await tripped(claude, crm, clock)
    use = {**USE, "tool_use_id": "toolu_probe"}
    assert await fire(claude.hooks, "PreToolUse", use) == {}
    said = await fire(
        claude.hooks, "PostToolUseFailure", {**use, "error": "Interrupted", "is_interrupt": True}
    )
    assert said == {}
    view = engine.view(KEY)
    assert (view.state, view.count) == ("half_open", 3)
    assert await fire(claude.hooks, "PreToolUse", {**use, "tool_use_id": "toolu_next"}) == {}


async def test_a_probe_the_host_denied_after_us_is_neutral_at_its_lease(
    claude: ClaudeAgentDriver, engine: Engine, crm: Crm, clock: ManualClock, events: list[Any]
) -> None:
    await tripped(claude, crm, clock)
    assert await fire(claude.hooks, "PreToolUse", {**USE, "tool_use_id": "toolu_denied"}) == {}
    await asyncio.sleep(31)  # simulated seconds: the lease (30 s) runs out, never reported
    completed = [e for e in events if e.type == "call.completed"][-1]
    assert completed.fields["fault"] == "cancelled" and completed.fields["probe"] is True
    view = engine.view(KEY)
    assert (view.state, view.count) == ("half_open", 3)
    assert not claude.hooks.calls.owes("toolu_denied")


async def test_a_report_for_an_unknown_tool_use_id_is_warned_of_and_records_nothing(
    claude: ClaudeAgentDriver, engine: Engine, events: list[Any]
) -> None:
    use = {**USE, "tool_use_id": "toolu_stranger", "error": "ConnectError: refused"}
    with pytest.warns(UserWarning, match="toolu_stranger"):
        assert await fire(claude.hooks, "PostToolUseFailure", use) == {}
    assert events == []


async def test_a_failure_whose_text_names_nothing_the_policy_reads_is_left_as_it_was(
    claude: ClaudeAgentDriver, engine: Engine
) -> None:
    use = {**USE, "tool_use_id": "toolu_exit"}
    await fire(claude.hooks, "PreToolUse", use)
    said = await fire(claude.hooks, "PostToolUseFailure", {**use, "error": "Exit code 1"})
    assert said == {}
    assert engine.view(KEY).count == 0


async def test_a_call_with_no_tool_use_id_runs_unguarded_said_and_records_nothing(
    claude: ClaudeAgentDriver, events: list[Any]
) -> None:
    use = {**USE, "tool_use_id": None}
    with pytest.warns(UserWarning, match="no call id"):
        assert await fire(claude.hooks, "PreToolUse", use) == {}
    assert await fire(claude.hooks, "PostToolUse", {**use, "tool_response": "ok"}) == {}
    assert [e for e in events if e.type == "call.completed"] == []
