"""A shadow breaker (DESIGN, "Operator control: hold and shadow") decides as an enforcing one
would, lets through every call it would refuse, writes `call.would_deny` with the call's
outcome right before its line, and moves nothing on those calls' outcomes. The backend's own
count is the witness that the calls went through."""

import asyncio
from pathlib import Path
from typing import Any

import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.policy import ToolPolicy

KEY = "crm@default"


class Backend:
    def __init__(self) -> None:
        self.calls = 0
        self.failing = True

    async def run(self, args: Any = None) -> dict[str, int]:
        self.calls += 1
        if self.failing:
            raise ConnectionError("crm unreachable")
        return {"id": self.calls}


def shadowed(tmp_path: Path | None = None) -> tuple[Engine, Harness, Backend, list[ev.Event]]:
    state = None if tmp_path is None else tmp_path / "state"
    engine = Engine(ToolPolicy(), clock=ManualClock(), state_dir=state, mode="shadow")
    engine.restore()
    lines: list[ev.Event] = []
    engine.subscribe(lines.append)
    backend = Backend()
    harness = Harness(engine)
    harness.register(Tool("lookup", backend="crm", attempts=1, function=backend.run))
    return engine, harness, backend, lines


async def trip(harness: Harness) -> None:
    for _ in range(ToolPolicy().failure_threshold):
        await harness.call_tool("ava", "lookup")


async def test_a_shadow_breaker_trips_as_an_enforcing_one_and_says_it_is_shadow() -> None:
    engine, harness, _, lines = shadowed()
    await trip(harness)
    tripped = next(e for e in lines if e.type == ev.TRIPPED)
    assert tripped.fields["shadow"] is True
    view = engine.view(KEY)
    assert (view.state, view.mode) == ("open", "shadow")


async def test_a_call_it_would_refuse_goes_through_and_its_caller_sees_the_platform() -> None:
    _, harness, backend, lines = shadowed()
    await trip(harness)
    before = backend.calls
    answer = await harness.call_tool("ava", "lookup")
    assert answer["status"] == "tool_error"  # the platform's own answer, not circuit_open
    assert backend.calls == before + 1
    assert not [e for e in lines if e.type == ev.CALL_DENIED]


async def test_its_would_deny_line_comes_right_before_the_calls_line_with_the_outcome() -> None:
    engine, harness, backend, lines = shadowed()
    await trip(harness)
    backend.failing = False
    engine.clock.advance(2.5)  # type: ignore[attr-defined]
    await harness.call_tool("ava", "lookup")
    would, completed = lines[-2], lines[-1]
    assert (would.type, completed.type) == (ev.CALL_WOULD_DENY, ev.CALL_COMPLETED)
    assert would.fields["call_id"] == completed.fields["call_id"]
    assert would.fields["reason"] == "circuit_breaker_open"
    assert (would.fields["outcome"], would.fields["attempt_seconds"]) == ("success", 0.0)
    assert list(would.fields) == [
        "call_id",
        "platform",
        "reason",
        "retry_after_seconds",
        "outcome",
        "attempt_seconds",
    ]


async def test_a_would_be_refused_calls_line_says_it_was_not_counted() -> None:
    _, harness, _, lines = shadowed()
    await trip(harness)
    await harness.call_tool("ava", "lookup")  # would be refused; fails at the platform
    completed = lines[-1]
    assert (completed.type, completed.fields["outcome"], completed.fields["counted"]) == (
        ev.CALL_COMPLETED,
        "upstream_failure",
        False,
    )


async def test_a_would_be_refused_outcome_moves_no_counter_and_no_state() -> None:
    engine, harness, backend, _ = shadowed()
    await trip(harness)
    backend.failing = False
    for _ in range(3):
        await harness.call_tool("ava", "lookup")  # would be refused: a success changes nothing
    view = engine.view(KEY)
    assert (view.state, view.count) == ("open", ToolPolicy().failure_threshold)


async def test_after_its_cooldown_the_probe_is_judged_as_an_enforcing_ones_would_be() -> None:
    engine, harness, backend, lines = shadowed()
    await trip(harness)
    backend.failing = False
    engine.clock.advance(ToolPolicy().trip_cooldown())  # type: ignore[attr-defined]
    await harness.call_tool("ava", "lookup")
    assert engine.view(KEY).state == "closed"
    recovered = next(e for e in lines if e.type == ev.RECOVERED)
    assert recovered.fields["shadow"] is True


async def test_a_held_shadow_breaker_still_refuses() -> None:
    engine, harness, backend, _ = shadowed()
    await harness.call_tool("ava", "lookup")
    engine.hold(KEY, "ana", "window", 600)
    before = backend.calls
    assert (await harness.call_tool("ava", "lookup"))["held"] is True
    assert backend.calls == before


async def test_an_operator_switches_the_mode_and_it_is_written_with_from_and_to() -> None:
    engine, harness, backend, lines = shadowed()
    await trip(harness)
    engine.set_mode(KEY, "enforce", "ana", "shadow looked right")
    mode = lines[-1]
    assert (mode.type, mode.fields) == (
        ev.MODE,
        {"actor": "ana", "reason": "shadow looked right", "from": "shadow", "to": "enforce"},
    )
    before = backend.calls
    assert (await harness.call_tool("ava", "lookup"))["status"] == "circuit_open"
    assert backend.calls == before


async def test_an_operators_mode_stands_until_the_configurations_value_changes() -> None:
    engine, harness, _, _ = shadowed()
    await harness.call_tool("ava", "lookup")
    engine.set_mode(KEY, "enforce", "ana", "")
    engine.configure_mode(KEY, "shadow")  # the same value as before: the operator's stands
    assert engine.view(KEY).mode == "enforce"
    engine.configure_mode(KEY, "enforce")
    engine.configure_mode(KEY, "shadow")  # changed since: the configuration's again
    assert engine.view(KEY).mode == "shadow"


async def test_an_operators_mode_is_kept_across_a_restart(tmp_path: Path) -> None:
    engine, harness, _, _ = shadowed(tmp_path)
    await harness.call_tool("ava", "lookup")
    engine.set_mode(KEY, "enforce", "ana", "")
    engine.close()
    again, *_ = shadowed(tmp_path)
    assert again.view(KEY).mode == "enforce"


def test_an_unknown_mode_is_a_clear_error() -> None:
    engine, *_ = shadowed()
    engine.admit(engine.enter(KEY, "ava", "crm", "lookup", 30.0), 30.0)
    with pytest.raises(ValueError, match="'enforce' or 'shadow'"):
        engine.set_mode(KEY, "audit", "ana", "")


async def test_a_would_be_refused_call_its_caller_cancels_is_written_abandoned() -> None:
    engine, harness, backend, lines = shadowed()
    await trip(harness)
    started = asyncio.Event()

    async def hangs(args: Any = None) -> dict[str, int]:
        backend.calls += 1
        started.set()
        await asyncio.Event().wait()
        return {}

    harness.register(Tool("slow", backend="crm", attempts=1, function=hangs))
    task = asyncio.create_task(harness.call_tool("ava", "slow"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    would, completed = lines[-2], lines[-1]
    assert (would.type, would.fields["outcome"]) == (ev.CALL_WOULD_DENY, "caller_error")
    assert (completed.fields["outcome"], completed.fields["counted"]) == ("caller_error", False)
    view = engine.view(KEY)
    assert (view.state, view.count) == ("open", ToolPolicy().failure_threshold)
