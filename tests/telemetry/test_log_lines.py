"""The front doors' log says each transition, reset and page in one escaped line (issue 20):
what happened to which key, and what it means for calls now."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import iso_utc
from breakerdeck.engine.front import logs
from breakerdeck.engine.policy import AgentPolicy
from tests.telemetry.test_metrics_honest import trip


@pytest.fixture
def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.set_level(logging.INFO, logger="breakerdeck.breakers")
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(logs.OneLine("%(message)s").format(record))

    handler = Collect()
    logs.breakers.addHandler(handler)
    yield lines
    logs.breakers.removeHandler(handler)


def test_a_trip_is_one_line_with_its_cause_count_and_cooldown(said: list[str]) -> None:
    with Engine(AgentPolicy(), clock=ManualClock()) as engine:
        engine.subscribe(logs.say_transitions)
        trip(engine, "research-bot")
    assert said == ["tripped research-bot: upstream ×5, open 300 s"]


def test_a_probe_that_fails_twice_reopens_and_pages(said: list[str]) -> None:
    clock = ManualClock()
    with Engine(AgentPolicy(), clock=clock) as engine:
        engine.subscribe(logs.say_transitions)
        trip(engine, "research-bot")
        for _ in range(2):
            clock.advance(engine.breaker("research-bot").cooldown)
            trip(engine, "research-bot")
    assert said[1:] == [
        "half-open research-bot: one probe may go",
        "reopened research-bot: the probe failed, open 300 s",
        "half-open research-bot: one probe may go",
        "reopened research-bot: the probe failed, open 300 s",
        "paged research-bot: open through two cooldowns",
    ]


def test_a_reset_names_its_actor_and_reason_escaped(said: list[str]) -> None:
    with Engine(AgentPolicy(), clock=ManualClock()) as engine:
        engine.subscribe(logs.say_transitions)
        trip(engine, "research-bot")
        engine.reset("research-bot", "ops", "fixed\n\x1b[31mforged line")
    assert said[-1] == "reset research-bot by ops: fixed\\x0a\\x1b[31mforged line"


def test_a_verdict_restored_at_start_is_not_said(tmp_path: Path, said: list[str]) -> None:
    with Engine(AgentPolicy(), clock=ManualClock(), state_dir=tmp_path) as engine:
        trip(engine, "research-bot")
    said.clear()
    with Engine(AgentPolicy(), clock=ManualClock(), state_dir=tmp_path) as engine:
        engine.subscribe(logs.say_transitions)
        engine.restore()
    assert said == []


def test_the_doors_log_listens_without_making_a_healthy_call_write_a_line(
    said: list[str],
) -> None:
    with Engine(AgentPolicy(), clock=ManualClock()) as engine:
        engine.subscribe(logs.say_transitions, calls=False)
        guard = engine.guard("research-bot", agent="research-bot", lease=30.0)
        for _ in range(10):
            with guard:
                pass
        assert engine.seq == 0
        trip(engine, "research-bot")
    assert said == ["tripped research-bot: upstream ×5, open 300 s"]


def test_a_hold_says_who_until_when_and_why_escaped(said: list[str]) -> None:
    clock = ManualClock()
    with Engine(AgentPolicy(), clock=clock) as engine:
        engine.subscribe(logs.say_transitions, calls=False)
        engine.configure_mode("payments")
        engine.hold("payments", "ana", "vendor\nmaintenance", 1800)
    until = iso_utc(clock.wall() + 1800)
    assert said == [
        f"held payments by ana until {until}, every call refused: vendor\\x0amaintenance"
    ]


def test_a_release_names_its_actor_or_the_holds_end(said: list[str]) -> None:
    clock = ManualClock()
    with Engine(AgentPolicy(), clock=clock) as engine:
        engine.subscribe(logs.say_transitions, calls=False)
        engine.configure_mode("payments")
        engine.hold("payments", "ana", "maintenance", 60)
        engine.release("payments", "bo")
        engine.hold("payments", "ana", "maintenance", 60)
        clock.advance(60)
        engine.poll()
    assert [line for line in said if line.startswith("released")] == [
        "released payments by bo",
        "released payments: its hold ran out",
    ]


def test_a_mode_change_says_both_modes_and_why(said: list[str]) -> None:
    with Engine(AgentPolicy(), clock=ManualClock()) as engine:
        engine.subscribe(logs.say_transitions, calls=False)
        engine.configure_mode("payments")
        engine.set_mode("payments", "shadow", "ana", "rollout")
    assert said == ["shadow payments by ana (was enforce): rollout"]


def test_a_shadow_breakers_trip_says_calls_still_go_through(said: list[str]) -> None:
    with Engine(AgentPolicy(), clock=ManualClock(), mode="shadow") as engine:
        engine.subscribe(logs.say_transitions, calls=False)
        trip(engine, "research-bot")
    assert said == [
        "tripped research-bot: upstream ×5, open 300 s (shadow: calls still go through)"
    ]
