"""Transitions are typed events, one class per kind: made by the core, stamped by the engine,
and read back as the same classes from the audit log, a trace and the feed."""

from pathlib import Path

from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.core.breaker import Breaker
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import (
    Event,
    HalfOpened,
    Paged,
    Recovered,
    Reopened,
    Reset,
    Restored,
    Tripped,
    decoded,
)
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.policy import ToolPolicy
from breakerdeck.engine.state import State
from breakerdeck.engine.storage.audit import AuditLog

KEY = "search@default"
DOWN = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="refused")


def fail(engine: Engine, times: int) -> list[Event]:
    """`times` counted failures on KEY; every event the engine wrote for them."""
    seen: list[Event] = []
    unsubscribe = engine.subscribe(seen.append)
    for _ in range(times):
        call = engine.new_call(KEY, "planner", "search", "search", 5.0)
        engine.admit(call, 10.0)
        engine.complete(call, DOWN, "refused", "tool_error")
    unsubscribe()
    return seen


def test_the_core_trips_with_a_typed_tripped_carrying_the_designs_fields() -> None:
    breaker = Breaker(KEY, ToolPolicy())
    made = [t for n in range(3) for t in breaker.record(n, DOWN, float(n))]
    [tripped] = made
    assert isinstance(tripped, Tripped)
    assert (tripped.failure_class, tripped.count) == (OutcomeClass.UPSTREAM_FAILURE, 3)
    assert list(tripped.fields) == ["failure_class", "count", "cooldown_seconds"]


def test_a_failed_probe_is_reopened_then_paged_on_the_second() -> None:
    breaker = Breaker(KEY, ToolPolicy())
    for n in range(3):
        breaker.record(n, DOWN, 0.0)
    kinds = []
    for probe in (10, 11):
        [half_open] = breaker.poll(10_000.0 * probe)
        breaker.admit(probe, 10_000.0 * probe, 10.0)
        kinds += [half_open, *breaker.record(probe, DOWN, 10_000.0 * probe)]
    assert [type(k) for k in kinds] == [HalfOpened, Reopened, HalfOpened, Reopened, Paged]


def test_a_probe_that_succeeds_recovers_and_a_reset_names_its_actor() -> None:
    breaker = Breaker(KEY, ToolPolicy())
    for n in range(3):
        breaker.record(n, DOWN, 0.0)
    breaker.poll(10_000.0)
    breaker.admit(9, 10_000.0, 10.0)
    [recovered] = breaker.record(9, SUCCESS, 10_000.0)
    [reset] = breaker.reset("ana", "vendor fixed it")
    assert isinstance(recovered, Recovered)
    assert isinstance(reset, Reset) and (reset.actor, reset.reason) == ("ana", "vendor fixed it")


def test_the_engine_stamps_the_trip_with_its_cause_and_the_causes_time() -> None:
    with Engine(ToolPolicy(), clock=ManualClock()) as engine:
        *_, line, tripped = fail(engine, 3)
    assert isinstance(tripped, Tripped)
    assert tripped.cause_seq == line.seq == tripped.seq - 1
    assert tripped.wall == line.wall and tripped.agent == "planner"
    assert tripped.fields["cause_seq"] == line.seq
    assert tripped.view is not None and tripped.view.state is State.OPEN


def test_a_trip_reads_back_from_the_audit_log_as_a_tripped(tmp_path: Path) -> None:
    clock = ManualClock()
    with Engine(ToolPolicy(), clock=clock, state_dir=tmp_path) as engine:
        *_, tripped = fail(engine, 3)
        assert engine.audit is not None
        engine.audit.flush()
    with AuditLog(tmp_path / "audit.sqlite3", wall=clock.wall) as log:
        [back] = log.query(types=[ev.TRIPPED])
    assert isinstance(back, Tripped) and back == tripped
    assert back.failure_class is OutcomeClass.UPSTREAM_FAILURE


def test_a_restart_restores_a_typed_verdict(tmp_path: Path) -> None:
    clock = ManualClock()
    with Engine(ToolPolicy(), clock=clock, state_dir=tmp_path) as engine:
        fail(engine, 3)
    with Engine(ToolPolicy(), clock=clock, state_dir=tmp_path) as engine:
        [restored] = engine.restore()
    assert isinstance(restored, Restored)
    assert (restored.state, restored.count) == (State.OPEN, 3)


def test_a_relayed_transition_is_known_by_its_origin_and_keeps_its_fields_last() -> None:
    record = {"failure_class": "auth_failure", "count": 5, "cooldown_seconds": 60.0}
    event = decoded(4, ev.TRIPPED, KEY, KEY, 1.0, {**record, "origin": "replica-b"})
    assert isinstance(event, Tripped) and event.relayed
    assert event.origin == "replica-b" and event.cause_seq is None
    assert list(event.fields) == [*record, "origin"]


def test_a_record_with_other_fields_reads_back_untyped_and_unchanged() -> None:
    fields = {"count": 5, "failure_class": "upstream_failure", "cooldown_seconds": 60.0}
    event = decoded(4, ev.TRIPPED, KEY, None, 1.0, fields)
    assert type(event) is Event
    assert list(event.fields) == ["count", "failure_class", "cooldown_seconds"]


def test_a_record_with_an_unknown_failure_class_reads_back_untyped() -> None:
    fields = {"failure_class": "gremlins", "count": 5, "cooldown_seconds": 60.0}
    assert type(decoded(4, ev.TRIPPED, KEY, None, 1.0, fields)) is Event


def test_a_relayed_record_read_back_untyped_is_still_known_as_relayed() -> None:
    fields = {"count": 5, "failure_class": "upstream_failure", "origin": "replica-b"}
    event = decoded(4, ev.TRIPPED, KEY, KEY, 1.0, fields)
    assert type(event) is Event and event.relayed
