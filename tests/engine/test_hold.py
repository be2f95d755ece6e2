"""An operator's hold (DESIGN, "Operator control: hold and shadow"): every call refused without
touching the wire, no probe, nothing counted, until it is released or runs out; ending in
half-open, or closed with `close`; kept across restarts. The backend's own count is the
witness that nothing reached the wire."""

from pathlib import Path
from typing import Any

import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.core.holds import duration_seconds
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.errors import UnknownKey
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.engine.results import agent_halted

KEY = "crm@default"
HOUR = 3600.0


class Backend:
    """A function tool's backend: counts what reaches it, fails while `failing` says so."""

    def __init__(self) -> None:
        self.calls = 0
        self.failing = False

    async def run(self, args: Any = None) -> dict[str, int]:
        self.calls += 1
        if self.failing:
            raise ConnectionError("crm unreachable")
        return {"id": self.calls}


def harnessed(engine: Engine, backend: Backend) -> Harness:
    harness = Harness(engine)
    harness.register(Tool("lookup", backend="crm", attempts=1, function=backend.run))
    return harness


def watched(tmp_path: Path | None = None, **settings: Any) -> tuple[Engine, list[ev.Event]]:
    state = None if tmp_path is None else tmp_path / "state"
    engine = Engine(ToolPolicy(), clock=ManualClock(), state_dir=state, **settings)
    engine.restore()
    lines: list[ev.Event] = []
    engine.subscribe(lines.append)
    return engine, lines


async def test_a_held_breaker_refuses_every_call_and_nothing_reaches_the_backend() -> None:
    engine, lines = watched()
    backend = Backend()
    harness = harnessed(engine, backend)
    assert (await harness.call_tool("ava", "lookup"))["status"] == "ok"
    engine.hold(KEY, "ana", "vendor maintenance", HOUR)
    for _ in range(5):
        answer = await harness.call_tool("ava", "lookup")
        assert answer["status"] == "circuit_open" and answer["held"] is True
        assert answer["retry_after_ms"] == HOUR * 1000
        assert answer["reason"] == "held open by ana until 01:00 UTC: vendor maintenance"
    assert backend.calls == 1
    denied = [e for e in lines if e.type == ev.CALL_DENIED]
    assert [e.fields["reason"] for e in denied] == ["held"] * 5
    view = engine.view(KEY)
    assert (view.state, view.count, view.held_by, view.held_reason) == (
        "held",
        0,
        "ana",
        "vendor maintenance",
    )


async def test_a_hold_that_runs_out_is_released_by_expiry_into_half_open() -> None:
    engine, lines = watched()
    backend = Backend()
    harness = harnessed(engine, backend)
    await harness.call_tool("ava", "lookup")
    engine.hold(KEY, "ana", "window", 1800)
    engine.clock.advance(1800)  # type: ignore[attr-defined]
    engine.poll()
    kinds = [e.type for e in lines if e.type.startswith("circuit_breaker")]
    assert kinds == [ev.HELD, ev.RELEASED, ev.HALF_OPEN]
    released = next(e for e in lines if e.type == ev.RELEASED)
    assert released.fields["actor"] == "expiry"
    assert (await harness.call_tool("ava", "lookup"))["status"] == "ok"  # the probe
    assert engine.view(KEY).state == "closed"
    assert backend.calls == 2


async def test_release_with_close_writes_released_then_a_reset_by_the_same_actor() -> None:
    engine, lines = watched()
    await harnessed(engine, Backend()).call_tool("ava", "lookup")
    engine.hold(KEY, "ana", "window", HOUR)
    held = len(lines)
    engine.release(KEY, "bo", "vendor says done", close=True)
    tail = [(e.type, e.fields.get("actor")) for e in lines[held:]]
    assert tail == [(ev.RELEASED, "bo"), (ev.RESET, "bo")]
    assert engine.view(KEY).state == "closed"


async def test_a_reset_during_a_hold_ends_the_hold_first() -> None:
    engine, lines = watched()
    await harnessed(engine, Backend()).call_tool("ava", "lookup")
    engine.hold(KEY, "ana", "window", HOUR)
    engine.reset(KEY, "bo", "all clear")
    assert [e.type for e in lines[-2:]] == [ev.RELEASED, ev.RESET]
    assert lines[-2].fields["actor"] == "bo"


async def test_a_success_admitted_before_the_hold_does_not_end_it() -> None:
    engine, _ = watched()
    harness = harnessed(engine, Backend())
    await harness.call_tool("ava", "lookup")
    call = engine.enter(KEY, "ava", "crm", "lookup", 30.0)
    assert engine.admit(call, 30.0).allowed
    engine.hold(KEY, "ana", "window", HOUR)
    from breakerdeck.engine.outcomes import SUCCESS

    engine.complete(call, SUCCESS, "ok", "ok")
    assert engine.view(KEY).state == "held"


async def test_a_failed_probe_after_a_hold_reopens_at_the_first_step_as_the_first_failure() -> None:
    engine, _ = watched()
    backend = Backend()
    harness = harnessed(engine, backend)
    await harness.call_tool("ava", "lookup")
    engine.hold(KEY, "ana", "window", 60)
    engine.clock.advance(60)  # type: ignore[attr-defined]
    engine.poll()
    backend.failing = True
    await harness.call_tool("ava", "lookup")
    view = engine.view(KEY)
    assert (view.state, view.failed_probes, view.cooldown) == (
        "open",
        1,
        ToolPolicy().trip_cooldown(),
    )


def test_under_the_agent_policy_a_held_refusal_is_the_403_the_design_names() -> None:
    engine = Engine(AgentPolicy(), clock=ManualClock())
    call = engine.enter("billing", "billing", "stripe", "stripe", 30.0)
    engine.admit(call, 30.0)
    engine.hold("billing", "ana", "stripe maintenance", 1200)
    refused = engine.enter("billing", "billing", "stripe", "stripe", 30.0)
    answer = agent_halted(engine.admit(refused, 30.0))
    assert answer.status == 403
    assert answer.body["reason"] == "circuit_breaker_held"
    halt = answer.body["halt"]
    assert (halt["state"], halt["recoverable_by"], halt["cause"]) == (
        "breaker_held",
        "operator",
        "operator_hold",
    )
    assert (halt["until"], halt["retry_after_seconds"]) == ("2026-01-01T00:20:00.000Z", 1200)
    assert "stripe maintenance" in halt["instructions"]


def test_after_a_hold_the_others_wait_on_its_probe_with_cause_operator_hold() -> None:
    engine = Engine(AgentPolicy(), clock=ManualClock())
    engine.admit(engine.enter("billing", "billing", "stripe", "stripe", 30.0), 30.0)
    engine.hold("billing", "ana", "window", 60)
    engine.clock.advance(60)  # type: ignore[attr-defined]
    probe = engine.enter("billing", "billing", "stripe", "stripe", 30.0)
    assert engine.admit(probe, 30.0).as_probe
    other = engine.enter("billing", "billing", "stripe", "stripe", 30.0)
    halt = agent_halted(engine.admit(other, 30.0)).body["halt"]
    assert (halt["state"], halt["cause"]) == ("breaker_half_open", "operator_hold")


async def test_a_hold_survives_a_restart_until_its_end(tmp_path: Path) -> None:
    engine, _ = watched(tmp_path)
    await harnessed(engine, Backend()).call_tool("ava", "lookup")
    engine.hold(KEY, "ana", "window", HOUR)
    engine.close()
    again, _ = watched(tmp_path)
    view = again.view(KEY)
    assert (view.state, view.held_by) == ("held", "ana")
    backend = Backend()
    assert (await harnessed(again, backend).call_tool("ava", "lookup"))["held"] is True
    assert backend.calls == 0


async def test_a_hold_restored_after_its_end_is_released_at_start(tmp_path: Path) -> None:
    engine, _ = watched(tmp_path)
    await harnessed(engine, Backend()).call_tool("ava", "lookup")
    engine.hold(KEY, "ana", "window", 600)
    engine.close()
    clock = ManualClock()
    clock.advance(700)
    again = Engine(ToolPolicy(), clock=clock, state_dir=tmp_path / "state")
    lines: list[ev.Event] = []
    again.subscribe(lines.append)
    again.restore()
    assert [e.type for e in lines] == [ev.RESTORED, ev.RELEASED, ev.HALF_OPEN]
    assert lines[1].fields["actor"] == "expiry"


@pytest.mark.parametrize(
    ("reason", "seconds", "words"),
    [
        ("", HOUR, "needs a reason"),
        ("x" * 501, HOUR, "at most 500"),
        ("window", 86_401, "1 s to 86400 s"),
        ("window", 0, "1 s to 86400 s"),
    ],
)
def test_a_hold_out_of_bounds_is_refused_and_changes_nothing(
    reason: str, seconds: float, words: str
) -> None:
    engine, lines = watched()
    engine.admit(engine.enter(KEY, "ava", "crm", "lookup", 30.0), 30.0)
    with pytest.raises(ValueError, match=words):
        engine.hold(KEY, "ana", reason, seconds)
    assert engine.view(KEY).state == "closed" and lines == []


def test_a_hold_on_an_unknown_key_names_the_known_ones() -> None:
    engine, _ = watched()
    engine.admit(engine.enter(KEY, "ava", "crm", "lookup", 30.0), 30.0)
    with pytest.raises(UnknownKey, match="crm@default"):
        engine.hold("nope@default", "ana", "window", HOUR)


def test_a_reason_with_control_characters_and_markup_is_kept_as_given() -> None:
    engine, lines = watched()
    engine.admit(engine.enter(KEY, "ava", "crm", "lookup", 30.0), 30.0)
    reason = "[bold red]down[/]\x1b[2J\nnext"
    engine.hold(KEY, "ana", reason, HOUR)
    assert lines[-1].fields["reason"] == reason
    assert engine.view(KEY).held_reason == reason


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90.0), ("30m", 1800.0), ("2h", 7200.0), (" 5m ", 300.0)]
)
def test_a_holds_duration_is_given_in_seconds_minutes_or_hours(text: str, seconds: float) -> None:
    assert duration_seconds(text, 86_400) == seconds


@pytest.mark.parametrize("text", ["90", "1.5h", "2d", "-5m", "0s", "25h", "m", ""])
def test_any_other_duration_is_a_clear_error(text: str) -> None:
    with pytest.raises(ValueError, match=r"duration|at most"):
        duration_seconds(text, 86_400)


def test_the_trace_prints_the_holds_end_in_the_runs_seconds_and_the_audit_log_in_utc() -> None:
    engine, lines = watched()
    engine.admit(engine.enter(KEY, "ava", "crm", "lookup", 30.0), 30.0)
    engine.hold(KEY, "ana", "window", 90)
    held = lines[-1]
    assert ev.record(held, engine.epoch)["until_t"] == 90.0
    audited = ev.audit_form(held)
    assert audited is not None and audited.fields["until"] == "2026-01-01T00:01:30.000Z"
