"""A half-open view says whether its probe is out, and since when (`BreakerView.probe_since`):
admitting a probe writes no line, so a console reads it from the view."""

from __future__ import annotations

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy

FAILED = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="refused")


def tripped() -> tuple[Engine, ManualClock]:
    clock = ManualClock(now=100.0)
    engine = Engine(AgentPolicy(), clock=clock)
    for _ in range(5):
        call = engine.enter("ava", "ava", "payments", "charge", 30)
        engine.admit(call, lease=30)
        engine.complete(call, FAILED, "refused", 502)
    return engine, clock


def test_half_open_by_time_alone_has_no_probe_out() -> None:
    engine, clock = tripped()
    clock.advance(300)
    engine.poll()
    view = engine.view("ava")
    assert view.state == "half_open" and view.probe_since is None


def test_the_admitted_probe_is_out_since_its_admission() -> None:
    engine, clock = tripped()
    clock.advance(300)
    engine.poll()
    clock.advance(12)
    probe = engine.enter("ava", "ava", "payments", "charge", 30)
    assert engine.admit(probe, lease=30).as_probe
    clock.advance(3)
    assert engine.view("ava").probe_since == clock.wall() - 3


def test_a_probe_admitted_with_its_half_open_is_on_that_lines_view() -> None:
    engine, clock = tripped()
    seen = []
    engine.subscribe(lambda event: seen.append(event))
    clock.advance(300)
    probe = engine.enter("ava", "ava", "payments", "charge", 30)
    assert engine.admit(probe, lease=30).as_probe
    half_open = next(e for e in seen if e.type == "circuit_breaker.half_open")
    assert half_open.view is not None and half_open.view.probe_since == clock.wall()


def test_the_probes_outcome_clears_it() -> None:
    engine, clock = tripped()
    clock.advance(300)
    probe = engine.enter("ava", "ava", "payments", "charge", 30)
    engine.admit(probe, lease=30)
    engine.complete(probe, FAILED, "refused", 502)
    view = engine.view("ava")
    assert view.state == "open" and view.probe_since is None
