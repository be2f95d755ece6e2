"""The front doors' log says each transition, reset and page in one escaped line (issue 20):
what happened to which key, and what it means for calls now."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
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
