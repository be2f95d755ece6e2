"""The engine's shell: what it writes, in which order, and what it skips when nobody reads."""

from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.core.breaker import DenyReason
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


REVOKED = Outcome(OutcomeClass.CREDENTIAL_REVOKED, counted=False, detail="401")


def succeed(engine: Engine, key: str = KEY, agent: str = "ava") -> None:
    call = engine.new_call(key, agent, "payments", "charge", 30)
    if engine.admit(call, 61).allowed:
        engine.complete(call, Outcome(OutcomeClass.SUCCESS), "ok", 200)


def watched(engine: Engine) -> list[ev.Event]:
    lines: list[ev.Event] = []
    engine.subscribe(lines.append)
    return lines


def test_a_completed_line_is_typed_and_its_fields_follow_from_its_attributes():
    engine = Engine(ToolPolicy(), clock=ManualClock())
    lines = watched(engine)

    fail(engine)

    line = lines[0]
    assert isinstance(line, ev.CallCompleted)
    assert line.outcome is OutcomeClass.UPSTREAM_FAILURE and line.counted
    assert line.call_id == "call-000001"
    assert list(line.fields) == [
        *("call_id", "platform", "tool", "admitted_t", "admitted_as", "probe", "attempts"),
        *("deadline_seconds", "fault", "refresh", "platform_status", "agent_status"),
        *("outcome", "counted", "retry_after_seconds", "admitted_seq"),
    ]
    assert line.fields["outcome"] == "upstream_failure" and line.fields["agent_status"] == 502


def test_every_listener_reads_one_public_record_built_once():
    engine = Engine(ToolPolicy(), clock=ManualClock())
    read: list[dict] = []
    engine.subscribe(lambda event: read.append(ev.record(event, engine.epoch)))
    engine.subscribe(lambda event: read.append(ev.record(event, engine.epoch)))

    succeed(engine)

    assert len(read) == 2 and read[0] is read[1]


def test_a_success_that_changes_nothing_carries_no_view_but_the_keys_first_line_does():
    engine = Engine(ToolPolicy(), clock=ManualClock())
    lines = watched(engine)

    succeed(engine)
    succeed(engine)

    assert lines[0].view is not None and lines[0].view.seq == lines[0].seq
    assert lines[1].view is None


def test_a_new_agent_on_a_shared_key_brings_the_view_that_names_it():
    engine = Engine(ToolPolicy(), clock=ManualClock())
    lines = watched(engine)
    succeed(engine, agent="ava")

    succeed(engine, agent="bob")

    assert lines[-1].view is not None and lines[-1].view.agents == ("ava", "bob")


def test_the_last_line_a_failure_writes_carries_the_breaker_after_it():
    engine = Engine(ToolPolicy(), clock=ManualClock())
    lines = watched(engine)

    for _ in range(3):
        fail(engine)

    counted = [(e.type, e.view.count if e.view else None) for e in lines]
    assert counted == [
        (ev.CALL_COMPLETED, 1),
        (ev.CALL_COMPLETED, 2),
        (ev.CALL_COMPLETED, None),
        (ev.TRIPPED, 3),
    ]
    assert lines[-1].view is not None and lines[-1].view.state == "open"
    assert lines[-1].view == engine.view(KEY)


def test_time_and_the_operator_put_the_view_on_their_transitions():
    clock = ManualClock()
    engine = Engine(ToolPolicy(), clock=clock)
    lines = watched(engine)
    for _ in range(3):
        fail(engine)
    clock.advance(31)

    engine.poll()
    half_open = lines[-1]
    engine.reset(KEY, actor="ann", reason="fixed")

    assert half_open.type == ev.HALF_OPEN and half_open.view is not None
    assert half_open.view.state == "half_open"
    assert lines[-1].type == ev.RESET and lines[-1].view is not None
    assert (lines[-1].view.state, lines[-1].view.trip_cause) == ("closed", None)


def test_a_revoked_and_a_restored_credential_carry_the_paused_flag():
    engine = Engine(ToolPolicy(), clock=ManualClock())
    lines = watched(engine)
    call = engine.new_call(KEY, "ava", "payments", "charge", 30)
    engine.admit(call, 61)
    engine.complete(call, REVOKED, "http_401", 401)
    revoked = lines[-1]

    restored = engine.restore_credential(KEY, actor="ann")

    assert revoked.type == ev.CREDENTIAL_REVOKED and revoked.view is not None
    assert revoked.view.paused and lines[0].view is None
    assert restored.view is not None and not restored.view.paused
