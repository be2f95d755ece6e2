"""The engine's shell: what it writes, in which order, and what it skips when nobody reads."""

from breakerdeck.engine import events as ev
from breakerdeck.engine.breaker import DenyReason
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.policy import ToolPolicy

UPSTREAM = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="refused")
KEY = "payments@default"


def fail(engine: Engine, key: str = KEY) -> None:
    call = engine.new_call(key, "ava", "payments", "charge", 30)
    if engine.admit(call, 61).allowed:
        engine.complete(call, UPSTREAM, "refused", 502)


def test_a_refusal_nobody_reads_writes_no_line_and_takes_no_seq():
    engine = Engine(ToolPolicy(), clock=ManualClock())
    for _ in range(3):
        fail(engine)
    before = engine.seq

    admission = engine.admit(engine.new_call(KEY, "ava", "payments", "charge", 30), 61)

    assert not admission.allowed and admission.reason is DenyReason.OPEN
    assert admission.retry_after == 30
    assert engine.seq == before


def test_a_refusal_with_a_listener_is_written():
    engine = Engine(ToolPolicy(), clock=ManualClock())
    lines: list[ev.Event] = []
    engine.subscribe(lines.append)
    for _ in range(3):
        fail(engine)

    engine.admit(engine.new_call(KEY, "ava", "payments", "charge", 30), 61)

    assert lines[-1].type == ev.CALL_DENIED and lines[-1].seq == engine.seq


def test_a_listener_that_calls_the_engine_sees_what_that_wrote_after_the_event_it_handled():
    engine = Engine(ToolPolicy(), clock=ManualClock())
    seen: list[ev.Event] = []

    def reset_on_trip(event: ev.Event) -> None:
        if event.type == ev.TRIPPED:
            engine.reset(event.key, actor="listener", reason="auto")
        seen.append(event)

    engine.subscribe(reset_on_trip)
    for _ in range(3):
        fail(engine)

    assert [e.type for e in seen[-2:]] == [ev.TRIPPED, ev.RESET]
    assert [e.seq for e in seen] == sorted(e.seq for e in seen)
    assert engine.view(KEY).state == "closed"


def test_a_call_id_is_printed_from_its_number_on_the_line_and_the_idempotency_key():
    engine = Engine(ToolPolicy(), clock=ManualClock(), instance="abc")
    lines: list[ev.Event] = []
    engine.subscribe(lines.append)
    call = engine.new_call(KEY, "ava", "payments", "charge", 30)
    engine.admit(call, 61)

    engine.complete(call, UPSTREAM, "refused", 502)

    assert isinstance(call.number, int)
    assert lines[-1].fields["call_id"] == call.call_id == f"call-{call.number:06d}"
    assert engine.idempotency_key(call.number) == f"abc.{call.call_id}"
